"""Published serving latency in `specsim validate` (workloads/latency/): loading, bad input,
and the measured rows the serving model is held to."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specsim.errors import SpecError
from specsim.serving.latency_rows import load_latency_rows, predict_latency_rows
from specsim.specs.paths import builtin_dir


@pytest.fixture(scope="module")
def predicted() -> list[object]:
    return predict_latency_rows(*load_latency_rows())  # type: ignore[arg-type]


def test_decode_gaps_of_a_lone_request_are_within_20_percent(predicted: list[object]) -> None:
    """At concurrency 1 a round is one decoding step: gpustack's vLLM 0.11 Qwen3-8B on an H100
    (TPOT 7.22, ITL 7.23 ms) and sgl-cookbook's SGLang 0.5.6 Llama-3.1-70B at TP 8 on A100s
    (18.63 / 18.64 ms at 1k prompts, 18.81 / 18.81 at 8k)."""
    lone = [r for r in predicted if r.concurrency == 1  # type: ignore[attr-defined]
            and r.metric != "ttft_median_ms"]  # type: ignore[attr-defined]
    assert len(lone) == 6
    for r in lone:
        assert abs(r.error_pct) <= 20.0, (r.id, r.measured, r.predicted)  # type: ignore[attr-defined]


def test_every_row_is_predicted(predicted: list[object]) -> None:
    assert predicted and all(r.predicted is not None for r in predicted)  # type: ignore[attr-defined]


def _file(tmp_path: Path, change: dict[str, object]) -> str:
    data = yaml.safe_load((builtin_dir("latency") / "serving-latency.yaml").read_text())
    data["rows"] = [{**data["rows"][0], **change}]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize(("change", "field"), [
    ({"metric": "ttft_p50"}, "metric"), ({"group": "nope"}, "group"),
    ({"measured": -1}, "measured"), ({"concurrency": "many"}, "concurrency"),
    ({"measurd": 3}, "measurd"),
])
def test_bad_rows_are_one_line_naming_the_field(tmp_path: Path, change: dict[str, object],
                                                field: str) -> None:
    with pytest.raises(SpecError) as err:
        load_latency_rows([_file(tmp_path, change)])
    text = str(err.value)
    assert "mine.yaml" in text and field in text and "\n" not in text


def test_validate_prints_and_writes_the_latency_rows(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "specsim", "validate", "--published",
                        "eagle3-paper-sglang-h100", "--latency", "serving-latency", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert len(data["latency"]) == 24
    assert {s["metric"] for s in data["latency_summary"]} == {
        "ttft_median_ms", "tpot_median_ms", "itl_median_ms"}

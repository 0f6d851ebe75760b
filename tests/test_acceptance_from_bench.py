"""`acceptance fit` on the engines' own benchmark results (tests/data/engine_results/, formats
of vLLM 0.33.0 `vllm bench serve --save-result` and SGLang 0.5.23 `sglang.bench_serving
--output-file`, cited in its README.md): vLLM's per-position rates become conditional alphas by
the /metrics path's own conversion, SGLang's accept_length becomes tau + gamma, and every bad
input is one line naming the file and the field (exit 2, nothing written).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from specsim.errors import SpecError
from specsim.measurement.bench_acceptance import is_bench_result, read_bench_acceptance
from specsim.measurement.vllm_metrics import parse_prometheus_metrics
from specsim.specs.acceptance import tau_constant
from specsim.specs.workloads import load_workload
from tests.test_cli import run

DATA = Path(__file__).parent / "data" / "engine_results"
VLLM = DATA / "vllm_spec.json"
SGLANG = DATA / "sglang_two_runs.jsonl"
# vllm_spec.json: 1,600 drafts; 1,120, 800, 560 rounds accepted positions 1, 2, 3 (README.md).
RATES = (0.7, 0.5, 0.35)
# Hand-derived alpha_k = r_k / r_(k-1), r_0 = 1: 0.7, 0.5 / 0.7 = 5/7, 0.35 / 0.5 = 0.7.
ALPHAS = (0.7, 5 / 7, 0.7)
# sglang_two_runs.jsonl: accept_length of line 1 and line 2.
SGLANG_TAUS = (3.0125, 2.9987)


def _vllm_run(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VLLM.read_text())
    return {**data, **changes}


def _sglang_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SGLANG.read_text().splitlines()]


def _write(path: Path, *objects: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def _error(path: Path, **kwargs: Any) -> str:
    with pytest.raises(SpecError) as info:
        read_bench_acceptance(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


# ---- vLLM: per-position rates ----------------------------------------------------------------


def test_vllm_rates_become_conditional_alphas() -> None:
    measured = read_bench_acceptance(VLLM)
    assert measured.profile.position_alphas == pytest.approx(ALPHAS, rel=1e-12)
    assert measured.tokens_per_round == pytest.approx(1 + sum(RATES))  # 2.55
    assert measured.draft_tokens == 3 and measured.num_drafts == 1600
    for part in (str(VLLM), "line 1", "vLLM server", "vllm bench serve", "backend openai",
                 "1,600 drafts"):
        assert part in measured.source


def test_vllm_rates_match_the_metrics_path() -> None:
    """The same run as a /metrics page (its counters, README.md) gives the same alphas."""
    page = ("vllm:spec_decode_num_drafts 1600\nvllm:spec_decode_num_draft_tokens 4800\n"
            "vllm:spec_decode_num_accepted_tokens 2480\n" + "".join(
                f'vllm:spec_decode_num_accepted_tokens_per_pos{{position="{i}"}} {a}\n'
                for i, a in enumerate((1120, 800, 560))))
    counts = parse_prometheus_metrics(page)
    measured = read_bench_acceptance(VLLM)
    assert measured.counts is not None
    np.testing.assert_allclose(measured.counts.conditional_alphas, counts.conditional_alphas,
                               rtol=1e-12)
    np.testing.assert_allclose(measured.counts.marginal_rates, RATES, rtol=1e-12)


def test_vllm_runs_that_agree_pool_their_counters(tmp_path: Path) -> None:
    """Two runs (--append-result) within 1%: counts summed, i.e. the drafts-weighted mean."""
    second = _vllm_run(spec_decode_num_drafts=400, spec_decode_draft_tokens=1200,
                       spec_decode_per_position_acceptance_rates=[0.7, 0.5, 0.36],
                       spec_decode_acceptance_length=2.56)
    path = _write(tmp_path / "two.json", _vllm_run(), second)
    measured = read_bench_acceptance(path)
    assert measured.num_drafts == 2000
    third = (0.35 * 1600 + 0.36 * 400) / 2000 / 0.5  # a_3 / a_2 over both runs
    assert measured.profile.position_alphas == pytest.approx((0.7, 5 / 7, third), rel=1e-12)
    assert "lines 1, 2" in measured.source and "mean of 2 runs" in measured.source


# ---- SGLang: tokens per round only -----------------------------------------------------------


def test_sglang_run_becomes_tau_over_gamma() -> None:
    measured = read_bench_acceptance(SGLANG, run=1, draft_tokens=3)
    assert measured.counts is None and measured.num_drafts is None
    assert measured.tokens_per_round == SGLANG_TAUS[0]
    alpha = measured.profile.position_alphas[0]
    assert float(tau_constant(alpha, 3)) == pytest.approx(SGLANG_TAUS[0], rel=1e-12)
    for part in (f"{SGLANG}: line 1", "SGLang server's accept_length", "sglang.bench_serving",
                 "drafts not reported", "3 draft tokens per round given with --draft-tokens"):
        assert part in measured.source


def test_sglang_runs_within_one_percent_are_averaged() -> None:
    """3.0125 and 2.9987 are 0.46% apart: their mean, 3.0056."""
    measured = read_bench_acceptance(SGLANG, draft_tokens=3)
    assert measured.tokens_per_round == pytest.approx(sum(SGLANG_TAUS) / 2)
    assert f"{SGLANG}: lines 1, 2 (mean of 2 runs" in measured.source
    assert read_bench_acceptance(SGLANG, run=2, draft_tokens=3).tokens_per_round == \
        SGLANG_TAUS[1]


def test_sglang_runs_apart_need_a_choice(tmp_path: Path) -> None:
    first, second = _sglang_lines()
    path = _write(tmp_path / "apart.jsonl", first, {**second, "accept_length": 3.5})
    message = _error(path, draft_tokens=3)
    assert message.startswith(f"{path}: 2 runs (lines 1, 2) measured 3.013, 3.5 tokens per round")
    assert "choose one with --run N (1..2)" in message
    assert read_bench_acceptance(path, run=2, draft_tokens=3).tokens_per_round == 3.5


# ---- bad inputs: one line naming file and field ------------------------------------------------


def test_bad_inputs_name_file_and_field(tmp_path: Path) -> None:
    cases: list[tuple[Path, dict[str, Any], str]] = [
        (DATA / "vllm_plain.json", {},
         "line 1: field 'spec_decode_acceptance_length' missing: this run did not speculate"),
        (DATA / "vllm_truncated.json", {}, "line 1: not JSON"),
        (SGLANG, {"run": 1}, "line 1: field 'accept_length' gives only tokens per round "
         "(3.013), not the draft length: give it with --draft-tokens K"),
        (SGLANG, {"run": 1, "draft_tokens": 1},
         "line 1: field 'accept_length' is 3.0125: more than --draft-tokens 1 + 1 = 2"),
        (_write(tmp_path / "null.jsonl", {**_sglang_lines()[0], "accept_length": None}),
         {"draft_tokens": 3}, "line 1: field 'accept_length' null: this run did not speculate"),
        (_write(tmp_path / "zero.json", _vllm_run(spec_decode_num_drafts=0)), {},
         "line 1: field 'spec_decode_num_drafts' is 0: this run did not speculate"),
        (_write(tmp_path / "nocount.json", {k: v for k, v in _vllm_run().items()
                                            if k != "spec_decode_num_drafts"}), {},
         "line 1: field 'spec_decode_num_drafts' missing"),
        (DATA / "sglang_no_details.jsonl", {"draft_tokens": 3}, "field 'errors' missing"),
    ]
    for path, kwargs, expected in cases:
        message = _error(path, **kwargs)
        assert message.startswith(str(path)), message
        assert expected in message, message


def test_bad_options_name_the_option() -> None:
    assert _error(VLLM, run=2) == f"option --run: 2, but {VLLM} holds 1 run; choose 1..1"
    assert _error(VLLM, draft_tokens=4) == (
        f"option --draft-tokens: 4, but {VLLM}: line 1 field "
        "'spec_decode_per_position_acceptance_rates' has 3 positions")
    assert "option --draft-tokens: must be in 1.." in _error(SGLANG, draft_tokens=0)


def test_input_kind_is_told_by_content(tmp_path: Path) -> None:
    page = tmp_path / "metrics.txt"
    page.write_text("vllm:spec_decode_num_drafts 10\n")
    json_log = tmp_path / "server.log"
    json_log.write_text('{"msg": "SpecDecoding metrics: Accepted: 5 tokens"}\n')
    assert is_bench_result(VLLM) and is_bench_result(SGLANG)
    assert is_bench_result(DATA / "vllm_truncated.json")  # refused by the reader, by name
    assert not is_bench_result(page) and not is_bench_result(json_log)
    assert not is_bench_result(tmp_path / "missing.json") and not is_bench_result(tmp_path)


# ---- the command -------------------------------------------------------------------------------


def test_fit_writes_vllm_alphas_that_load_back(tmp_path: Path) -> None:
    out = tmp_path / "vllm.yaml"
    result = run("acceptance", "fit", str(VLLM), "--out", str(out), "--context", "1000")
    assert result.returncode == 0, result.stderr
    assert "1,600 drafts" in result.stdout and "tokens per round: 2.550" in result.stdout
    profile = load_workload(str(out)).acceptance
    assert profile.position_alphas == pytest.approx(ALPHAS, abs=5.1e-7)  # 6 decimals written
    assert str(VLLM) in profile.source and "line 1" in profile.source


def test_fit_writes_sglang_tau_that_loads_back(tmp_path: Path) -> None:
    out = tmp_path / "sglang.yaml"
    result = run("acceptance", "fit", str(SGLANG), "--out", str(out), "--run", "2",
                 "--draft-tokens", "3", "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["tokens_per_round"] == SGLANG_TAUS[1] and shown["drafts"] is None
    block = yaml.safe_load(out.read_text())["acceptance"]
    assert (block["tau"], block["gamma"]) == (SGLANG_TAUS[1], 3)
    profile = load_workload(str(out)).acceptance
    assert profile.position_alphas == pytest.approx((shown["alpha"],), rel=1e-12)
    assert profile.measured_positions == 3
    assert f"{SGLANG}: line 2" in profile.source


@pytest.mark.parametrize("file, args, message", [
    ("vllm_plain.json", (), "this run did not speculate"),
    ("vllm_truncated.json", (), "line 1: not JSON"),
    ("sglang_two_runs.jsonl", (), "give it with --draft-tokens K"),
])
def test_fit_refuses_bad_results_and_writes_nothing(tmp_path: Path, file: str,
                                                    args: tuple[str, ...], message: str) -> None:
    out = tmp_path / "w.yaml"
    result = run("acceptance", "fit", str(DATA / file), "--out", str(out), *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert str(DATA / file) in result.stderr and message in result.stderr
    assert not out.exists()


def test_fit_refuses_benchmark_options_on_counters(tmp_path: Path) -> None:
    page = tmp_path / "metrics.txt"
    page.write_text("vllm:spec_decode_num_drafts 10\n")
    result = run("acceptance", "fit", str(page), "--out", str(tmp_path / "w.yaml"),
                 "--draft-tokens", "3")
    assert result.returncode == 2
    assert "option --draft-tokens: only for an engine benchmark result" in result.stderr

"""Engine benchmark results: each fixture in tests/data/engine_results/ (the formats of vLLM
0.33.0 `vllm bench serve --save-result` and SGLang 0.5.23 `sglang.bench_serving --output-file`,
cited in its README.md) reads to hand-written values; each bad file is one SpecError line naming
the file, the line and the field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from specsim.errors import SpecError
from specsim.measurement.engine_results import EngineRun, read_engine_results

DATA = Path(__file__).parent / "data" / "engine_results"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _only(path: Path, **kwargs: Any) -> EngineRun:
    runs = read_engine_results(path, **kwargs)
    assert len(runs) == 1
    return runs[0]


def _vllm_plain() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "vllm_plain.json").read_text())
    return data


def _sglang_line(number: int) -> dict[str, Any]:
    line = (DATA / "sglang_two_runs.jsonl").read_text().splitlines()[number - 1]
    data: dict[str, Any] = json.loads(line)
    return data


def _write(path: Path, *objects: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def _error(path: Path, **kwargs: Any) -> str:
    with pytest.raises(SpecError) as info:
        read_engine_results(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    return message


# ---- the fixtures read to their hand-written values -----------------------------------------


def test_vllm_plain_run() -> None:
    run = _only(DATA / "vllm_plain.json")
    assert (run.engine, run.line, run.backend, run.model_id) == ("vllm", 1, "openai", MODEL)
    assert run.file == str(DATA / "vllm_plain.json")
    assert (run.max_concurrency, run.request_rate_per_s) == (4, math.inf)
    assert (run.num_prompts, run.completed, run.failed) == (16, 16, 0)
    # 16 requests of 1,024 prompt and 256 generated tokens
    assert (run.input_tokens_per_request, run.output_tokens_per_request) == (1024.0, 256.0)
    assert run.duration_s == 12.8
    assert run.output_tokens_per_s == pytest.approx(4096 / 12.8)  # 320 tokens/s
    # the file's ms, in seconds
    assert (run.ttft_mean_s, run.ttft_median_s, run.ttft_p99_s) == pytest.approx(
        (0.0452, 0.0448, 0.0526))
    assert (run.tpot_mean_s, run.tpot_median_s, run.tpot_p99_s) == pytest.approx(
        (0.01237, 0.01236, 0.01249))
    assert (run.itl_mean_s, run.itl_median_s, run.itl_p99_s) == pytest.approx(
        (0.01237, 0.0121, 0.0198))
    assert run.tokens_per_round is None
    assert run.marginal_acceptance == ()


def test_vllm_speculative_run() -> None:
    run = _only(DATA / "vllm_spec.json")
    # 1,600 rounds accepted 1,120 + 800 + 560 = 2,480 draft tokens: 1 + 2,480 / 1,600 tokens
    # per round, and the marginal rates are each position's count over the 1,600 rounds.
    assert run.tokens_per_round == pytest.approx(1 + 2480 / 1600)
    assert run.marginal_acceptance == pytest.approx((1120 / 1600, 800 / 1600, 560 / 1600))
    assert run.tokens_per_round == pytest.approx(1 + sum(run.marginal_acceptance))
    # the 16 x 255 decoded tokens are the rounds' tokens: 1,600 x 2.55 = 4,080
    assert 1600 * run.tokens_per_round == pytest.approx(16 * 255)
    assert run.output_tokens_per_s == pytest.approx(400.0)
    assert (run.tpot_median_s, run.itl_p99_s) == pytest.approx((0.00984, 0.0314))


def test_sglang_jsonl_holds_two_runs_one_per_line() -> None:
    first, second = read_engine_results(DATA / "sglang_two_runs.jsonl")
    assert [(r.engine, r.line, r.backend, r.model_id) for r in (first, second)] == [
        ("sglang", 1, "sglang", MODEL), ("sglang", 2, "sglang", MODEL)]
    assert [(r.max_concurrency, r.request_rate_per_s) for r in (first, second)] == [
        (4, math.inf), (8, math.inf)]
    # SGLang writes no num_prompts: it is the number of 'errors' entries (one per request)
    assert [(r.num_prompts, r.completed, r.failed) for r in (first, second)] == [
        (8, 8, 0), (8, 8, 0)]
    assert (first.input_tokens_per_request, first.output_tokens_per_request) == (512.0, 32.0)
    assert (first.duration_s, second.duration_s) == (0.5625, 0.3125)
    assert (first.output_tokens_per_s, second.output_tokens_per_s) == pytest.approx(
        (256 / 0.5625, 256 / 0.3125))
    # accept_length, the server's lifetime tokens per round (includes the warm-up request)
    assert (first.tokens_per_round, second.tokens_per_round) == (3.0125, 2.9987)
    assert first.marginal_acceptance == ()


def test_sglang_statistics_rederived_from_the_per_request_lists() -> None:
    """Each request streams 11 chunks after its first token (10 rounds of 3 tokens and 1): its
    TPOT is the 11 gaps over 31 tokens; the gaps of line 1 are 20.0, 20.4 and 20.8 ms in turn."""
    run = read_engine_results(DATA / "sglang_two_runs.jsonl")[0]
    ttfts = [51.2, 49.8, 50.5, 52.1, 50.9, 50.2, 51.5, 49.6]  # ms, the file's 'ttfts'
    assert run.ttft_mean_s == pytest.approx(sum(ttfts) / 8 / 1e3)
    assert run.ttft_median_s == pytest.approx((50.5 + 50.9) / 2 / 1e3)
    # numpy's linear p99 of 8 values: the largest less 7% of the gap to the next one
    assert run.ttft_p99_s == pytest.approx((52.1 - 0.07 * (52.1 - 51.5)) / 1e3)
    assert run.itl_mean_s == pytest.approx(20.4e-3)
    assert run.itl_p99_s == pytest.approx(20.8e-3)
    gaps_s = _sglang_line(1)["itls"]
    assert run.tpot_mean_s == pytest.approx(sum(map(sum, gaps_s)) / 8 / 31)
    assert run.tpot_median_s == pytest.approx(11 * 20.4e-3 / 31, rel=1e-3)


def test_several_files_read_in_order() -> None:
    paths = [DATA / "vllm_spec.json", DATA / "sglang_two_runs.jsonl", DATA / "vllm_plain.json"]
    runs = read_engine_results(paths)
    assert [(Path(r.file).name, r.line) for r in runs] == [
        ("vllm_spec.json", 1), ("sglang_two_runs.jsonl", 1), ("sglang_two_runs.jsonl", 2),
        ("vllm_plain.json", 1)]
    assert read_engine_results(str(DATA / "vllm_plain.json")) == runs[-1:]


def test_request_rate_run_reads_unless_a_concurrency_is_needed() -> None:
    run = _only(DATA / "vllm_request_rate.json")
    assert (run.max_concurrency, run.request_rate_per_s) == (None, 2.0)
    message = _error(DATA / "vllm_request_rate.json", require_concurrency=True)
    assert "line 1: field 'max_concurrency' is null" in message
    assert "--max-concurrency" in message
    assert len(read_engine_results(DATA / "vllm_plain.json", require_concurrency=True)) == 1


# ---- the bad fixtures: one line naming file, line and field ---------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("vllm_truncated.json", "vllm_truncated.json: line 1: not JSON ("),
    ("vllm_failed.json", "vllm_failed.json: line 1: field 'failed' is 2: 2 of 16 requests "
                         "failed"),
    ("vllm_missing_p99.json", "vllm_missing_p99.json: line 1: field 'p99_ttft_ms' missing; "),
    ("sglang_failed.jsonl", "sglang_failed.jsonl: line 2: field 'completed' is 6: 2 of the 8 "
                            "requests sent (entries of 'errors') failed"),
    ("sglang_no_details.jsonl", "sglang_no_details.jsonl: line 1: field 'errors' missing; "),
])
def test_bad_fixture_is_one_line_naming_file_line_and_field(name: str, expected: str) -> None:
    assert expected in _error(DATA / name)


def test_truncated_file_says_where_the_text_ends() -> None:
    assert "column 401 where the text ends: truncated?" in _error(DATA / "vllm_truncated.json")


def test_missing_p99_names_the_client_option() -> None:
    assert "--metric-percentiles" in _error(DATA / "vllm_missing_p99.json")


def test_sglang_without_output_details_names_the_option() -> None:
    assert "--output-details" in _error(DATA / "sglang_no_details.jsonl")


# ---- layouts and fields the fixtures do not show --------------------------------------------


def test_vllm_append_result_file_is_one_run_per_line(tmp_path: Path) -> None:
    # --append-result writes "\n" before each further run and none at the end
    path = tmp_path / "appended.json"
    path.write_text(json.dumps(_vllm_plain()) + "\n" + json.dumps(_vllm_plain()))
    assert [r.line for r in read_engine_results(path)] == [1, 2]


def test_one_multi_line_json_document_has_no_line(tmp_path: Path) -> None:
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(_vllm_plain(), indent=2))
    run = _only(path)
    assert run.line is None and run.where == str(path)


def test_sglang_without_speculation_or_server_info(tmp_path: Path) -> None:
    data = _sglang_line(1) | {"accept_length": None, "server_info": None}
    run = _only(_write(tmp_path / "plain.jsonl", data))
    assert (run.tokens_per_round, run.model_id) == (None, None)


def test_bad_line_in_jsonl_is_named(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text(json.dumps(_sglang_line(1)) + "\n" + json.dumps(_sglang_line(2))[:50])
    assert f"{path}: line 2: not JSON (" in _error(path)


@pytest.mark.parametrize(("edit", "expected"), [
    ({"output_throughput": 330.0}, "field 'output_throughput' is 330.0: expected "
                                   "total_output_tokens / duration"),
    ({"completed": 15}, "field 'completed' is 15: expected num_prompts = 16"),
    ({"duration": 0}, "field 'duration' is 0: expected a positive duration"),
    ({"num_prompts": "16"}, "field 'num_prompts' is '16': expected a whole number"),
    ({"max_concurrency": 0}, "field 'max_concurrency' is 0: expected a whole number >= 1"),
    ({"mean_tpot_ms": float("nan")}, "field 'mean_tpot_ms' is nan: expected a finite number"),
    ({"request_rate": -1.0}, "field 'request_rate' is -1.0: expected requests/s > 0 or inf"),
    ({"model_id": ""}, "field 'model_id' is '': expected a non-empty string"),
    ({"ramp_up_strategy": "linear"}, "field 'ramp_up_strategy' is 'linear': a ramp-up run"),
    ({"spec_decode_acceptance_length": 2.6,
      "spec_decode_per_position_acceptance_rates": [0.7, 0.5, 0.35]},
     "field 'spec_decode_acceptance_length' is 2.6: expected 1 + the sum"),
    ({"spec_decode_acceptance_length": 0.5}, "field 'spec_decode_acceptance_length' is 0.5: "
                                             "expected a finite number >= 1"),
    ({"spec_decode_acceptance_length": 2.0,
      "spec_decode_per_position_acceptance_rates": [1.5]},
     "field 'spec_decode_per_position_acceptance_rates' is [1.5]: expected a list of rates"),
])
def test_bad_vllm_field_is_named(tmp_path: Path, edit: dict[str, Any], expected: str) -> None:
    path = _write(tmp_path / "run.json", _vllm_plain() | edit)
    assert f"{path}: line 1: {expected}" in _error(path)


@pytest.mark.parametrize(("edit", "expected"), [
    ({"request_rate": "trace"}, "field 'request_rate' is 'trace': expected requests/s > 0 or "
                                "inf (a trace replay"),
    ({"accept_length": 0.0}, "field 'accept_length' is 0.0: expected a finite number >= 1"),
    ({"server_info": {"version": "0.5.23"}}, "field 'server_info.model_path' missing"),
    ({"errors": "none"}, "field 'errors' is 'none': expected the list of per-request errors"),
    ({"completed": 9}, "field 'completed' is 9: expected at most the 8 requests sent"),
])
def test_bad_sglang_field_is_named(tmp_path: Path, edit: dict[str, Any], expected: str) -> None:
    path = _write(tmp_path / "runs.jsonl", _sglang_line(1), _sglang_line(2) | edit)
    assert f"{path}: line 2: {expected}" in _error(path)


def test_concurrency_run_must_send_all_requests_at_time_zero(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.json", _vllm_plain() | {"request_rate": 4.0})
    message = _error(path, require_concurrency=True)
    assert "line 1: field 'request_rate' is 4: --max-concurrency 4 holds" in message


@pytest.mark.parametrize(("text", "expected"), [
    ("", "empty; no benchmark run in it"),
    ("\n\n", "empty; no benchmark run in it"),
    ("[1, 2]\n", "line 1: a JSON list where a benchmark run (an object) belongs"),
    ('{"duration": 1.0}\n', "line 1: field 'model_id' (vllm bench serve --save-result) or "
                            "'server_info' (sglang.bench_serving --output-file) missing"),
    ("duration,completed\n1.0,16\n", "line 1: not JSON ("),
])
def test_not_a_result_file(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "result.json"
    path.write_text(text)
    assert f"{path}: {expected}" in _error(path)


def test_missing_file_and_folder_are_named(tmp_path: Path) -> None:
    assert "cannot read" in _error(tmp_path / "absent.json")
    assert "is a folder" in _error(tmp_path)

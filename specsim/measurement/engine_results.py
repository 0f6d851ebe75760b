"""Read the result files that the engines' own benchmark clients write, as the released
clients write them.

- vLLM 0.33.0 ``vllm bench serve --save-result``: one JSON object, written on one line
  (``json.dump``, vllm/benchmarks/serve.py ``main_async``); with ``--append-result`` further
  runs follow one per line.
- SGLang 0.5.23 ``python -m sglang.bench_serving --output-file F``: JSON Lines, one object
  appended per run (sglang/benchmark/serving.py ``benchmark``). SGLang writes no count of the
  requests it sent: only ``--output-details`` adds the per-request ``errors`` list, and without
  it failed requests cannot be counted, so it is required.

Which client wrote a run is read from its keys: vLLM writes ``model_id``, SGLang
``server_info``. Latencies are written in ms and read into seconds. Acceptance: both clients
report the mean tokens per verification round (accepted draft tokens + the bonus token): vLLM
as ``spec_decode_acceptance_length`` = 1 + accepted / drafts over the timed run, SGLang as
``accept_length``, the server's ``avg_spec_accept_length`` since its start or last cache flush
(warm-up and earlier runs included unless the client ran with ``--flush-cache``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsim.errors import SpecError
from specsim.specs.io import decode_text, read_bytes

ENGINES = ("vllm", "sglang")

# --save-detailed / --output-details keep every token gap: ~20 MB for 1,000 requests of 1,000
# tokens, and SGLang appends run after run to one file.
MAX_RESULT_BYTES = 512 * 2**20

# The clients write output_throughput = total_output_tokens / duration from the same floats;
# a wider gap means the numbers were edited.
THROUGHPUT_TOLERANCE = 1e-6
# vLLM's acceptance length and per-position rates come from the same integer counters.
ACCEPTANCE_TOLERANCE = 1e-6

# A run with failed requests measured another load than the one asked for.
_ALL_COMPLETED = "; specsim reads only runs in which every request completed"
_LATENCIES = ("ttft", "tpot", "itl")
_STATISTICS = ("mean", "median", "p99")
_MISSING_HINTS = {
    "vllm": {f"p99_{m}_ms": f"; vllm bench serve writes it with 99 in --metric-percentiles (the "
             f"default) and {m} in --percentile-metrics (default ttft,tpot,itl)"
             for m in _LATENCIES},
    "sglang": {"errors": "; sglang.bench_serving writes the per-request errors only with "
               "--output-details, and without them failed requests cannot be counted"},
}


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineRun:
    """One benchmark run as an engine's own client saved it.

    Attributes:
        engine: whose client wrote it, "vllm" (``vllm bench serve``) or "sglang"
            (``sglang.bench_serving``); the server behind ``backend`` may be another engine.
        file: the result file, as given.
        line: 1-based line of the run in the file (JSON Lines; a vLLM --save-result file is
            one line), None when the file is one multi-line JSON document.
        backend: the client's --backend as written (e.g. "openai", "vllm", "sglang").
        model_id: the served model (vLLM ``model_id``; SGLang ``server_info.model_path``), None
            when SGLang's server_info is null (the server has no /server_info).
        max_concurrency: the client's --max-concurrency (requests), None when not set: a
            request-rate run.
        request_rate_per_s: the client's --request-rate (requests/s); inf sends every request
            at time 0.
        num_prompts: requests sent (vLLM ``num_prompts``; SGLang ``len(errors)``).
        completed: requests that succeeded; equal to num_prompts in a run read here.
        failed: requests that failed; 0 in a run read here.
        total_input_tokens: prompt tokens of the completed requests (tokens).
        total_output_tokens: generated tokens of the completed requests (tokens).
        duration_s: wall time of the timed run (s).
        ttft_mean_s, ttft_median_s, ttft_p99_s: time to first token over requests (s).
        tpot_mean_s, tpot_median_s, tpot_p99_s: per request (latency - TTFT) /
            (output tokens - 1), over requests (s).
        itl_mean_s, itl_median_s, itl_p99_s: gaps between streamed chunks, over all gaps (s).
        tokens_per_round: mean tokens per verification round (accepted draft tokens + 1), None
            without speculation.
        marginal_acceptance: P(draft position k accepted) for k = 1..gamma, shape (gamma,)
            (vLLM's spec_decode_per_position_acceptance_rates); empty when not reported.
        num_drafts: rounds that carried a draft over the timed run (vLLM
            ``spec_decode_num_drafts``; count), None when not reported (SGLang).
        num_draft_tokens: draft tokens proposed over the timed run (vLLM
            ``spec_decode_draft_tokens``; count), None when not reported (SGLang).
    """

    engine: str
    file: str
    line: int | None
    backend: str
    model_id: str | None
    max_concurrency: int | None
    request_rate_per_s: float
    num_prompts: int
    completed: int
    failed: int
    total_input_tokens: int
    total_output_tokens: int
    duration_s: float
    ttft_mean_s: float
    ttft_median_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_median_s: float
    tpot_p99_s: float
    itl_mean_s: float
    itl_median_s: float
    itl_p99_s: float
    tokens_per_round: float | None
    marginal_acceptance: tuple[float, ...] = ()
    num_drafts: int | None = None
    # the engine's version where the file states it (SGLang's server_info.version; vLLM's
    # result file names none)
    engine_version: str | None = None
    num_draft_tokens: int | None = None

    @property
    def where(self) -> str:
        """The file and line of the run, as error messages name it."""
        return _where(self.file, self.line)

    @property
    def input_tokens_per_request(self) -> float:
        """Mean prompt tokens of a completed request (tokens)."""
        return self.total_input_tokens / self.completed

    @property
    def output_tokens_per_request(self) -> float:
        """Mean generated tokens of a completed request (tokens)."""
        return self.total_output_tokens / self.completed

    @property
    def output_tokens_per_s(self) -> float:
        """Generated tokens per second of the whole run (tokens/s)."""
        return self.total_output_tokens / self.duration_s


def read_engine_results(paths: Iterable[Path | str] | Path | str, *,
                        require_concurrency: bool = False) -> list[EngineRun]:
    """Every run in the given vLLM --save-result and SGLang --output-file files, in order.

    Args:
        paths: result files (one path or several); each holds one run or one per line.
        require_concurrency: refuse request-rate runs: each run must have set
            --max-concurrency and sent every request at time 0 (request rate inf).

    Returns:
        the runs, file by file and line by line.

    Raises:
        SpecError: one line naming the file (and line) and the field: a file that is not JSON
            or JSON Lines, a run of neither client, a missing or malformed field, a run with
            failed requests, or (require_concurrency) a request-rate run.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    runs: list[EngineRun] = []
    for path in paths:
        for line, data in _documents(Path(path)):
            run = _read_run(data, str(path), line)
            if require_concurrency:
                _check_concurrency_run(run)
            runs.append(run)
    return runs


# ---- files to JSON objects -----------------------------------------------------------------


def _documents(path: Path) -> list[tuple[int | None, Any]]:
    """The JSON values of a file, one per non-blank line, or the whole file as one value."""
    raw = read_bytes(path, what="benchmark result file", limit=MAX_RESULT_BYTES)
    text = decode_text(raw, path)
    documents: list[tuple[int | None, Any]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            documents.append((number, json.loads(line)))
        except (ValueError, RecursionError) as err:
            if not documents:  # perhaps one JSON document over several lines
                return [(None, _whole_document(text, path))]
            raise SpecError(f"{path}: line {number}: not JSON ({_reason(err)})") from None
    if not documents:
        raise SpecError(f"{path}: empty; no benchmark run in it")
    return documents


def _whole_document(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecError(f"{path}: line {err.lineno}: not JSON ({_reason(err)})") from None
    except (ValueError, RecursionError) as err:
        raise SpecError(f"{path}: not JSON ({_reason(err)})") from None


def _reason(err: Exception) -> str:
    if isinstance(err, json.JSONDecodeError):
        cut = " where the text ends: truncated?" if err.pos >= len(err.doc.rstrip()) else ""
        return f"{err.msg} at column {err.colno}{cut}"
    if isinstance(err, RecursionError):
        return "nested too deeply"
    return str(err)[:120]


def _where(file: str, line: int | None) -> str:
    return file if line is None else f"{file}: line {line}"


# ---- one run -------------------------------------------------------------------------------


def _read_run(data: Any, file: str, line: int | None) -> EngineRun:
    where = _where(file, line)
    if not isinstance(data, dict):
        raise SpecError(f"{where}: a JSON {type(data).__name__} where a benchmark run (an "
                        "object) belongs")
    if "model_id" in data:
        engine = "vllm"
    elif "server_info" in data:
        engine = "sglang"
    else:
        raise SpecError(f"{where}: field 'model_id' (vllm bench serve --save-result) or "
                        "'server_info' (sglang.bench_serving --output-file) missing: not an "
                        "engine benchmark result")
    fields = _Fields(data, where, _MISSING_HINTS[engine])
    specific = _READERS[engine](fields)
    return EngineRun(engine=engine, file=file, line=line, **_common(fields), **specific)


class _Fields:
    """Typed access to one run's keys; every problem is one SpecError naming the key."""

    def __init__(self, data: Mapping[str, Any], where: str, hints: Mapping[str, str]) -> None:
        self.data, self.where, self.hints = data, where, hints

    def get(self, key: str) -> Any:
        if key not in self.data:
            raise SpecError(f"{self.where}: field '{key}' missing{self.hints.get(key, '')}")
        return self.data[key]

    def error(self, key: str, problem: str) -> SpecError:
        return SpecError(f"{self.where}: field '{key}' is {_show(self.data.get(key))}: {problem}")

    def count(self, key: str, *, low: int = 0) -> int:
        value = self.get(key)
        if not _is_int(value) or value < low:
            raise self.error(key, f"expected a whole number >= {low}")
        return int(value)

    def number(self, key: str, *, low: float = 0.0) -> float:
        value = self.get(key)
        if not _is_number(value) or not math.isfinite(value) or value < low:
            raise self.error(key, f"expected a finite number >= {low:g}")
        return float(value)

    def optional_count(self, key: str, *, low: int) -> int | None:
        return None if self.get(key) is None else self.count(key, low=low)

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str) or not value:
            raise self.error(key, "expected a non-empty string")
        return value


def _common(fields: _Fields) -> dict[str, Any]:
    """The fields both clients write under the same keys."""
    duration_s = fields.number("duration")
    if duration_s <= 0:
        raise fields.error("duration", "expected a positive duration (s)")
    total_output = fields.count("total_output_tokens")
    throughput = fields.number("output_throughput")
    # Both clients: output_throughput = total_output_tokens / duration.
    expected = total_output / duration_s
    if abs(throughput - expected) > THROUGHPUT_TOLERANCE * max(expected, 1.0):
        raise fields.error("output_throughput", f"expected total_output_tokens / duration = "
                           f"{total_output:,} / {duration_s:g} s = {expected:g} tokens/s")
    latencies = {f"{metric}_{stat}_s": fields.number(f"{stat}_{metric}_ms") / 1e3
                 for metric in _LATENCIES for stat in _STATISTICS}
    return {
        "backend": fields.text("backend"),
        "max_concurrency": fields.optional_count("max_concurrency", low=1),
        "request_rate_per_s": _request_rate(fields),
        "total_input_tokens": fields.count("total_input_tokens"),
        "total_output_tokens": total_output,
        "duration_s": duration_s,
        **latencies,
    }


def _request_rate(fields: _Fields) -> float:
    """vLLM writes an infinite rate as the string "inf", SGLang as the bare token Infinity."""
    value = fields.get("request_rate")
    if value == "inf":
        return math.inf
    if not _is_number(value) or math.isnan(value) or value <= 0:
        raise fields.error("request_rate", "expected requests/s > 0 or inf (a trace replay "
                           "is neither a rate nor a concurrency run)")
    return float(value)


def _vllm(fields: _Fields) -> dict[str, Any]:
    if "ramp_up_strategy" in fields.data:
        raise fields.error("ramp_up_strategy", "a ramp-up run changes its request rate during "
                           "the run; specsim reads fixed-rate or fixed-concurrency runs")
    sent, completed = fields.count("num_prompts"), fields.count("completed")
    failed = fields.count("failed")
    if failed > 0:
        raise fields.error("failed", f"{failed:,} of {sent:,} requests failed{_ALL_COMPLETED}")
    if completed != sent:
        raise fields.error("completed", f"expected num_prompts = {sent:,} completed "
                           f"requests{_ALL_COMPLETED}")
    return {"model_id": fields.text("model_id"), "num_prompts": sent, "completed": completed,
            "failed": failed, **_vllm_acceptance(fields)}


def _vllm_acceptance(fields: _Fields) -> dict[str, Any]:
    """vLLM: acceptance length = 1 + accepted / drafts; rate at position k = a_k / drafts."""
    if "spec_decode_acceptance_length" not in fields.data:
        return {"tokens_per_round": None}
    length_key = "spec_decode_acceptance_length"
    tokens_per_round = fields.number(length_key, low=1.0)
    key = "spec_decode_per_position_acceptance_rates"
    rates = fields.data.get(key, [])
    if not isinstance(rates, list) or not all(
            _is_number(r) and 0.0 <= r <= 1.0 for r in rates):
        raise fields.error(key, "expected a list of rates in [0, 1]")
    marginal = tuple(float(r) for r in rates)
    # accepted = sum over positions of a_k, so 1 + accepted / drafts = 1 + sum of the rates.
    if marginal and abs(1.0 + sum(marginal) - tokens_per_round) > (
            ACCEPTANCE_TOLERANCE * tokens_per_round):
        raise fields.error(length_key, f"expected 1 + the sum of {key} = "
                           f"{1.0 + sum(marginal):g}")
    drafts, draft_tokens = ("spec_decode_num_drafts", "spec_decode_draft_tokens")
    return {"tokens_per_round": tokens_per_round, "marginal_acceptance": marginal,
            "num_drafts": fields.count(drafts) if drafts in fields.data else None,
            "num_draft_tokens": fields.count(draft_tokens) if draft_tokens in fields.data
            else None}


def _sglang(fields: _Fields) -> dict[str, Any]:
    errors = fields.get("errors")
    if not isinstance(errors, list):
        raise fields.error("errors", "expected the list of per-request errors")
    sent, completed = len(errors), fields.count("completed")
    if completed > sent:
        raise fields.error("completed", f"expected at most the {sent:,} requests sent (entries "
                           "of 'errors')")
    if completed < sent:  # SGLang writes no failed count: one error entry per request sent
        raise fields.error("completed", f"{sent - completed:,} of the {sent:,} requests sent "
                           f"(entries of 'errors') failed{_ALL_COMPLETED}")
    accept_length = fields.get("accept_length")
    info = fields.get("server_info")
    version = info.get("version") if isinstance(info, dict) else None
    return {"model_id": _sglang_model(fields), "num_prompts": sent, "completed": completed,
            "failed": 0, "tokens_per_round": None if accept_length is None
            else fields.number("accept_length", low=1.0),
            "engine_version": version if isinstance(version, str) and version else None}


def _sglang_model(fields: _Fields) -> str | None:
    info = fields.get("server_info")
    if info is None:
        return None
    model = info.get("model_path") if isinstance(info, dict) else None
    if not isinstance(model, str) or not model:
        raise SpecError(f"{fields.where}: field 'server_info.model_path' missing or not a "
                        "string: expected the server's model")
    return model


_READERS: dict[str, Callable[[_Fields], dict[str, Any]]] = {"vllm": _vllm, "sglang": _sglang}


# ---- run-level checks ----------------------------------------------------------------------


def _check_concurrency_run(run: EngineRun) -> None:
    if run.max_concurrency is None:
        raise SpecError(f"{run.where}: field 'max_concurrency' is null: a request-rate run "
                        f"(request_rate {run.request_rate_per_s:g}/s); a concurrency is "
                        "needed: rerun the client with --max-concurrency N")
    if math.isfinite(run.request_rate_per_s):
        raise SpecError(f"{run.where}: field 'request_rate' is {run.request_rate_per_s:g}: "
                        f"--max-concurrency {run.max_concurrency} holds that many requests "
                        "in flight only when all are sent at time 0 (--request-rate inf)")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _show(value: object) -> str:
    return "null" if value is None else repr(value)[:60]

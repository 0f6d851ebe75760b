"""Published serving latency, predicted the way `specsim plan` prices it; never fitted on.

A file (workloads/latency/*.yaml) holds `rows` and `groups`. A group is one benchmark setup: its
`source`, model, hardware, engine, TP and the lengths of its prompts and outputs (lognormal
through a median and a p90, each with a source). A row is one printed number of a closed-loop
concurrency benchmark of plain decoding: `concurrency`, a `metric` (METRICS) and the `measured`
value in ms. It is predicted with the plan's serving model: the serving table of plain decoding
at batch = concurrency (`serving_table`) and its latency simulation with the benchmark's
clients (`table_latency(closed_loop=True)`): TPOT is the mean round, ITL and TTFT the medians
of the gaps between rounds and of the time to the first token.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from specsim.errors import SpecError
from specsim.specs.defaults import MAX_BATCH, MAX_CONTEXT_TOKENS, MAX_TP
from specsim.specs.fields import check_keys, closest, show
from specsim.specs.io import read_yaml
from specsim.specs.paths import builtin_names, resolve_path

METRICS = ("ttft_median_ms", "tpot_median_ms", "itl_median_ms")
ROW_KEYS = ("id", "concurrency", "metric", "measured", "group")
GROUP_KEYS = ("source", "model", "hardware", "engine", "tp", "prompt_tokens", "output_tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyRow:
    """One published latency number and its prediction (None where it cannot be priced)."""

    id: str
    file: str
    source: str
    model: str
    hardware: str
    engine: str
    tp: int
    concurrency: int
    metric: str
    measured: float
    predicted: float | None = None

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted - self.measured) / self.measured


MAX_MEASURED_MS = 3.6e6  # an hour: a latency beyond it is a unit slip, not a benchmark


def _number(block: dict[str, object], key: str, where: str, low: float, high: float) -> float:
    """A finite number in [low, high] (an integer of any size is compared exactly, never
    converted first: 10**40 would overflow a float check)."""
    value = block.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            (isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high:
        raise SpecError(f"{where}: field '{key}' must be a number in [{low:g}, {high:g}], "
                        f"got {show(value)}")
    return float(value)


def _integer(block: dict[str, object], key: str, where: str, high: int) -> int:
    value = block.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise SpecError(f"{where}: field '{key}' must be an integer in 1..{high:,}, "
                        f"got {show(value)}")
    return value


def _text(block: dict[str, object], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}: field '{key}' must be a non-empty string, got {show(value)}")
    return value


def _builtin(block: dict[str, object], key: str, kind: str, where: str) -> str:
    """A built-in spec's slug (the rows are priced with the built-in specs only)."""
    name = _text(block, key, where)
    names = builtin_names(kind)
    if name not in names:
        raise SpecError(f"{where}: field '{key}': unknown {kind.rstrip('s')} {show(name)}"
                        f"{closest(name, names)}; `specsim {kind} list` shows the built-in ones")
    return name


def _check_layout(group: dict[str, Any], where: str) -> None:
    """The group's TP divides its model's heads (priced later, the error would name no file)."""
    from specsim.specs.models import check_tensor_parallel, load_model

    try:
        check_tensor_parallel(load_model(group["model"]), group["tp"])
    except SpecError as err:
        raise SpecError(f"{where}: field 'tp': {err}") from None


def _lengths(block: dict[str, object], key: str, where: str) -> Any:
    from specsim.specs.workloads import LengthDistribution

    sub = block.get(key)
    if not isinstance(sub, dict):
        raise SpecError(f"{where}: field '{key}' needs median, p90 and source")
    check_keys(sub, ("median", "p90", "source"), f"{where} {key}")
    median = _number(sub, "median", f"{where} {key}", 1.0, MAX_CONTEXT_TOKENS)
    p90 = _number(sub, "p90", f"{where} {key}", 1.0, MAX_CONTEXT_TOKENS)
    if p90 < median:
        raise SpecError(f"{where} {key}: field 'p90' = {p90:g} is below the median {median:g}")
    return LengthDistribution(median=median, p90=p90, source=_text(sub, "source",
                                                                   f"{where} {key}"))


Groups = dict[str, dict[str, Any]]


def load_latency_rows(names: list[str] | None = None) -> tuple[list[LatencyRow], Groups]:
    """Rows and groups of the given files (slugs or paths; default every built-in file)."""
    rows: list[LatencyRow] = []
    groups: Groups = {}
    for name in names if names is not None else builtin_names("latency"):
        path = resolve_path("latency", name)
        data = read_yaml(path)
        check_keys(data, ("about", "rows", "groups"), str(path))
        blocks = data.get("groups")
        if not isinstance(blocks, dict) or not blocks:
            raise SpecError(f"{path}: field 'groups' must be a mapping of benchmark setups")
        for gid, block in blocks.items():
            where = f"{path.name} group {show(gid, 40)}"
            if not isinstance(block, dict):
                raise SpecError(f"{where}: must be a mapping of {', '.join(GROUP_KEYS)}")
            check_keys(block, GROUP_KEYS, where)
            groups[str(gid)] = {
                "source": _text(block, "source", where),
                "model": _builtin(block, "model", "models", where),
                "hardware": _builtin(block, "hardware", "hardware", where),
                "engine": _builtin(block, "engine", "engines", where),
                "tp": _integer(block, "tp", where, MAX_TP),
                "prompt_tokens": _lengths(block, "prompt_tokens", where),
                "output_tokens": _lengths(block, "output_tokens", where)}
            _check_layout(groups[str(gid)], where)
        items = data.get("rows")
        if not isinstance(items, list) or not items:
            raise SpecError(f"{path}: field 'rows' must be a non-empty list of rows")
        for i, item in enumerate(items):
            where = f"{path.name} row {i + 1}"
            if not isinstance(item, dict):
                raise SpecError(f"{where}: must be a mapping")
            check_keys(item, ROW_KEYS, where)
            row_id = _text(item, "id", where)
            where = f"{path.name} row {show(row_id, 40)}"
            gid = str(item.get("group"))
            if gid not in groups:
                raise SpecError(f"{where}: field 'group' = {show(gid)} is not one of the file's "
                                f"groups ({', '.join(groups)})")
            if item.get("metric") not in METRICS:
                raise SpecError(f"{where}: field 'metric' = {show(item.get('metric'))} must be "
                                f"one of {', '.join(METRICS)}")
            g = groups[gid]
            rows.append(LatencyRow(
                id=row_id, file=path.stem, source=g["source"], model=g["model"],
                hardware=g["hardware"], engine=g["engine"], tp=g["tp"],
                concurrency=_integer(item, "concurrency", where, MAX_BATCH),
                metric=str(item["metric"]),
                measured=_number(item, "measured", where, 1e-9, MAX_MEASURED_MS)))
            groups[f"{path.stem}:{rows[-1].id}"] = g
    return rows, groups


def predict_latency_rows(rows: list[LatencyRow], groups: Groups) -> list[LatencyRow]:
    """Every row with its prediction (see the module docstring)."""
    from specsim.serving.capacity import serving_table, table_latency
    from specsim.serving.scenarios import load_scenario
    from specsim.speculation.setup import load_setup
    from specsim.speculation.speedup import Candidates

    plain = Candidates(nodes=np.zeros(1), depth=np.zeros(1), tau=np.ones(1),
                       max_width=np.zeros(1), shape=("chain",))
    out = []
    cache: dict[tuple[str, int], tuple[float, float, float]] = {}
    for row in rows:
        g = groups[f"{row.file}:{row.id}"]
        key = (f"{row.file}:{g['model']}:{g['hardware']}:{g['engine']}:{g['prompt_tokens']}",
               row.concurrency)
        if key not in cache:
            setup, _ = load_setup(model=row.model, hardware=row.hardware, engine=row.engine,
                                  tp=row.tp, draft_cost=0.0, alpha=0.5)
            setup = dataclasses.replace(setup, drafter=None, draft_cost=0.0)
            scenario = dataclasses.replace(load_scenario("chat"), prompt=g["prompt_tokens"],
                                           output=g["output_tokens"])
            table = serving_table(setup, scenario, plain, batch=[row.concurrency], tp=row.tp)
            ttft, gaps = table_latency(table, [0], [0], closed_loop=True)
            cache[key] = (float(ttft[0, 0]), float(table.tpot_s[0, 0]), float(gaps[0, 0]))
        ttft_s, tpot_s, itl_s = cache[key]
        value = {"ttft_median_ms": ttft_s, "tpot_median_ms": tpot_s,
                 "itl_median_ms": itl_s}[row.metric] * 1e3
        out.append(dataclasses.replace(row, predicted=value if np.isfinite(value) else None))
    return out


def latency_summary(rows: list[LatencyRow]) -> dict[str, float]:
    """Median |error| per metric, %, over the predicted rows."""
    out = {}
    for metric in METRICS:
        errs = [abs(r.error_pct) for r in rows if r.metric == metric and r.error_pct is not None]
        if errs:
            out[metric] = float(np.median(errs))
    return out


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
from dataclasses import dataclass
from typing import Any

import numpy as np

from specsim.errors import SpecError
from specsim.specs.io import builtin_names, check_keys, read_yaml, resolve_path, show

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


def _number(block: dict[str, object], key: str, where: str, low: float) -> float:
    value = block.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value) \
            or value < low:
        raise SpecError(f"{where}: field '{key}' must be a number >= {low:g}, got {show(value)}")
    return float(value)


Groups = dict[str, dict[str, Any]]


def load_latency_rows(names: list[str] | None = None) -> tuple[list[LatencyRow], Groups]:
    """Rows and groups of the given files (slugs or paths; default every built-in file)."""
    from specsim.specs.workloads import LengthDistribution

    rows: list[LatencyRow] = []
    groups: Groups = {}
    for name in names if names is not None else builtin_names("latency"):
        path = resolve_path("latency", name)
        data = read_yaml(path)
        check_keys(data, ("about", "rows", "groups"), str(path))
        for gid, block in (data.get("groups") or {}).items():
            where = f"{path.name} group {gid}"
            if not isinstance(block, dict):
                raise SpecError(f"{where}: must be a mapping of {', '.join(GROUP_KEYS)}")
            check_keys(block, GROUP_KEYS, where)
            lengths = {}
            for key in ("prompt_tokens", "output_tokens"):
                sub = block.get(key)
                if not isinstance(sub, dict):
                    raise SpecError(f"{where}: field '{key}' needs median, p90 and source")
                lengths[key] = LengthDistribution(
                    median=_number(sub, "median", f"{where} {key}", 1.0),
                    p90=_number(sub, "p90", f"{where} {key}", 1.0),
                    source=str(sub.get("source") or ""))
            groups[gid] = {**block, **lengths, "tp": int(_number(block, "tp", where, 1.0))}
        items = data.get("rows")
        if not isinstance(items, list) or not items:
            raise SpecError(f"{path}: field 'rows' must be a non-empty list of rows")
        for i, item in enumerate(items):
            where = f"{path.name} row {i + 1}"
            if not isinstance(item, dict):
                raise SpecError(f"{where}: must be a mapping")
            check_keys(item, ROW_KEYS, where)
            where = f"{path.name} row {item.get('id', i + 1)}"
            gid = str(item.get("group"))
            if gid not in groups:
                raise SpecError(f"{where}: field 'group' = {show(gid)} is not one of the file's "
                                f"groups ({', '.join(groups)})")
            if item.get("metric") not in METRICS:
                raise SpecError(f"{where}: field 'metric' = {show(item.get('metric'))} must be "
                                f"one of {', '.join(METRICS)}")
            g = groups[gid]
            rows.append(LatencyRow(
                id=str(item["id"]), file=path.stem, source=str(g["source"]),
                model=str(g["model"]), hardware=str(g["hardware"]), engine=str(g["engine"]),
                tp=int(g["tp"]), concurrency=int(_number(item, "concurrency", where, 1.0)),
                metric=str(item["metric"]), measured=_number(item, "measured", where, 1e-9)))
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


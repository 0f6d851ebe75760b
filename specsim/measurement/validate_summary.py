"""The held-out error of `validate` by group of rows, and the summary kept between runs.

`error_summary` gives the median errors of the predicted rows, all together and per value of
each key (kind, batch group, engine, GPU vendor, drafter family, the absolute decode rates per
GPU vendor and dense / MoE model, ...). `held_out_summary` is that of every built-in published
row, which `specsim plan` quotes; it is kept on disk (`cache_dir`) under the digest of its
inputs, so a run computes it only when the source or a built-in spec changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specsim.measurement.published import PublishedRow
from specsim.measurement.validate import ABSOLUTE, Validation, validate
from specsim.measurement.validate_rows import _builtin_hardware, _builtin_model

# The panels of `specsim validate --plot` by metric (error_summary's "panel" key).
PANELS = {"speedup": "speedup", "tokens_per_s": "tokens/s", "plain_tokens_per_s": "tokens/s",
          "plain_tpot_ms": "tokens/s", "spec_tpot_ms": "tokens/s",
          "relative_speedup": "relative_speedup",
          "speedup_versus": "relative_speedup"}


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupError:
    """Held-out error of a group of predicted rows (fractions, not percent)."""

    group: str
    rows: int
    median_abs_error: float  # of the rows' `error`
    median_signed_error: float  # of their `speed_error`: positive = predicted faster
    wrong_sign: int  # speedup rows predicted on the other side of 1 than measured


# The summary key of the absolute decode rates per GPU vendor and model kind: its groups are
# named f"{RATES}={rates_group(vendor, moe)}".
RATES = "rates"


GROUP_KEYS: tuple[str, ...] = ("kind", "batch", "engine", "vendor", "moe", "benchmark",
                               "with tau", "family", "metric", "weights", RATES)
BATCH_GROUPS = ((1, "1"), (15, "2-15"))  # a row's batch group: the first whose bound it is
# within, else ">=16" (batch 1 is latency-bound; 2-15 the small batches; >= 16 served batches)


def batch_group(batch: int) -> str:
    """'1', '2-15' or '>=16': the batch (or concurrency) group a row is reported in."""
    return next((name for bound, name in BATCH_GROUPS if batch <= bound), ">=16")


def rates_group(vendor: str, moe: bool) -> str:
    """The `rates` group of an absolute decode rate: its GPU's vendor and its model's kind,
    e.g. 'AMD, MoE' (the plan states the error of the group its own setup falls in)."""
    return f"{vendor}, {'MoE' if moe else 'dense'}"


def error_summary(results: list[Validation], keys: tuple[str, ...] = GROUP_KEYS
                  ) -> list[GroupError]:
    """Median errors of the predicted rows: all first, then per value of each key in `keys`
    (group names 'key=value'; `rates`: the absolute decode rates per GPU vendor and dense /
    MoE model, `rates_group`)."""
    done = [v for v in results if v.predicted is not None]
    key_of: dict[str, Callable[[Validation], str]] = {
        "with tau": lambda v: str(v.row.tau is not None).lower(),
        "engine": lambda v: v.row.engine, "family": lambda v: v.group,
        "batch": lambda v: batch_group(v.row.batch), "metric": lambda v: v.metric,
        "kind": lambda v: "absolute" if v.metric in ABSOLUTE else "speedup",
        "vendor": lambda v: _builtin_hardware(v.row.hardware).vendor,
        "benchmark": lambda v: v.row.benchmark,
        "weights": lambda v: _weights(v.row),
        "moe": lambda v: str(_is_moe(v.row.model)).lower(),
        "panel": lambda v: PANELS[v.metric],
        RATES: lambda v: rates_group(_builtin_hardware(v.row.hardware).vendor,
                                       _is_moe(v.row.model)) if v.metric in ABSOLUTE else ""}
    groups: list[tuple[str, list[Validation]]] = [("all", done)]
    for label in keys:
        key = key_of[label]
        for value in sorted({key(v) for v in done} - {""}):  # "": in no group of the key
            groups.append((f"{label}={value}", [v for v in done if key(v) == value]))
    out = []
    for name, members in groups:
        if not members:  # no row predicted (a file of rows without tau): no median to take
            continue
        errors = np.array([v.error for v in members], dtype=np.float64)
        faster = np.array([v.speed_error for v in members], dtype=np.float64)
        out.append(GroupError(
            group=name, rows=len(members), median_abs_error=float(np.median(np.abs(errors))),
            median_signed_error=float(np.median(faster)),
            wrong_sign=sum(v.wrong_sign for v in members)))
    return out


@functools.cache
def held_out_summary() -> tuple[GroupError, ...]:
    """`error_summary` of every built-in published row, overall, per drafter family, and
    of the absolute decode rates per GPU vendor and dense / MoE model (`rates_group`).

    The leave-one-source-out fits take seconds, so the summary is computed once per process
    and kept on disk (`cache_dir`) under `source_digest()`: the digest of every file of the
    specsim source and of the built-in specs, and of the Python, numpy and scipy versions.
    Any edit to one of them (a published row, an engine term, a line of the model) gives
    another digest, and the summary is computed again."""
    from specsim.measurement.published import load_published
    from specsim.specs.paths import source_digest

    folder = cache_dir()
    path = None if folder is None else folder / f"held-out-{source_digest()}.json"
    cached = _read_summary(path)
    if cached is not None:
        return cached
    summary = tuple(error_summary(validate(load_published()), keys=("family", RATES)))
    _write_summary(path, summary)
    return summary


CACHE_ENV = "SPECSIM_CACHE_DIR"  # where results kept between runs go; set empty: nowhere


def cache_dir() -> Path | None:
    """Folder of results kept between runs: $SPECSIM_CACHE_DIR (empty: none are kept), else
    $XDG_CACHE_HOME/specsim, else ~/.cache/specsim."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "specsim"


_GROUP_ERROR_TYPES = {f.name: {"str": str, "int": int, "float": float}[str(f.type)]
                      for f in dataclasses.fields(GroupError)}


def _read_summary(path: Path | None) -> tuple[GroupError, ...] | None:
    """The summary kept at `path`, or None (none kept, unreadable, or not a summary)."""
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, list) or not data:
        return None
    out = []
    for item in data:
        if not isinstance(item, dict) or set(item) != set(_GROUP_ERROR_TYPES) or not all(
                type(item[k]) is kind for k, kind in _GROUP_ERROR_TYPES.items()):
            return None
        out.append(GroupError(**item))
    return tuple(out)


def _write_summary(path: Path | None, summary: tuple[GroupError, ...]) -> None:
    """Keep the summary at `path` (whole or not at all); a folder that cannot be written
    only means the next run computes it again."""
    if path is None:
        return
    text = json.dumps([dataclasses.asdict(g) for g in summary])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".held-out-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    # Summaries of earlier sources: the newest few stay (other checkouts sharing the folder).
    kept = sorted(path.parent.glob("held-out-*.json"), key=_mtime_ns, reverse=True)
    for old in kept[KEEP_SUMMARIES:]:
        with contextlib.suppress(OSError):
            old.unlink()


KEEP_SUMMARIES = 8


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _weights(row: PublishedRow) -> str:
    """The weight dtype a row ran: its own, else the checkpoint's (with its experts' dtype
    where that differs, as gpt-oss ships mxfp4 experts in a bf16 model)."""
    return _builtin_model(row.model).weights_text(row.weight_dtype)


def _is_moe(model: str) -> bool:
    return _builtin_model(model).moe is not None

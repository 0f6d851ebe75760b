"""The profile CSV (specsim format): measured kernel times, one row per timed point.

This is an I/O module. A profile file is a metadata header of `# key: value` lines followed by
a CSV with exactly the columns of `PROFILE_COLUMNS`, so `pandas.read_csv(path, comment="#")`
reads the body. Times are in seconds. Columns by op class:

- gemm: `count` GEMMs of (m x k) @ (k x n); m = tokens (rows), k x n = one GPU's weight shard;
  count = 1 except grouped expert GEMMs (count = experts touched, m = tokens per expert).
- attention: `batch` requests, each scoring `queries` new tokens against `context` cached
  tokens plus the new block (attention_decode: queries = 1); k = query heads per GPU,
  n = query/key head dim; mask = none (decode), causal or tree (the fixed binary tree of
  `tree_parents`; `attention_allowed` gives each mask). The KV heads per GPU follow from the
  model and TP degree (metadata `kv_heads_per_gpu`).
- memory: `sampling` = softmax and sampling over the vocabulary for m rows; n = vocabulary.

Unused numeric fields are 0; `mask` is "none" outside attention. Every problem found on reading
is one SpecError line naming the file and the line and column.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

import numpy as np
import pandas as pd

from specsim.errors import SpecError
from specsim.forward.ops import pass_work
from specsim.forward.shapes import BoolArray, decode_passes
from specsim.specs.cache import kv_heads_per_gpu
from specsim.specs.fields import show
from specsim.specs.io import read_text
from specsim.specs.models import Model
from specsim.specs.outputs import atomic_write, check_writable

PROFILE_COLUMNS: tuple[str, ...] = (
    "device", "backend", "model", "tp", "op", "op_class", "dtype", "m", "k", "n", "count",
    "batch", "context", "queries", "mask", "time_median_s", "time_p10_s", "time_p90_s", "repeats")
PROFILE_OP_CLASSES: tuple[str, ...] = ("gemm", "attention", "memory")
ATTENTION_MASKS: dict[str, str] = {
    "attention_decode": "none", "attention_causal": "causal", "attention_tree": "tree"}
MEMORY_OPS: tuple[str, ...] = ("sampling",)
TEXT_COLUMNS: tuple[str, ...] = ("device", "backend", "model", "op", "op_class", "dtype", "mask")
INT_COLUMNS: tuple[str, ...] = (
    "tp", "m", "k", "n", "count", "batch", "context", "queries", "repeats")
TIME_COLUMNS: tuple[str, ...] = ("time_p10_s", "time_median_s", "time_p90_s")
# Message prefix for a row and column: "<file>: line 12, column 'k'".
_Where = Callable[[int, str], str]
# Fields that must be >= 1 per op class (the others may be 0).
_POSITIVE: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "k", "n", "count"),
    "attention": ("k", "n", "batch", "queries"),
    "memory": ("m", "n"),
}


# ---------------------------------------------------------------- shapes a model's profile has

def shard_size(value: float) -> int:
    """Integer size of a per-GPU shard dimension (rounded up when TP does not divide it)."""
    return math.ceil(value - 1e-9)


def model_gemm_shapes(model: Model, tp: int) -> dict[str, tuple[int, int]]:
    """k x n of each weight GEMM of `model` on one GPU of a TP group, by op name."""
    ops = pass_work(model, decode_passes(1.0), tp=tp)
    return {op.name: (shard_size(op.gemm_k), shard_size(op.gemm_n))
            for op in ops if op.op_class == "gemm"}


def attention_shape(model: Model, tp: int) -> tuple[int, int, int, int]:
    """Query heads, KV heads, query/key head dim and value head dim on one GPU.

    MLA caches one latent per token shared by all heads: one KV "head" of the latent plus the
    rope key (qk dim) whose first kv_lora_rank entries serve as values.
    """
    heads = model.num_attention_heads // tp
    if model.mla is not None:
        return heads, 1, model.mla.cache_elems_per_token, model.mla.kv_lora_rank
    return heads, kv_heads_per_gpu(model.num_kv_heads, tp), model.head_dim, model.head_dim


def tree_parents(queries: int) -> list[int]:
    """Parent of each query token of the profiled tree (-1: the root, the last verified token).

    A binary tree in heap order, node i under node (i - 1) // 2 (64 queries reach depth 6):
    branching, so its mask is not the causal one.
    """
    return [-1] + [(i - 1) // 2 for i in range(1, queries)]


def attention_allowed(op: str, queries: int, context: int) -> BoolArray | None:
    """Which keys each query may attend, shape (queries, context + queries); None = all.

    The new tokens' keys follow the `context` cached ones. Causal: query i sees the context and
    new tokens 0..i; tree: the context, itself and its ancestors in `tree_parents`.
    """
    if op == "attention_decode":
        return None
    keys = context + queries
    if op == "attention_causal":
        return np.tri(queries, keys, k=context, dtype=np.bool_)
    allowed = np.zeros((queries, keys), dtype=np.bool_)
    allowed[:, :context] = True
    parents = tree_parents(queries)
    for node in range(queries):
        ancestor = node
        while ancestor >= 0:
            allowed[node, context + ancestor] = True
            ancestor = parents[ancestor]
    return allowed


# ---------------------------------------------------------------- reading and validation

def read_profile(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """Read and validate a profile CSV; returns the rows (PROFILE_COLUMNS) and the metadata.

    The frame's `attrs["path"]` holds the file name, for later messages.
    """
    source = str(path)
    text = read_text(Path(path), what="profile CSV")
    metadata, header, rows = _split_lines(text, source)
    _check_header(header, source)
    lines = [line for line, _ in rows]
    raw = pd.DataFrame([fields for _, fields in rows], columns=header, dtype=object)
    frame = validate_profile(raw[list(PROFILE_COLUMNS)], source=source, lines=lines)
    devices = sorted(set(frame["device"]))
    stated = metadata.get("device", "")
    # a profile is one GPU's: rows of another device would be fitted as this one
    if len(devices) > 1 or (stated and devices and devices[0] != stated):
        other = next(i for i, d in enumerate(frame["device"]) if d != (stated or devices[0]))
        raise SpecError(f"{source}: line {lines[other]}, column 'device': "
                        f"{frame['device'].iloc[other]!r}, but the profile is "
                        f"{stated or devices[0]!r}'s (one GPU per profile)")
    frame.attrs["path"] = source
    return frame, metadata


def _split_lines(text: str, source: str
                 ) -> tuple[dict[str, str], list[str], list[tuple[int, list[str]]]]:
    """Metadata from `# key: value` lines; the CSV header; data rows with their line numbers."""
    metadata: dict[str, str] = {}
    seen: dict[str, int] = {}
    body: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep and key.strip():
                if key.strip() in seen:  # which one holds would be a guess
                    raise SpecError(f"{source}: line {number}: metadata '{key.strip()}' given "
                                    f"twice (also line {seen[key.strip()]})")
                seen[key.strip()] = number
                metadata[key.strip()] = value.strip()
        elif line.strip():
            body.append((number, line))
    if not body:
        raise SpecError(f"{source}: empty profile: no CSV header and no data rows")
    if len(body) - 1 > MAX_PROFILE_ROWS:
        raise SpecError(f"{source}: {len(body) - 1:,} data rows; a profile has at most "
                        f"{MAX_PROFILE_ROWS:,} (calibrating 90,000 takes half a minute)")
    parsed = [(number, _fields(line, number, source)) for number, line in body]
    header = [name.strip() for name in parsed[0][1]]
    if len(parsed) == 1:
        raise SpecError(f"{source}: truncated profile: CSV header but no data rows")
    for number, fields in parsed[1:]:
        if len(fields) != len(header):
            raise SpecError(f"{source}: line {number}: {len(fields)} fields, the header has "
                            f"{len(header)} (truncated or ragged row?)")
    return metadata, header, parsed[1:]


def _fields(line: str, number: int, source: str) -> list[str]:
    """The fields of one CSV line; the csv module's refusals (a field over its 128 KiB limit)
    are one SpecError naming the line."""
    try:
        return next(csv.reader([line]))
    except csv.Error as err:
        raise SpecError(f"{source}: line {number}: not a CSV row ({str(err)[:80]})") from None


def _check_header(header: Sequence[str], source: str) -> None:
    missing = [c for c in PROFILE_COLUMNS if c not in header]
    unknown = [c for c in header if c not in PROFILE_COLUMNS]
    duplicated = sorted({c for c in header if list(header).count(c) > 1})
    if missing:
        raise SpecError(f"{source}: missing column(s) {', '.join(map(repr, missing))}; "
                        f"a profile has: {', '.join(PROFILE_COLUMNS)}")
    if unknown:
        raise SpecError(f"{source}: unknown column(s) {', '.join(map(repr, unknown))}; "
                        f"a profile has: {', '.join(PROFILE_COLUMNS)}")
    if duplicated:
        raise SpecError(f"{source}: column(s) {', '.join(map(repr, duplicated))} repeated")


def validate_profile(frame: pd.DataFrame, *, source: str = "profile",
                     lines: Sequence[int] | None = None) -> pd.DataFrame:
    """Check a profile frame and return it with clean dtypes (str, int64, float64 columns).

    `lines`: the file line of each row, for messages (else rows are counted from 0).
    """
    _check_header(list(frame.columns), source)
    if frame.empty:
        raise SpecError(f"{source}: no data rows")

    def where(row: int, column: str) -> str:
        place = f"line {lines[row]}" if lines is not None else f"row {row}"
        return f"{source}: {place}, column '{column}'"

    out = pd.DataFrame(index=pd.RangeIndex(len(frame)))
    for column in PROFILE_COLUMNS:
        values = frame[column].reset_index(drop=True)
        if column in TEXT_COLUMNS:
            out[column] = _text_column(values, column, where)
        elif column in INT_COLUMNS:
            out[column] = _int_column(values, column, where)
        else:
            out[column] = _time_column(values, column, where)
    _check_rows(out, where)
    return out


MAX_PROFILE_INT = 2**40  # shapes, counts and repeats: far above any real kernel
# Rows of one profile: twice Vidur's public A100 tables (50,506 points), far above what
# `specsim profile` writes; the fit's time grows with them (33 s at 90,000 on 2 cores).
MAX_PROFILE_ROWS = 100_000
MAX_KERNEL_S = 3600.0  # one timed kernel run longer than an hour is a unit error


def _text_column(values: pd.Series, column: str, where: _Where) -> pd.Series:
    text = values.map(lambda v: "" if _is_missing(v) else str(v).strip())
    for row, value in enumerate(text):
        if not value:
            raise SpecError(f"{where(row, column)}: empty")
        if "#" in value or "\n" in value:
            raise SpecError(f"{where(row, column)}: {value!r} may not contain '#' or a newline")
    return text.astype(object)


def _int_column(values: pd.Series, column: str, where: _Where) -> pd.Series:
    numbers = pd.to_numeric(values, errors="coerce").astype(np.float64)
    array = numbers.to_numpy()
    bad = ~np.isfinite(array) | (np.round(array) != array)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise SpecError(f"{where(row, column)}: {show(values.iloc[row])} is not an integer")
    huge = array > MAX_PROFILE_INT
    if huge.any():
        row = int(np.flatnonzero(huge)[0])
        raise SpecError(f"{where(row, column)}: must be <= {MAX_PROFILE_INT:,}, got "
                        f"{show(values.iloc[row])}")
    negative = array < (1 if column in ("tp", "repeats") else 0)
    if negative.any():
        row = int(np.flatnonzero(negative)[0])
        low = 1 if column in ("tp", "repeats") else 0
        raise SpecError(f"{where(row, column)}: must be >= {low}, got {int(array[row])}")
    return pd.Series(array.astype(np.int64))


def _time_column(values: pd.Series, column: str, where: _Where) -> pd.Series:
    array = pd.to_numeric(values, errors="coerce").astype(np.float64).to_numpy()
    missing = ~np.isfinite(array)
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        raise SpecError(f"{where(row, column)}: {show(values.iloc[row])} is not a finite "
                        "number of seconds")
    huge = array > MAX_KERNEL_S
    if huge.any():
        row = int(np.flatnonzero(huge)[0])
        raise SpecError(f"{where(row, column)}: a kernel time must be <= {MAX_KERNEL_S:g} s, "
                        f"got {show(values.iloc[row])}")
    not_positive = array <= 0
    if not_positive.any():
        row = int(np.flatnonzero(not_positive)[0])
        raise SpecError(f"{where(row, column)}: time must be > 0 s, got {float(array[row])!r}")
    return pd.Series(array)


def _check_rows(frame: pd.DataFrame, where: _Where) -> None:
    """Op class, mask and shape rules per row; p10 <= median <= p90."""
    ops = [str(v) for v in frame["op"]]
    classes = [str(v) for v in frame["op_class"]]
    masks = [str(v) for v in frame["mask"]]
    sizes = {c: frame[c].to_numpy(dtype=np.int64) for c in INT_COLUMNS}
    for row, (op, op_class, mask) in enumerate(zip(ops, classes, masks, strict=True)):
        _check_op(row, op, op_class, mask, where)
        for column in _POSITIVE[op_class]:
            if sizes[column][row] < 1:
                raise SpecError(f"{where(row, column)}: {op_class} op {op} needs {column} >= 1")
    p10, median, p90 = (frame[c].to_numpy(dtype=np.float64) for c in TIME_COLUMNS)
    for low, high, column in ((p10, median, "time_p10_s"), (median, p90, "time_p90_s")):
        bad = np.flatnonzero(low > high)
        if bad.size:
            row = int(bad[0])
            raise SpecError(f"{where(row, column)}: p10 <= median <= p90 is violated "
                            f"({float(p10[row])!r}, {float(median[row])!r}, {float(p90[row])!r})")


def _check_op(row: int, op: str, op_class: str, mask: str, where: _Where) -> None:
    if op_class not in PROFILE_OP_CLASSES:
        raise SpecError(f"{where(row, 'op_class')}: {op_class!r} is not one of "
                        f"{', '.join(PROFILE_OP_CLASSES)}")
    if op_class == "attention" and op not in ATTENTION_MASKS:
        raise SpecError(f"{where(row, 'op')}: attention op {op!r} is not one of "
                        f"{', '.join(ATTENTION_MASKS)}")
    if op_class == "memory" and op not in MEMORY_OPS:
        raise SpecError(f"{where(row, 'op')}: memory op {op!r} is not one of "
                        f"{', '.join(MEMORY_OPS)}")
    expected = ATTENTION_MASKS.get(op, "none") if op_class == "attention" else "none"
    if mask != expected:
        raise SpecError(f"{where(row, 'mask')}: op {op} needs mask {expected!r}, got {mask!r}")


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# ---------------------------------------------------------------- model consistency

def check_profile_matches_model(frame: pd.DataFrame, model: Model, tp: int, *,
                                source: str | None = None) -> None:
    """Raise SpecError when the profile's shapes are not `model`'s shapes at TP `tp`.

    Checks the TP column, every GEMM op's k x n, the attention heads and head dim, and the
    sampled vocabulary. `source` names the file (default: frame.attrs["path"]).
    """
    src = source or str(frame.attrs.get("path", "profile"))
    hint = "was it measured for another model?"
    tps = sorted({int(v) for v in frame["tp"]})
    if tps != [tp]:
        raise SpecError(f"{src}: measured at TP {', '.join(map(str, tps))} but TP {tp} "
                        "was asked for")
    expected = model_gemm_shapes(model, tp)
    for op, k, n in _distinct(frame, "gemm", "k", "n"):
        if op not in expected:
            raise SpecError(f"{src}: op {op} is not a weight GEMM of {model.slug} (it has "
                            f"{', '.join(expected)}); {hint}")
        if (k, n) != expected[op]:
            ek, en = expected[op]
            raise SpecError(f"{src}: op {op} has k x n = {k} x {n} but {model.slug} at TP {tp} "
                            f"has {ek} x {en}; {hint}")
    heads, _, qk_dim, _ = attention_shape(model, tp)
    for op, k, n in _distinct(frame, "attention", "k", "n"):
        if (k, n) != (heads, qk_dim):
            raise SpecError(f"{src}: op {op} has {k} heads x head dim {n} per GPU but "
                            f"{model.slug} at TP {tp} has {heads} x {qk_dim}; {hint}")
    for op, _, n in _distinct(frame, "memory", "k", "n"):
        if n != model.vocab_size:
            raise SpecError(f"{src}: op {op} samples over n = {n} tokens but {model.slug} "
                            f"has a vocabulary of {model.vocab_size}; {hint}")


def _distinct(frame: pd.DataFrame, op_class: str, a: str, b: str) -> list[tuple[str, int, int]]:
    rows = frame.loc[frame["op_class"] == op_class, ["op", a, b]].drop_duplicates()
    return [(str(op), int(x), int(y)) for op, x, y in rows.itertuples(index=False)]


# ---------------------------------------------------------------- writing

def write_profile(frame: pd.DataFrame, path: str | os.PathLike[str],
                  metadata: Mapping[str, object], *, force: bool = False) -> None:
    """Validate and write a profile CSV with its `# key: value` header.

    Refuses to overwrite an existing file unless `force`; writes a temporary file in the same
    folder and renames it, so a failure never leaves a half-written or lost profile.
    """
    target = Path(path)
    check_writable(target, force=force)
    if not target.parent.is_dir():
        raise SpecError(f"{target}: folder {target.parent} does not exist")
    clean = validate_profile(frame, source=str(target))
    header = "".join(f"# {_metadata_key(key)}: {_one_line(value)}\n"
                     for key, value in metadata.items())

    def write(handle: TextIO) -> None:
        handle.write(header)
        clean.to_csv(handle, index=False, lineterminator="\n", float_format="%.7g")

    atomic_write(target, write)


def _metadata_key(key: str) -> str:
    if not key or ":" in key or "\n" in key or key != key.strip():
        raise SpecError(f"metadata key {key!r} must be non-empty, trimmed, without ':'")
    return key


def _one_line(value: object) -> str:
    return " ".join(str(value).split())

"""Read the public Vidur profiling tables (measured kernel times) into tidy DataFrames.

This is an I/O module: it reads Vidur's ``data/profiling`` layout
(``compute/<device>/<org>/<model>/mlp.csv`` and the reshaped attention table) and returns
tidy pandas frames in SI units (seconds). Everything it rejects raises ``SpecError`` naming
the file, the column and the offending value.

Deduplication: Vidur's token grid repeats its boundary points (1024, 2048, ...) as two
separately measured rows. We merge them into one row per grid point: ``time_s`` is the mean
of the duplicate medians, ``time_min_s``/``time_max_s`` the min of the mins and max of the
maxes, and ``n_measurements`` counts the merged rows.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.errors import SpecError
from specsim.specs.io import MAX_FILE_BYTES, read_text
from specsim.specs.paths import probe

# A Vidur table is a few MB (its largest, an mlp.csv, about 2 MB).
MAX_CSV_BYTES = MAX_FILE_BYTES

# The four weight GEMMs of one transformer layer, in Vidur's op names.
GEMM_OPS: tuple[str, ...] = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
# The non-GEMM ops of one layer (elementwise kernels and the embedding lookup); k = n = NaN.
SMALL_OPS: tuple[str, ...] = (
    "emb",
    "input_layernorm",
    "attn_rope",
    "post_attention_layernorm",
    "mlp_act",
    "add",
)
SHAPE_COLUMNS: tuple[str, ...] = (
    "n_head",
    "n_kv_head",
    "n_embd",
    "n_expanded_embd",
    "use_gated_mlp",
    "num_tokens",
    "num_tensor_parallel_workers",
)
# Vidur's device folders and the built-in GPU profile of each (Vidur profiled the A100 80GB
# SXM, the A40 and the H100 80GB; its folders are named by GPU family only). The H100 is the
# SXM part: Vidur's device config for it gives 1,000 dense fp16 TFLOP/s (the SXM datasheet's
# 989; the PCIe card has 756), microsoft/vidur vidur/config/device_sku_config.py.
DEVICE_HARDWARE: dict[str, str] = {"a100": "a100-80g-sxm", "a40": "a40", "h100": "h100-sxm"}
_STATS: tuple[str, ...] = ("min", "max", "median")
_MS_TO_S = 1e-3

ATTENTION_COLUMNS: tuple[str, ...] = (
    "device",
    "tensor_parallel",
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "head_dim",
    "is_prefill",
    "batch_size",
    "prefill_chunk_size",
    "kv_cache_size",
    "time_ms",
    "input_reshape_ms",
    "output_reshape_ms",
)
_ATTENTION_KEYS: tuple[str, ...] = (
    "device",
    "tensor_parallel",
    "is_prefill",
    "batch_size",
    "prefill_chunk_size",
    "kv_cache_size",
)


def _read_csv(path: Path) -> pd.DataFrame:
    """Read one CSV; an unreadable, oversized, non-UTF-8 or empty file is a SpecError naming
    it (the text is read and decoded by `read_text`, then parsed from memory)."""
    text = read_text(path, what="Vidur CSV table", limit=MAX_CSV_BYTES)
    try:
        frame = pd.read_csv(io.StringIO(text))
    except (pd.errors.EmptyDataError, pd.errors.ParserError, ValueError) as exc:
        problem = str(exc).strip().replace("\n", " ")
        problem = problem if len(problem) <= 80 else problem[:77] + "..."
        raise SpecError(f"{path}: cannot read CSV ({problem})") from None
    if frame.empty:
        raise SpecError(f"{path}: file has no data rows")
    return frame


def _require_columns(frame: pd.DataFrame, columns: tuple[str, ...], path: Path) -> None:
    """Raise SpecError naming the first required column that the file lacks."""
    for column in columns:
        if column not in frame.columns:
            raise SpecError(f"{path}: missing column {column!r}")


def _checked_times_ms(frame: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    """Column of times in ms as float64; NaN, non-numeric or negative values are SpecErrors."""
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0.0))
    if bad.size:
        row = int(bad[0])
        raise SpecError(
            f"{path}: column {column!r} row {row + 2} has invalid time {frame[column].iloc[row]!r}"
            " (need a finite number >= 0)"
        )
    return values


def _checked_ints(frame: pd.DataFrame, column: str, path: Path, minimum: int) -> np.ndarray:
    """Integer column >= minimum; anything else is a SpecError naming file, column and row."""
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values < minimum) | (values != np.round(values)))
    if bad.size:
        row = int(bad[0])
        raise SpecError(
            f"{path}: column {column!r} row {row + 2} has {frame[column].iloc[row]!r}"
            f" (need an integer >= {minimum})"
        )
    return values.astype(np.int64)


def _checked_bools(frame: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    """Boolean column written as True/False (any case) or 1/0."""
    text = frame[column].astype(str).str.strip().str.lower()
    mapping = {"true": True, "1": True, "1.0": True, "false": False, "0": False, "0.0": False}
    unknown = ~text.isin(list(mapping))
    if unknown.any():
        row = int(np.flatnonzero(unknown.to_numpy())[0])
        raise SpecError(
            f"{path}: column {column!r} row {row + 2} has {frame[column].iloc[row]!r}"
            " (need True/False)"
        )
    return text.map(mapping).to_numpy(dtype=bool)


def _exact_div(num: np.ndarray, den: np.ndarray, what: str, path: Path) -> np.ndarray:
    """num / den element-wise, which must divide exactly (a tensor-parallel split)."""
    if np.any(num % den):
        i = int(np.flatnonzero(num % den)[0])
        raise SpecError(f"{path}: {what} = {num[i]} is not divisible by {den[i]}")
    return np.asarray(num // den, dtype=np.int64)


def gemm_shards(shape: pd.DataFrame, path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-GPU (k, n) of each weight GEMM from Vidur's full-model shape columns.

    Args:
        shape: frame with the SHAPE_COLUMNS (one row per measurement).
        path: the file it came from (for error messages).

    Returns:
        {op: (k, n)}, int64 arrays of the row count. QKV: d x (h/TP + 2 max(1, h_kv/TP)) hd
        (KV heads are replicated, not split, when TP exceeds them, as vLLM does); output
        projection (d/TP) x d; up projection d x (2 ff/TP) when gated else d x ff/TP; down
        projection (ff/TP) x d.
    """
    tp = _checked_ints(shape, "num_tensor_parallel_workers", path, 1)
    n_head = _checked_ints(shape, "n_head", path, 1)
    n_kv_head = _checked_ints(shape, "n_kv_head", path, 1)
    d_model = _checked_ints(shape, "n_embd", path, 1)
    d_ff = _checked_ints(shape, "n_expanded_embd", path, 1)
    gated = _checked_bools(shape, "use_gated_mlp", path)
    head_dim = _exact_div(d_model, n_head, "n_embd / n_head", path)
    q_heads = _exact_div(n_head, tp, "n_head / TP", path)
    kv_heads = np.where(n_kv_head >= tp, n_kv_head // tp, 1)
    if np.any((n_kv_head >= tp) & (n_kv_head % tp != 0)):
        raise SpecError(f"{path}: n_kv_head is not divisible by num_tensor_parallel_workers")
    ff_shard = _exact_div(d_ff, tp, "n_expanded_embd / TP", path)
    d_shard = _exact_div(d_model, tp, "n_embd / TP", path)
    up_n = np.where(gated, 2, 1) * ff_shard
    return {
        "attn_pre_proj": (d_model, (q_heads + 2 * kv_heads) * head_dim),
        "attn_post_proj": (d_shard, d_model),
        "mlp_up_proj": (d_model, up_n),
        "mlp_down_proj": (ff_shard, d_model),
    }


def _mlp_ops(frame: pd.DataFrame) -> list[str]:
    """Ops present in the file, in a fixed order (known ops first, then any others sorted)."""
    found = {c.split(".")[1] for c in frame.columns if c.startswith("time_stats.")}
    known = [op for op in (*SMALL_OPS[:2], *GEMM_OPS, *SMALL_OPS[2:]) if op in found]
    return known + sorted(found - set(known))


def _tidy_mlp_file(path: Path, device: str, model: str) -> pd.DataFrame:
    """One mlp.csv as tidy rows (one per op and grid point, duplicates not yet merged)."""
    frame = _read_csv(path)
    _require_columns(frame, SHAPE_COLUMNS, path)
    ops = _mlp_ops(frame)
    if not set(GEMM_OPS) <= set(ops):
        missing = sorted(set(GEMM_OPS) - set(ops))[0]
        raise SpecError(f"{path}: missing column 'time_stats.{missing}.median'")
    shards = gemm_shards(frame, path)
    tokens = _checked_ints(frame, "num_tokens", path, 1)
    tp = _checked_ints(frame, "num_tensor_parallel_workers", path, 1)
    nan = np.full(len(frame), np.nan)
    parts = []
    for op in ops:
        stat_columns = tuple(f"time_stats.{op}.{stat}" for stat in _STATS)
        _require_columns(frame, stat_columns, path)
        t_min, t_max, t_med = (_checked_times_ms(frame, c, path) * _MS_TO_S for c in stat_columns)
        k, n = shards.get(op, (nan, nan))
        parts.append(
            pd.DataFrame(
                {
                    "device": device,
                    "model": model,
                    "tp": tp,
                    "op": op,
                    "num_tokens": tokens,
                    "k": np.asarray(k, dtype=np.float64),
                    "n": np.asarray(n, dtype=np.float64),
                    "time_s": t_med,
                    "time_min_s": t_min,
                    "time_max_s": t_max,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def _merge_duplicates(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per key: mean of medians, min of mins, max of maxes, count of merged rows."""
    grouped = frame.groupby(keys, sort=True, dropna=False)
    merged = grouped.agg(
        time_s=("time_s", "mean"),
        time_min_s=("time_min_s", "min"),
        time_max_s=("time_max_s", "max"),
        n_measurements=("time_s", "size"),
    )
    return merged.reset_index()


def vidur_devices(root: Path) -> list[str]:
    """The device folders under a Vidur profiling folder's compute/ (sorted; [] if none)."""
    compute = root / "compute" if probe(root / "compute", "is_dir") else root
    if not probe(compute, "is_dir"):
        return []
    return sorted(p.name for p in compute.iterdir() if p.is_dir())


def device_of_hardware(hardware_slug: str) -> str:
    """The Vidur device folder a GPU profile (or a profile calibrated from one) was measured as."""
    name = hardware_slug.split("/")[-1]
    for device, slug in DEVICE_HARDWARE.items():
        if name == slug or name.startswith(f"{slug}-"):
            return device
    raise SpecError(f"hardware '{hardware_slug}': no Vidur device measured it (Vidur has "
                    f"{', '.join(f'{d} = {s}' for d, s in DEVICE_HARDWARE.items())}); "
                    "pass --device")


def vidur_target(root: Path, *, hardware: str | None, device: str | None) -> tuple[str, str]:
    """(GPU profile, Vidur device) to calibrate from a Vidur folder.

    An explicit device wins; else the hardware's device; else the folder's only device. The
    GPU profile is the given one, else the device's built-in profile.
    """
    if device is None and hardware is not None:
        device = device_of_hardware(hardware)
    if device is None:
        found = vidur_devices(root)
        if len(found) != 1:
            raise SpecError(f"{root}: holds devices {', '.join(found) or '(none)'}; pick one "
                            "with --device or --hardware")
        device = found[0]
    if hardware is None:
        if device not in DEVICE_HARDWARE:
            raise SpecError(f"Vidur device '{device}': no built-in GPU profile; pass --hardware")
        hardware = DEVICE_HARDWARE[device]
    return hardware, device


def _mlp_files(root: Path, device: str | None) -> list[tuple[str, str, Path]]:
    """(device, "org/name", path) of every compute/<device>/<org>/<name>/mlp.csv, sorted."""
    compute = root / "compute" if probe(root / "compute", "is_dir") else root
    if not probe(compute, "is_dir"):
        raise SpecError(f"{root}: not a directory of Vidur profiles")
    pattern = f"{device}/*/*/mlp.csv" if device is not None else "*/*/*/mlp.csv"
    found = sorted(compute.glob(pattern))
    if not found:
        what = f"device {device!r}" if device is not None else "any device"
        raise SpecError(f"{compute}: no <device>/<org>/<model>/mlp.csv files for {what}")
    return [(p.parts[-4], f"{p.parts[-3]}/{p.parts[-2]}", p) for p in found]


def read_vidur_mlp(root: Path, device: str | None = None) -> pd.DataFrame:
    """Read every ``compute/<device>/<org>/<model>/mlp.csv`` under root into tidy rows.

    Args:
        root: the Vidur profiling folder (holding ``compute/``) or the ``compute`` folder.
        device: a device folder name ("a100", "a40"); None reads all devices.

    Returns:
        One row per (device, model, tp, op, num_tokens) with columns device, model
        ("org/name"), tp, op, num_tokens, k, n (per-GPU weight shard of the GEMM ops, NaN for
        the small ops), time_s (median kernel time, s; mean over duplicated grid points),
        time_min_s, time_max_s (s; Vidur stores no percentiles) and n_measurements.
    """
    frames = [_tidy_mlp_file(path, dev, model) for dev, model, path in _mlp_files(root, device)]
    keys = ["device", "model", "tp", "op", "num_tokens", "k", "n"]
    return _merge_duplicates(pd.concat(frames, ignore_index=True), keys)


def gemm_layer_time(frame: pd.DataFrame) -> pd.DataFrame:
    """Sum of the four weight-GEMM times of one layer per (device, model, tp, num_tokens).

    Args:
        frame: rows from read_vidur_mlp (time_s in s).

    Returns:
        Columns device, model, tp, num_tokens, time_s (s); only points with all four GEMMs.
    """
    gemms = frame[frame["op"].isin(GEMM_OPS)]
    keys = ["device", "model", "tp", "num_tokens"]
    summed = gemms.groupby(keys, sort=True).agg(time_s=("time_s", "sum"), ops=("op", "nunique"))
    complete = summed[summed["ops"] == len(GEMM_OPS)]
    return complete.drop(columns="ops").reset_index()


def read_vidur_attention(path: Path) -> pd.DataFrame:
    """Read the reshaped Vidur attention table (``attention_a100_llama70b_tp2.csv``).

    Args:
        path: the CSV file.

    Returns:
        One row per (device, tp, is_prefill, batch_size, prefill_chunk_size, kv_cache_size),
        duplicates merged by mean, with columns device, tp, n_embd, q_heads, kv_heads (per GPU),
        head_dim, is_prefill (bool), batch_size, prefill_chunk_size, kv_cache_size,
        time_s, input_reshape_s, output_reshape_s (s) and n_measurements.
    """
    frame = _read_csv(path)
    _require_columns(frame, ATTENTION_COLUMNS, path)
    ints = {
        c: _checked_ints(frame, c, path, 1)
        for c in ("tensor_parallel", "n_embd", "n_q_head", "n_kv_head", "head_dim", "batch_size")
    }
    for column in ("prefill_chunk_size", "kv_cache_size"):
        ints[column] = _checked_ints(frame, column, path, 0)
    times = {
        c.removesuffix("_ms") + "_s": _checked_times_ms(frame, c, path) * _MS_TO_S
        for c in ("time_ms", "input_reshape_ms", "output_reshape_ms")
    }
    tp = ints["tensor_parallel"]
    tidy = pd.DataFrame(
        {
            "device": frame["device"].astype(str).to_numpy(),
            "tp": tp,
            "n_embd": ints["n_embd"],
            "q_heads": _exact_div(ints["n_q_head"], tp, "n_q_head / tensor_parallel", path),
            "kv_heads": np.maximum(1, ints["n_kv_head"] // tp),
            "head_dim": ints["head_dim"],
            "is_prefill": _checked_bools(frame, "is_prefill", path),
            "batch_size": ints["batch_size"],
            "prefill_chunk_size": ints["prefill_chunk_size"],
            "kv_cache_size": ints["kv_cache_size"],
            **times,
        }
    )
    keys = [c.replace("tensor_parallel", "tp") for c in _ATTENTION_KEYS]
    keys += ["n_embd", "q_heads", "kv_heads", "head_dim"]
    merged = tidy.groupby(keys, sort=True).agg(
        time_s=("time_s", "mean"),
        input_reshape_s=("input_reshape_s", "mean"),
        output_reshape_s=("output_reshape_s", "mean"),
        n_measurements=("time_s", "size"),
    )
    return merged.reset_index()

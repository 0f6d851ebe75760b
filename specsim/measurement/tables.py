"""Measured kernel times from files, as the tidy table `calibrate` reads (I/O edge).

Two sources: a profile CSV written by `specsim profile` (specsim format), and the public
profiling tables of the Vidur simulator (its `compute/<device>/<org>/<model>/mlp.csv` tree,
and the reshaped attention table beside it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from specsim.errors import SpecError, check_int, parameter_error
from specsim.measurement.backends import L2_FLUSH_KEY
from specsim.measurement.calibrate import MEASUREMENT_COLUMNS
from specsim.measurement.profile_csv import read_profile
from specsim.measurement.vidur import (
    GEMM_OPS,
    read_vidur_attention,
    read_vidur_mlp,
    vidur_devices,
    vidur_target,
)
from specsim.specs.defaults import DEFAULT_HARDWARE, MAX_TP
from specsim.specs.dtypes import BYTES_PER_PARAM
from specsim.specs.paths import probe

FORMATS = ("specsim", "vidur")
VIDUR_ATTENTION = "attention_a100_llama70b_tp2.csv"
# Vidur measured in fp16 (its README); the attention table has the Llama-2/3-70B shape.
VIDUR_DTYPE = "fp16"
VIDUR_ATTENTION_MODEL = "llama-70b-shape (attention table)"


# Whether each source flushed the L2 between timed repeats of a kernel: a weight shard that
# stays in the L2 when a profiler repeats the same GEMM is timed at L2, not HBM, speed.
# Vidur's MLP profiler (github.com/microsoft/vidur, vidur/profiling/mlp/mlp_impl.py and
# mlp_wrapper.py at commit 7d47513): GPTModel runs one transformer block num_repeat_steps = 20
# times back to back in one forward (record_function timing sums each op's kernels from a
# torch profiler trace), with no flush; between two runs of one GEMM the block's other weight
# GEMMs stream their shards through the L2.
VIDUR_L2 = ("not flushed between repeats (Vidur's MLP profiler runs one transformer block 20 "
            "times back to back, vidur/profiling/mlp); a GEMM's weights are read again after "
            "the block's other weight GEMMs")


def l2_statement(points: pd.DataFrame, fmt: str, metadata: dict[str, str] | None = None
                 ) -> str:
    """Whether the source flushed the L2 between repeats, and for Vidur's tables the fewest
    weight bytes one repeat of a block streams (its four weight shards: the smallest block of
    the table), which a shard would have to outlast in the L2 to be timed there."""
    if fmt != "vidur":
        flushed = (metadata or {}).get(L2_FLUSH_KEY, "")
        return f"L2 {flushed}" if flushed else \
            "L2 flush between runs: not stated by the profile"
    gemm = points[points["op_class"] == "gemm"].drop_duplicates(["model", "tp", "op"])
    if gemm.empty:
        return f"L2 {VIDUR_L2}"
    per_block = (gemm["k"] * gemm["n"] * BYTES_PER_PARAM[VIDUR_DTYPE]).groupby(
        [gemm["model"], gemm["tp"]]).sum()
    i = int(np.argmin(per_block.to_numpy()))
    model, tp = (str(v) for v in per_block.index[i])
    return (f"L2 {VIDUR_L2}: at least {float(per_block.iloc[i]) / 1e6:,.1f} MB per repeat "
            f"({model}, TP {tp})")


# KV heads one GPU holds: far above any model's (DeepSeek-V3's MLA: 128 heads on one GPU).
MAX_KV_HEADS_PER_GPU = 4096


def from_specsim(path: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """A `specsim profile` CSV and its metadata header."""
    frame, meta = read_profile(path)
    out = frame.rename(columns={"time_median_s": "time_s"})
    kv = meta.get("kv_heads_per_gpu", "0")
    try:
        out["kv_heads"] = int(kv)
    except ValueError:
        raise SpecError(f"{path}: metadata 'kv_heads_per_gpu' must be an integer, got {kv!r}") \
            from None
    if (out["op_class"] == "attention").any() and out["kv_heads"].iloc[0] < 1:
        raise SpecError(f"{path}: attention rows need metadata 'kv_heads_per_gpu' >= 1")
    if not 0 <= int(kv) <= MAX_KV_HEADS_PER_GPU:
        raise SpecError(f"{path}: metadata 'kv_heads_per_gpu' must be in 0..{MAX_KV_HEADS_PER_GPU}"
                        f", got {kv!r}")
    return out[list(MEASUREMENT_COLUMNS)], meta


def from_vidur(root: Path, device: str) -> pd.DataFrame:
    """Vidur's weight-GEMM rows for one device (and its attention table where present)."""
    if not probe(root / "compute", "is_dir") and root.name != "compute":
        raise SpecError(f"{root}: not a Vidur profiling folder (no compute/ inside)")
    devices = vidur_devices(root) if probe(root / "compute", "is_dir") else []
    if devices and device not in devices:
        raise SpecError(f"{root}: no device '{device}' (has: {', '.join(devices)})")
    mlp = read_vidur_mlp(root, device)
    gemm = mlp[mlp["op"].isin(GEMM_OPS)]
    rows = pd.DataFrame({
        "model": gemm["model"], "tp": gemm["tp"], "op": gemm["op"], "op_class": "gemm",
        "dtype": VIDUR_DTYPE, "m": gemm["num_tokens"], "k": gemm["k"], "n": gemm["n"],
        "count": 1, "batch": 0, "context": 0, "queries": 0, "mask": "none", "kv_heads": 0,
        "time_s": gemm["time_s"]})
    attention = root / VIDUR_ATTENTION
    if probe(attention, "is_file") and attention.name.startswith(f"attention_{device}_"):
        rows = pd.concat([rows, _vidur_attention(attention)], ignore_index=True)
    return rows[list(MEASUREMENT_COLUMNS)].reset_index(drop=True)


def _vidur_attention(path: Path) -> pd.DataFrame:
    a = read_vidur_attention(path)
    prefill = a["is_prefill"].to_numpy(bool)
    return pd.DataFrame({
        "model": VIDUR_ATTENTION_MODEL, "tp": a["tp"],
        "op": np.where(prefill, "attention_causal", "attention_decode"),
        "op_class": "attention", "dtype": VIDUR_DTYPE, "m": 0, "k": a["q_heads"],
        "n": a["head_dim"], "count": 1,
        "batch": np.where(prefill, 1, a["batch_size"]),
        "context": a["kv_cache_size"],
        "queries": np.where(prefill, a["prefill_chunk_size"], 1),
        "mask": np.where(prefill, "causal", "none"), "kv_heads": a["kv_heads"],
        "time_s": a["time_s"]})


def check_calibration_options(*, fmt: str, device: str | None, model: str | None,
                              tp: int) -> None:
    """Options of a calibration that would be ignored, refused naming each: a Vidur `device`
    folder for a specsim profile (which names its device in its '# device:' line), and a TP
    degree without the `model` whose shapes it checks at that degree."""
    if fmt not in FORMATS:
        raise parameter_error("fmt", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if device is not None and fmt != "vidur":
        raise parameter_error("device", f"{device!r} picks a Vidur device folder (--format "
                              "vidur); a specsim profile names its device in its '# device:' "
                              "line")
    check_int(tp, "tp", low=1, high=MAX_TP)
    if tp != 1 and model is None:
        raise parameter_error("tp", f"{tp} is the TP degree --model's shapes are checked at; "
                              "give --model too, or leave --tp out")


def measured_hardware(path: Path, fmt: str, *, hardware: str | None, device: str | None
                      ) -> tuple[str, str]:
    """(GPU profile, Vidur device) a calibration is for.

    specsim format: the given profile, else DEFAULT_HARDWARE (device unused). Vidur format:
    the device and profile follow from each other, else from the folder (see `vidur_target`).
    """
    if fmt not in FORMATS:
        raise parameter_error("fmt", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "vidur":
        return vidur_target(path, hardware=hardware, device=device)
    return hardware or DEFAULT_HARDWARE, ""


def read_measurements(path: Path, fmt: str, *, device: str = "") -> pd.DataFrame:
    """Measurements of either format; `device` picks the Vidur device folder."""
    return read_measurements_and_metadata(path, fmt, device=device)[0]


def read_measurements_and_metadata(path: Path, fmt: str, *, device: str = ""
                                   ) -> tuple[pd.DataFrame, dict[str, str]]:
    """Measurements of either format and a specsim profile's metadata (its `device` is the GPU
    it ran on; none for Vidur, whose device folder already chose the hardware). A path the OS
    refuses (a name too long) is 'no such profile file', like a missing one."""
    if fmt not in FORMATS:
        raise parameter_error("fmt", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "vidur":
        return from_vidur(path, device), {}
    if not probe(path, "is_file"):
        raise SpecError(f"{path}: no such profile file")
    return from_specsim(path)

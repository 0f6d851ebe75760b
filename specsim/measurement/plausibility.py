"""What a GPU's physics allows a calibration: ranges of the fitted terms, and a unit sniff.

`specsim.measurement.calibrate` refuses a fit that falls outside them (unless told to accept
it): measured times faster than the datasheet or slower than any kernel can be (a unit
mistake: milliseconds read as seconds), and fitted efficiencies, floors and overheads outside
what real GPUs show. Each problem is one line naming the field, its value and the range.
Also here: short texts for ratios, durations and percentages, so that a wild number prints
as a few characters rather than hundreds of digits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError
from specsim.specs.hardware import Efficiency, OpEfficiency


class ImplausibleCalibration(SpecError):
    """A calibration the GPU's physics rules out; `problems`: one line per field, saying why."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("implausible calibration: " + "; ".join(self.problems))


# Search bounds of the roofline fits (attention, memory): a fitted value at one of them is not
# a measurement but the fit's edge (efficiency_problems says so).
ROOFLINE_BOUNDS: dict[str, tuple[float, float]] = {
    "bandwidth": (0.05, 1.0), "flops": (0.01, 1.0), "floor_s": (1e-12, 1.0)}


# Ranges a real GPU's fitted terms fall in, each with where it comes from. The committed
# calibrated profiles (hardware/calibrated/: the A100 and A40 fitted to Vidur's tables) sit
# well inside all of them; a table in the wrong unit (times 1,000x off) falls far outside.

# Fractions of the datasheet bandwidth: the committed fits stream 0.77-0.87 (weight GEMMs,
# tiled attention) and 0.79 (attention roofline), DESIGN.md section 9 quotes 75-90% for real
# GPUs; 0.05 is 15x below the lowest. Above 1.05 a kernel would beat the datasheet (5% for
# boost clocks and the datasheet's rounding).
BANDWIDTH_RANGE = (0.05, 1.05)
# Fractions of the datasheet's peak flops: the committed fits reach 0.76-0.79 (GEMMs) and
# 0.37-0.48 (attention, with its softmax between the two matmuls); 0.02 is 18x below the lowest.
FLOPS_RANGE = (0.02, 1.05)
# Fixed times per kernel (the GEMM memory-path floor, the attention floors, per-CTA and
# split-combine times): the committed fits are 0-17 us, and a CUDA kernel launch costs 2-10 us;
# 1 ms is 57x the largest fit.
MAX_FIXED_S = 1e-3
# A GEMM's per-tile prologue and epilogue in reduction steps (gemm.epilogue_k): the committed
# fits are 76 (A100) and 112 (A40), about what filling a k-pipeline of a few stages and writing
# the output tile cost. 4,096 (37x the largest) would be a whole 4,096-wide reduction paid
# again per tile: every TP-8 shard of an 8B model would run at under a fifth of its peak.
MAX_EPILOGUE_K = 4096.0
# Bandwidth one attention CTA reaches alone, in SM shares (attention.<kernel>.sm_bandwidth):
# the committed A100 fit is 0.85 (decode; the prefill kernel keeps the prior, 2); 0.05 is 17x
# below.
MIN_SM_BANDWIDTH = 0.05
# Measured time over the ideal datasheet roofline (no floor) of each kernel, on Vidur's tables:
# at least 1.11 (A40) and 1.14 (A100) on every one of their 58,262 kernels, median 1.40 and
# 1.50, at most 364 (tiny attention kernels, floor-bound). A table whose median kernel beats the
# datasheet by TOO_FAST, or is slower than the slowest kernel the ranges above allow (the
# roofline at the lowest flops fraction plus the largest fixed time), is refused.
TOO_FAST = 1.1
# What a typical kernel takes, to guess the unit of a table that is off: 1.5x its roofline
# (the Vidur tables' median) plus a 5 us floor (the committed GEMM floors are 2.0-5.7 us).
TYPICAL_ROOFLINE_RATIO = 1.5
TYPICAL_FLOOR_S = 5e-6
# The order the op classes are reported in: the GEMMs are most of any profile.
_CLASS_ORDER = ("gemm", "attention", "memory")


def measurement_problems(op_class: ArrayLike, time_s: ArrayLike, ideal_s: ArrayLike, *,
                         gpu: str) -> tuple[str, ...]:
    """Per op class, why its measured times cannot be kernels of the GPU named `gpu`: the
    median kernel faster than the datasheet allows, or slower than any kernel of this GPU
    can be (the roofline at the lowest flops fraction plus the largest fixed time); each
    line starts with what the times look like (e.g. milliseconds in the seconds column).

    Args:
        op_class: each kernel's op class (gemm, attention, memory).
        time_s: its measured time, s.
        ideal_s: its ideal datasheet roofline time (full bandwidth and flops, no floor), s.
        gpu: the datasheet's name, for the message.
    """
    classes = np.asarray(op_class, dtype=object)
    time = np.asarray(time_s, dtype=np.float64)
    ideal = np.asarray(ideal_s, dtype=np.float64)
    names = sorted({str(c) for c in classes},
                   key=lambda c: (_CLASS_ORDER.index(c) if c in _CLASS_ORDER else 9, c))
    problems = []
    for name in names:
        pick = (classes == name) & (ideal > 0) & (time > 0)
        if not pick.any():
            continue
        ratio = float(np.median(time[pick] / ideal[pick]))
        ceiling = ideal[pick] / FLOPS_RANGE[0] + MAX_FIXED_S
        typical = TYPICAL_ROOFLINE_RATIO * ideal[pick] + TYPICAL_FLOOR_S
        guess = _unit_guess(float(np.median(time[pick] / typical)))
        if ratio < 1.0 / TOO_FAST:
            problems.append(
                f"time_s ({name} kernels): {guess}: the median kernel runs "
                f"{factor_text(1.0 / ratio)}x faster than the {gpu} datasheet (peak bandwidth "
                "and flops) allows")
        elif float(np.median(time[pick] / ceiling)) > 1.0:
            problems.append(
                f"time_s ({name} kernels): {guess}: the median kernel takes "
                f"{factor_text(ratio)}x its datasheet roofline time, slower than any kernel of "
                f"the {gpu} can be ({1 / FLOPS_RANGE[0]:g}x the roofline plus "
                f"{MAX_FIXED_S * 1e3:g} ms)")
    return tuple(problems)


def _unit_guess(scale: float) -> str:
    """What times `scale` x a typical kernel's say of their unit (to the nearest 1000x)."""
    if not scale > 0:
        return "the times are not a kernel's"
    power = round(math.log10(scale) / 3)
    if power == 1:
        return "the times look like milliseconds, and the column is seconds"
    if power >= 2:
        return "the times look like microseconds or nanoseconds, and the column is seconds"
    if power in (-1, -2):
        return (f"the times look about {factor_text(1000.0 ** -power)}x too small (seconds "
                "where milliseconds were expected?)")
    if power < -2:
        return "the times are too small for any unit of a kernel's time"
    return "were the kernels measured on another GPU?"


def efficiency_problems(eff: Efficiency) -> tuple[str, ...]:
    """Fitted fields outside what a real GPU shows (the ranges above), or at the edge of
    their fit's search range; one line per field, naming it, its value and the range."""
    problems: dict[str, str] = {}

    def fraction(name: str, value: float, bounds: tuple[float, float], of: str) -> None:
        if not bounds[0] <= value <= bounds[1]:
            problems.setdefault(name, f"{name} {value:.3g}: outside the [{bounds[0]:g}, "
                                      f"{bounds[1]:g}] of the datasheet's {of} that real GPUs "
                                      "reach")

    def fixed(name: str, value: float) -> None:
        if value > MAX_FIXED_S:
            problems.setdefault(name, f"{name} {seconds_text(value)}: above the "
                                      f"{MAX_FIXED_S * 1e3:g} ms a kernel's fixed time can be")

    def roofline(prefix: str, op: OpEfficiency, *, fitted_flops: bool) -> None:
        for field, value in (("bandwidth", op.bandwidth), ("flops", op.flops)):
            if field == "flops" and not fitted_flops:
                continue
            if value <= ROOFLINE_BOUNDS[field][0] * 1.01:
                problems[f"{prefix}.{field}"] = (
                    f"{prefix}.{field} {value:.3g}: pinned at its fit's lower bound "
                    f"{ROOFLINE_BOUNDS[field][0]:g} (the times want a slower GPU)")
        if op.floor_s >= ROOFLINE_BOUNDS["floor_s"][1] * 0.99:
            problems[f"{prefix}.floor_s"] = (
                f"{prefix}.floor_s {seconds_text(op.floor_s)}: pinned at its fit's upper "
                f"bound {seconds_text(ROOFLINE_BOUNDS['floor_s'][1])}")
        fraction(f"{prefix}.bandwidth", op.bandwidth, BANDWIDTH_RANGE, "bandwidth")
        fraction(f"{prefix}.flops", op.flops, FLOPS_RANGE, "peak flops")
        fixed(f"{prefix}.floor_s", op.floor_s)

    gemm = eff.gemm
    fraction("gemm.bandwidth", gemm.bandwidth, BANDWIDTH_RANGE, "bandwidth")
    fraction("gemm.flops", gemm.flops, FLOPS_RANGE, "peak flops")
    fixed("gemm.floor_s", gemm.floor_s)
    if gemm.epilogue_k > MAX_EPILOGUE_K:
        problems["gemm.epilogue_k"] = (
            f"gemm.epilogue_k {gemm.epilogue_k:.3g}: above {MAX_EPILOGUE_K:,.0f} reduction "
            "steps per output tile, a kernel's prologue and epilogue cost a few hundred")
    roofline("attention", eff.attention, fitted_flops=True)
    if eff.attention_kernels is not None:
        for kernel in ("decode", "prefill"):
            terms = getattr(eff.attention_kernels, kernel)
            prefix = f"attention.{kernel}"
            fraction(f"{prefix}.bandwidth", terms.bandwidth, BANDWIDTH_RANGE, "bandwidth")
            fraction(f"{prefix}.flops", terms.flops, FLOPS_RANGE, "peak flops")
            if terms.sm_bandwidth < MIN_SM_BANDWIDTH:
                problems[f"{prefix}.sm_bandwidth"] = (
                    f"{prefix}.sm_bandwidth {terms.sm_bandwidth:.3g}: below "
                    f"{MIN_SM_BANDWIDTH:g} SM shares of bandwidth for one CTA")
            for name in ("floor_s", "cta_s", "combine_s"):
                fixed(f"{prefix}.{name}", float(getattr(terms, name)))
    roofline("memory", eff.memory, fitted_flops=False)
    return tuple(problems.values())


def plausibility_problems(op_class: ArrayLike, time_s: ArrayLike, ideal_s: ArrayLike,
                          efficiency: Efficiency, *, gpu: str) -> tuple[str, ...]:
    """Everything the GPU's physics rules out in a calibration: its measured times
    (measurement_problems) and its fitted efficiency (efficiency_problems)."""
    return measurement_problems(op_class, time_s, ideal_s, gpu=gpu) \
        + efficiency_problems(efficiency)


def factor_text(x: float) -> str:
    """A ratio as short text: '3.2', '1,470', '2.0e+293' (never hundreds of digits)."""
    if not math.isfinite(x):
        return "inf" if x > 0 else "n/a"
    if x < 10:
        return f"{x:.2g}"
    return f"{x:,.0f}" if x < 1e6 else f"{x:.1e}"


def seconds_text(s: float) -> str:
    """A duration as short text: '5.7 us', '68 ms', '1.2e+20 s'."""
    if not math.isfinite(s):
        return f"{s} s"
    if s < 1e-3:
        return f"{s * 1e6:.3g} us"
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


# A mean error above this many percent is printed as '> 1000%': the number means nothing more.
PERCENT_CAP = 1000.0


def percent_text(x: float) -> str:
    """A MAPE in percent as text: '5.7%', or '> 1000%' (never hundreds of digits)."""
    if math.isnan(x):
        return "n/a"
    return f"> {PERCENT_CAP:.0f}%" if x > PERCENT_CAP else f"{x:.1f}%"



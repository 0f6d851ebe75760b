"""How long a profile will take, before it runs, and a plan cut to a time budget.

A point's run time is estimated on a roofline of this device: t = max(flops / flops_per_s,
bytes / bytes_per_s) + floor_s, with the three rates measured here by timing two calibration
GEMMs and one tiny one through the same backend (`measure_rates`, well under a second). Each
distinct kernel costs (warmup + repeats) runs plus filling its inputs with random numbers
(`FILL_BYTES_PER_S`). The estimate is a guide (factor ~2), not a promise: it is what lets
`profile` say up front that the 8B model's LM head (128,256 x 4,096 weights) takes minutes per
point on a CPU, and lets `--quick` drop such points to stay within its budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specsim.measurement.backends import ProfilePoint, point_bytes

if TYPE_CHECKING:
    from specsim.measurement.backends import Backend

# Filling input tensors with normal random numbers, bytes per second (numpy float32 on one
# core of this project's 2-core CI machine, measured 1.2e8; GPUs are faster, so this errs long).
FILL_BYTES_PER_S = 1.2e8
# With --quick the estimated run time is held under this many seconds.
QUICK_BUDGET_S = 60.0
# Calibration GEMM edges: compute-bound (square), and a single row over a large weight
# (weight-bandwidth bound); the square one grows on fast devices until it takes >= 1 ms.
_SQUARE_EDGES = (512, 2048, 4096)
_ROW_WEIGHT_EDGE = 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceRates:
    """What one device sustains on the calibration GEMMs (flops/s, bytes/s, s per kernel)."""

    flops_per_s: float
    bytes_per_s: float
    floor_s: float


def point_flops(point: ProfilePoint) -> float:
    """Floating-point operations of one run of the point's kernel (multiply-add = 2)."""
    if point.op_class == "gemm":
        return 2.0 * point.count * point.m * point.k * point.n
    if point.op_class == "attention":  # QK^T and PV over every key (masking saves no work)
        keys = point.context + point.queries
        return 2.0 * point.batch * point.k * point.queries * keys * (point.n + point.v_dim)
    return 10.0 * point.m * point.n  # sampling: softmax, noise, division, argmax per element


def measure_rates(backend: Backend) -> DeviceRates:
    """Time the calibration GEMMs on `backend` (3 runs each after one warm-up)."""
    def seconds(m: int, k: int, n: int) -> float:
        point = ProfilePoint(model="calibration", tp=1, op="calibration", op_class="gemm",
                             m=m, k=k, n=n, count=1)
        return float(np.median(backend.time_s(point, repeats=3, warmup=1)))

    floor_s = seconds(1, 16, 16)
    for edge in _SQUARE_EDGES:
        square_s = seconds(edge, edge, edge)
        if square_s >= 1e-3:
            break
    flops_per_s = 2.0 * edge**3 / max(square_s - floor_s, square_s / 2)
    elem = 2.0 if backend.dtype in ("bf16", "fp16") else 4.0
    row_s = seconds(1, _ROW_WEIGHT_EDGE, _ROW_WEIGHT_EDGE)
    weight_bytes = _ROW_WEIGHT_EDGE**2 * elem
    bytes_per_s = weight_bytes / max(row_s - floor_s, row_s / 2)
    return DeviceRates(flops_per_s=flops_per_s, bytes_per_s=bytes_per_s, floor_s=floor_s)


def kernel_s(points: Sequence[ProfilePoint], rates: DeviceRates, *, elem_bytes: float,
             repeats: int, warmup: int) -> dict[tuple[object, ...], float]:
    """Estimated seconds per distinct kernel: (warmup + repeats) runs plus filling inputs."""
    out: dict[tuple[object, ...], float] = {}
    for point in points:
        if point.kernel in out:
            continue
        size = point_bytes(point, elem_bytes)
        run_s = max(point_flops(point) / rates.flops_per_s, size / rates.bytes_per_s) \
            + rates.floor_s
        out[point.kernel] = (warmup + repeats) * run_s + size / FILL_BYTES_PER_S
    return out


def within_budget(points: Sequence[ProfilePoint], seconds: dict[tuple[object, ...], float],
                  budget_s: float) -> tuple[list[ProfilePoint], list[ProfilePoint]]:
    """(kept, skipped): the cheapest kernels first until their estimated sum reaches budget_s.

    Every point of a kept kernel is kept; the plan's order is preserved.
    """
    total, kept_kernels = 0.0, set()
    for kernel, t_s in sorted(seconds.items(), key=lambda item: (item[1], str(item[0]))):
        if total + t_s > budget_s:
            break
        total += t_s
        kept_kernels.add(kernel)
    kept = [p for p in points if p.kernel in kept_kernels]
    skipped = [p for p in points if p.kernel not in kept_kernels]
    return kept, skipped


def skipped_summary(kept: Sequence[ProfilePoint], skipped: Sequence[ProfilePoint]) -> str:
    """Per op what was skipped: 'lm_head (all)', 'mlp_down m >= 64', 'attention_decode (3 of
    4 points)'."""
    parts: list[str] = []
    for op in dict.fromkeys(p.op for p in skipped):
        mine = [p for p in skipped if p.op == op]
        left = sum(p.op == op for p in kept)
        if not left:
            parts.append(f"{op} (all)")
        elif mine[0].op_class in ("gemm", "memory"):
            parts.append(f"{op} m >= {min(p.m for p in mine)}")
        else:
            parts.append(f"{op} ({len(mine)} of {len(mine) + left} points)")
    return ", ".join(parts)


def format_duration(seconds: float) -> str:
    """'45 s', '3.2 min', '1.5 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"

"""Fitting the tiled attention-time model (`specsim.forward.attention_time`) to measured kernels.

Robust least squares on log error (`robust_log_fit`), every field kept physical by its
parametrization: fractions through a logistic (in (0, 1)), times through an exponential
(>= 0), the per-CTA bandwidth as exp (> 0). The padded key length the split heuristic saw
(`split_keys`) is a launch setting, not a rate: it is chosen among 0 (none) and the powers of
two at or above the longest measured key length (a profiler's maximum model length), by the
lowest error on the fitted points.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError
from specsim.forward.attention_time import AttentionKernelEfficiency, attention_kernel_time_s
from specsim.forward.gemm import FloatArray
from specsim.measurement.gemm_fit import robust_log_fit


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-min(max(x, -60.0), 60.0)))


def _unpack(x: FloatArray, split_keys: float = 0.0) -> AttentionKernelEfficiency:
    exp = [math.exp(min(max(float(v), -60.0), 60.0)) for v in x]
    return AttentionKernelEfficiency(split_keys=split_keys,
        bandwidth=_logistic(x[0]), flops=_logistic(x[1]), sm_bandwidth=exp[2],
        floor_s=1e-6 * exp[3], cta_s=1e-6 * exp[4], combine_s=1e-6 * exp[5],
        causal_skip=_logistic(x[6]))


# Start: 80% of the datasheet, an SM alone at 3x its share, floors of a few microseconds,
# half of the masked blocks skipped.
_START = np.array([math.log(0.8 / 0.2), math.log(0.6 / 0.4), math.log(2.0), math.log(5.0),
                   0.0, math.log(4.0), 0.0])


def fit_attention_kernel(
    batch: ArrayLike, context: ArrayLike, queries: ArrayLike, causal: ArrayLike,
    time_s: ArrayLike, *, q_heads: float, kv_heads: float, head_dim: float,
    bandwidth_bytes_per_s: float, flops_per_s: float, sm_count: int, act_bytes: float = 2.0,
) -> tuple[AttentionKernelEfficiency, float]:
    """Fit AttentionKernelEfficiency to measured attention kernels.

    Args:
        batch, context, queries, causal: each kernel's shape (see attention_kernel_time_s).
        time_s: its measured time, s (> 0).
        q_heads, kv_heads, head_dim: per GPU.
        bandwidth_bytes_per_s, flops_per_s, sm_count: datasheet numbers of the GPU.
        act_bytes: bytes per cached K or V element.

    Returns:
        (fitted terms, mean |predicted / measured - 1| on the fitted points).
    """
    t = np.asarray(time_s, dtype=np.float64)
    if t.size < _START.size or not np.all(np.isfinite(t) & (t > 0.0)):
        raise SpecError(f"attention fit: need >= {_START.size} finite times > 0")

    best: tuple[AttentionKernelEfficiency, float] | None = None
    for split_keys in _split_key_candidates(np.asarray(context, dtype=np.float64)
                                            + np.asarray(queries, dtype=np.float64)):
        def predict(x: FloatArray, split_keys: float = split_keys) -> FloatArray:
            return attention_kernel_time_s(
                batch, context, queries, q_heads=q_heads, kv_heads=kv_heads,
                head_dim=head_dim, causal=causal, bandwidth_bytes_per_s=bandwidth_bytes_per_s,
                flops_per_s=flops_per_s, sm_count=sm_count, act_bytes=act_bytes,
                eff=_unpack(x, split_keys))

        fit = robust_log_fit(predict, t, _START.copy())
        err = float(np.mean(np.abs(np.expm1(fit.log_residuals))))
        if best is None or err < best[1]:
            best = (_unpack(fit.x, split_keys), err)
    assert best is not None
    return best


def _split_key_candidates(keys: FloatArray) -> list[float]:
    """0 and the first four powers of two >= the longest key length, tokens."""
    top = 2.0 ** math.ceil(math.log2(max(float(keys.max(initial=1.0)), 1.0)))
    return [0.0] + [top * 2.0**i for i in range(4)]

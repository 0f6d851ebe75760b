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
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError
from specsim.forward.attention_time import AttentionKernelEfficiency, attention_kernel_time_s
from specsim.forward.gemm import FloatArray
from specsim.measurement.gemm_fit import (
    PRIOR_SIGMA,
    UNIDENTIFIED_PRIOR_SHARE,
    prior_share,
    robust_log_fit,
)


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-min(max(x, -60.0), 60.0)))


def _unpack(x: FloatArray, split_keys: float, sm_count: int) -> AttentionKernelEfficiency:
    exp = [math.exp(min(max(float(v), -60.0), 60.0)) for v in x]
    # One CTA alone reaches at most the whole memory bandwidth: sm_count SM shares.
    return AttentionKernelEfficiency(split_keys=split_keys,
        bandwidth=_logistic(x[0]), flops=_logistic(x[1]),
        sm_bandwidth=sm_count * _logistic(x[2]),
        floor_s=1e-6 * exp[3], cta_s=1e-6 * exp[4], combine_s=1e-6 * exp[5],
        causal_skip=_logistic(x[6]))


# Start: 80% of the datasheet, an SM alone at 2x its share, floors of a few microseconds,
# half of the masked blocks skipped (x[2] is set per GPU: the logit of 2 / sm_count).
_START = np.array([math.log(0.8 / 0.2), math.log(0.6 / 0.4), 0.0, math.log(5.0),
                   0.0, math.log(4.0), 0.0])


# The terms a table may not identify, with the width of a weak prior around their start value
# (in the optimizer's variable): a compute-bound prefill table says nothing of the bandwidth
# terms, a decode table nothing of the causal skip. A term whose uncertainty would mostly be
# such a prior's is set back to its start value and named (`AttentionFit.kept`).
# Training error a reset term may add and still count as unidentified (0.1 percentage point).
SAME_ERROR = 1e-3
_NAMES = ("bandwidth", "flops", "sm_bandwidth", "floor_s", "cta_s", "combine_s", "causal_skip")
_PRIOR_SIGMA = np.array([PRIOR_SIGMA, np.inf, PRIOR_SIGMA, np.inf, np.inf, np.inf, PRIOR_SIGMA])


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionFit:
    """Fitted terms, mean |predicted / measured - 1| on the fitted points, and the terms the
    points did not identify (each kept at its prior, with why)."""

    eff: AttentionKernelEfficiency
    mape: float
    kept: tuple[str, ...] = ()


def fit_attention_kernel(
    batch: ArrayLike, context: ArrayLike, queries: ArrayLike, causal: ArrayLike,
    time_s: ArrayLike, *, q_heads: float, kv_heads: float, head_dim: float,
    bandwidth_bytes_per_s: float, flops_per_s: float, sm_count: int, act_bytes: float = 2.0,
) -> AttentionFit:
    """Fit AttentionKernelEfficiency to measured attention kernels.

    Args:
        batch, context, queries, causal: each kernel's shape (see attention_kernel_time_s).
        time_s: its measured time, s (> 0).
        q_heads, kv_heads, head_dim: per GPU.
        bandwidth_bytes_per_s, flops_per_s, sm_count: datasheet numbers of the GPU.
        act_bytes: bytes per cached K or V element.

    Returns:
        The fit (AttentionFit).
    """
    t = np.asarray(time_s, dtype=np.float64)
    if t.size < _START.size or not np.all(np.isfinite(t) & (t > 0.0)):
        raise SpecError(f"attention fit: need >= {_START.size} finite times > 0")

    best: AttentionFit | None = None
    for split_keys in _split_key_candidates(np.asarray(context, dtype=np.float64)
                                            + np.asarray(queries, dtype=np.float64)):
        def predict(x: FloatArray, split_keys: float = split_keys) -> FloatArray:
            return attention_kernel_time_s(
                batch, context, queries, q_heads=q_heads, kv_heads=kv_heads,
                head_dim=head_dim, causal=causal, bandwidth_bytes_per_s=bandwidth_bytes_per_s,
                flops_per_s=flops_per_s, sm_count=sm_count, act_bytes=act_bytes,
                eff=_unpack(x, split_keys, sm_count))

        start = _START.copy()
        start[2] = math.log(2.0 / max(sm_count - 2.0, 1.0))
        fit = robust_log_fit(predict, t, start)
        # A term the points do not identify (most of its uncertainty would be a weak prior's)
        # goes back to its start value, which changes the fit by as little.
        share = prior_share(predict, fit.x, np.where(np.isfinite(_PRIOR_SIGMA),
                                                     _PRIOR_SIGMA, 1e3))
        loose = np.isfinite(_PRIOR_SIGMA) & (share > UNIDENTIFIED_PRIOR_SHARE)
        x = fit.x.copy()
        err = float(np.mean(np.abs(predict(x) / t - 1.0)))
        for i in np.flatnonzero(loose):
            # (a term pushed against its limit by the points looks loose in the fit's
            # variable, where the limit flattens it: it stays where the points put it)
            trial = x.copy()
            trial[i] = start[i]
            trial_err = float(np.mean(np.abs(predict(trial) / t - 1.0)))
            if trial_err <= err + SAME_ERROR:
                x, err = trial, min(err, trial_err)
            else:
                loose[i] = False
        if best is None or err < best.mape:
            eff = _unpack(x, split_keys, sm_count)
            kept = tuple(
                f"{name}: the points do not identify it ({sh:.0%} of its uncertainty would be "
                f"a prior's): kept at {getattr(eff, name):.3g}"
                for name, sh, out in zip(_NAMES, share, loose, strict=True) if out)
            best = AttentionFit(eff=eff, mape=err, kept=kept)
    assert best is not None
    return best


def _split_key_candidates(keys: FloatArray) -> list[float]:
    """0 and the first four powers of two >= the longest key length, tokens."""
    top = 2.0 ** math.ceil(math.log2(max(float(keys.max(initial=1.0)), 1.0)))
    return [0.0] + [top * 2.0**i for i in range(4)]

"""Time of one weight GEMM: the datasheet roofline plus fitted efficiency terms.

A weight GEMM multiplies ``m`` token rows by a ``k x n`` weight shard. The ideal (datasheet)
roofline is

    t = max(bytes / bandwidth, 2 m k n / peak_flops),  bytes = k n wb + m (k + n) ab

(weights read once, activations in and out). Measured kernels (Vidur's A100/A40 tables) deviate
from it in the ways below, each modelled by :class:`GemmEfficiency` fields whose defaults switch
it off, so that the default efficiency reproduces the ideal roofline exactly. Fitted values
quoted are for Llama-2-7B's GEMMs (all TP degrees) on the A100 / A40.

1. ``bandwidth``, ``flops``: effective fractions of the datasheet numbers (HBM and tensor cores
   never run at their peaks; 0.87 / 0.78 and 0.75 / 0.79).
2. ``floor_s``: a fixed latency on the memory path. A kernel that streams ``B`` bytes takes
   ``floor + B / bw``: small TP shards do not saturate HBM (launch, ramp-up, tail), so a 4 MB
   shard reaches ~35% of the bandwidth that a 500 MB one reaches.
3. ``tile_rows``, ``tile_fraction``: token-tile quantization. Tensor-core kernels compute the
   output in tiles of ``tile_rows`` token rows (128 on Ampere; for ``m`` below one tile the
   library picks the smallest power-of-two tile >= ``m``, at least 16), so the MMA work is paid
   on ``m`` padded up to a tile multiple: the 15-45% steps just past multiples of 128 tokens.
   Only ``tile_fraction`` of the tile time scales with padded rows; the rest (predicated
   activation loads and stores) scales with the real rows. The fitted fraction is 0.43-0.46.
4. ``epilogue_k``: per-output-element overhead (pipeline prologue and epilogue of every output
   tile: filling the k-pipeline, writing C), in units of reduction steps, so compute time is
   ``2 m_eff (k + epilogue_k) n / flops``. It lowers the efficiency of short-k shards (TP 8
   output projections reach only ~60% of peak when the large ones reach ~75%); fitted 20 / 95.
5. ``overlap_p``: memory and compute overlap imperfectly near the knee. The two times are
   combined by a smooth maximum ``(t_mem^p + t_comp^p)^(1/p)`` (p = inf: hard max, p = 1: no
   overlap). The fitted p = 1.5 / 1.8 puts the knee near 128 tokens, not at peak_flops /
   bandwidth. The floor is 5.8 / 2.1 us.

Each term was kept only if it lowered the cross-model holdout error on the Vidur tables (train
on one model, predict the summed layer GEMM time of every other model on the same GPU): mean
absolute error 32% / 29% for the datasheet roofline, 7.4% / 7.6% with the first three fields,
3.3% / 4.3% with all of them (``tests/test_vidur_calibration.py``). What is left is mostly the
library's per-shape kernel choice (tile shape, split-K, wave count), which no smooth model of
(m, k, n) captures: fitting every GEMM shape to its own data still leaves 2-4.6% per model.

Also here: a decode/prefill attention time model (:class:`AttentionEfficiency`), fitted the same
way (floor + KV bytes / effective bandwidth; floor + flops / effective flops).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import least_squares

from specsim.errors import SpecError

FloatArray = NDArray[np.float64]

# Smallest token tile a tensor-core kernel uses (mma.m16n8k16 on Ampere and later).
MIN_TILE_ROWS = 16
# Robust loss for relative (log) residuals: Cauchy, with 5% as the scale of a typical error.
_LOSS = "cauchy"
_LOSS_SCALE = 0.05


def _check_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    """SpecError unless value is finite and > 0 (>= 0 with allow_zero)."""
    ok = math.isfinite(value) and (value >= 0.0 if allow_zero else value > 0.0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise SpecError(f"{name} = {value!r}: need a finite number {bound}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmEfficiency:
    """Fitted departures of a GPU's weight GEMMs from its datasheet roofline.

    The defaults are the ideal roofline (every term switched off).

    Attributes:
        bandwidth: effective fraction of the datasheet memory bandwidth (> 0).
        flops: effective fraction of the datasheet peak flop rate (> 0).
        floor_s: fixed latency of the memory path, s (>= 0).
        overlap_p: smooth-max exponent combining memory and compute time, in [1, inf]
            (inf: hard max, ideal overlap; 1: the two add up).
        tile_rows: token rows per output tile of the tensor-core kernel (>= 1).
        tile_fraction: share of the tile time paid on padded rows, in [0, 1] (0: no tile
            quantization).
        epilogue_k: per-output-element overhead in reduction steps (>= 0).
    """

    bandwidth: float = 1.0
    flops: float = 1.0
    floor_s: float = 0.0
    overlap_p: float = math.inf
    tile_rows: int = 128
    tile_fraction: float = 0.0
    epilogue_k: float = 0.0

    def __post_init__(self) -> None:
        _check_positive("GemmEfficiency.bandwidth", self.bandwidth)
        _check_positive("GemmEfficiency.flops", self.flops)
        _check_positive("GemmEfficiency.floor_s", self.floor_s, allow_zero=True)
        _check_positive("GemmEfficiency.epilogue_k", self.epilogue_k, allow_zero=True)
        if not (self.overlap_p >= 1.0):  # also rejects NaN
            raise SpecError(f"GemmEfficiency.overlap_p = {self.overlap_p!r}: need a number >= 1")
        if not (0.0 <= self.tile_fraction <= 1.0):
            raise SpecError(
                f"GemmEfficiency.tile_fraction = {self.tile_fraction!r}: need 0 <= value <= 1"
            )
        if isinstance(self.tile_rows, bool) or not isinstance(self.tile_rows, int):
            raise SpecError(f"GemmEfficiency.tile_rows = {self.tile_rows!r}: need an integer")
        if self.tile_rows < 1:
            raise SpecError(f"GemmEfficiency.tile_rows = {self.tile_rows!r}: need >= 1")


def _as_nonneg_array(name: str, value: ArrayLike) -> FloatArray:
    """float64 copy of value; SpecError if any element is negative or not finite."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.size and not (arr.min() >= 0.0 and arr.max() < math.inf):  # NaN fails both
        bad = ~(np.isfinite(arr) & (arr >= 0.0))
        raise SpecError(f"{name}: need finite values >= 0, got {arr[bad][:3].tolist()}")
    return arr


def padded_tokens(m: ArrayLike, tile_rows: int) -> FloatArray:
    """Token count padded to the output tile of a tensor-core GEMM kernel.

    Args:
        m: tokens in the pass, any shape.
        tile_rows: token rows of a full tile.

    Returns:
        Same shape as m: 0 for m = 0; the smallest power of two >= m (at least MIN_TILE_ROWS,
        at most tile_rows) while m <= tile_rows; else m rounded up to a multiple of tile_rows.
    """
    m_arr = np.asarray(m, dtype=np.float64)
    small_tile = np.exp2(np.ceil(np.log2(np.maximum(m_arr, 1.0))))
    small_tile = np.clip(small_tile, min(MIN_TILE_ROWS, tile_rows), tile_rows)
    padded = np.where(m_arr <= tile_rows, small_tile, tile_rows * np.ceil(m_arr / tile_rows))
    return np.where(m_arr > 0.0, padded, 0.0)


def smooth_max(a: FloatArray, b: FloatArray, p: float) -> FloatArray:
    """(a^p + b^p)^(1/p) for a, b >= 0, evaluated without overflow; p = inf gives max(a, b)."""
    if math.isinf(p):
        return np.maximum(a, b)
    hi = np.maximum(a, b)
    safe = np.where(hi > 0.0, hi, 1.0)
    ratio_sum = (a / safe) ** p + (b / safe) ** p
    return np.where(hi > 0.0, hi * ratio_sum ** (1.0 / p), 0.0)


def gemm_time_s(
    m: ArrayLike,
    k: ArrayLike,
    n: ArrayLike,
    *,
    weight_bytes_per_param: float,
    act_bytes_per_elem: float,
    bandwidth_bytes_per_s: float,
    flops_per_s: float,
    eff: GemmEfficiency = GemmEfficiency(),
) -> FloatArray:
    """Time of one weight GEMM (m tokens times a k x n weight shard on one GPU).

    With the default ``eff`` this is exactly the ideal roofline
    ``max((k n wb + m (k + n) ab) / bandwidth, 2 m k n / flops)``.

    Args:
        m: tokens in the pass (GEMM rows), >= 0; broadcast with k and n.
        k: reduction (input) width of the per-GPU weight shard, >= 0.
        n: output width of the per-GPU weight shard, >= 0.
        weight_bytes_per_param: bytes per weight (2 for fp16/bf16, 1 for fp8, 0.5 for int4).
        act_bytes_per_elem: bytes per activation element read or written.
        bandwidth_bytes_per_s: datasheet memory bandwidth, B/s.
        flops_per_s: datasheet peak flop rate for the compute dtype, flop/s.
        eff: fitted efficiency terms (default: the ideal roofline).

    Returns:
        Time in s, the broadcast shape of m, k, n.
    """
    _check_positive("weight_bytes_per_param", weight_bytes_per_param)
    _check_positive("act_bytes_per_elem", act_bytes_per_elem, allow_zero=True)
    _check_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    _check_positive("flops_per_s", flops_per_s)
    # No explicit broadcast: the shape terms are folded into per-token coefficients first, so
    # a sweep over m costs a handful of array operations (k and n are usually scalars).
    m_a, k_a, n_a = _as_nonneg_array("m", m), _as_nonneg_array("k", k), _as_nonneg_array("n", n)
    wb, ab = weight_bytes_per_param, act_bytes_per_elem
    bandwidth = eff.bandwidth * bandwidth_bytes_per_s
    # Roofline memory term: weights read once, activations read (m x k) and written (m x n).
    t_mem_s = (eff.floor_s + k_a * n_a * wb / bandwidth) + m_a * ((k_a + n_a) * ab / bandwidth)
    m_eff = m_a
    if eff.tile_fraction > 0.0:
        m_eff = m_a + eff.tile_fraction * (padded_tokens(m_a, eff.tile_rows) - m_a)
    # 2 flops per multiply-add, each output element costs k (+ epilogue) reduction steps.
    t_comp_s = m_eff * (2.0 * (k_a + eff.epilogue_k) * n_a / (eff.flops * flops_per_s))
    out: FloatArray = np.broadcast_to(smooth_max(t_mem_s, t_comp_s, eff.overlap_p),
                                      np.broadcast_shapes(m_a.shape, k_a.shape, n_a.shape))
    return out


# --- fitting -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Param:
    """How one fitted field maps to an unbounded variable (to_field) and its start value."""

    to_field: Callable[[float], float]
    from_field: Callable[[float], float]
    start: float


def _exp(x: float) -> float:
    return math.exp(min(max(x, -60.0), 60.0))


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + _exp(-x))


_GEMM_PARAMS: dict[str, _Param] = {
    "bandwidth": _Param(_exp, math.log, 0.8),
    "flops": _Param(_exp, math.log, 0.75),
    # floor in microseconds inside the optimizer, so that all variables are O(1).
    "floor_s": _Param(lambda x: 1e-6 * _exp(x), lambda v: math.log(v / 1e-6), 3e-6),
    "overlap_p": _Param(lambda x: 1.0 + _exp(x), lambda v: math.log(v - 1.0), 3.0),
    "tile_fraction": _Param(_logistic, lambda v: math.log(v / (1.0 - v)), 0.5),
    "epilogue_k": _Param(_exp, math.log, 50.0),
}
# All fitted fields of GemmEfficiency, in the order of the ablation (each earns its keep).
GEMM_FIT_PARAMS: tuple[str, ...] = tuple(_GEMM_PARAMS)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitDiagnostics:
    """Quality of a least-squares fit of measured kernel times.

    Attributes:
        n_points: number of measurements fitted.
        params: names of the fitted fields.
        mape: mean |predicted / measured - 1| on the fitted points (fraction).
        rms_log_error: root mean square of log(predicted / measured).
        max_abs_log_error: largest |log(predicted / measured)|.
        nfev: model evaluations used by the optimizer.
        converged: whether the optimizer met a convergence test.
        message: the optimizer's status message.
    """

    n_points: int
    params: tuple[str, ...]
    mape: float
    rms_log_error: float
    max_abs_log_error: float
    nfev: int
    converged: bool
    message: str


def _check_fit_params(params: Sequence[str], known: dict[str, _Param]) -> tuple[str, ...]:
    """The requested parameter names, each known and listed once."""
    names = tuple(params)
    for name in names:
        if name not in known:
            raise SpecError(f"fit parameter {name!r} unknown; valid names: {', '.join(known)}")
    if len(set(names)) != len(names):
        raise SpecError(f"fit parameters {names!r} list a name twice")
    return names


def _check_times(time_s: FloatArray, n_params: int) -> None:
    """Measured times must be finite, > 0 and at least as many as fitted parameters."""
    if not np.all(np.isfinite(time_s) & (time_s > 0.0)):
        raise SpecError("time_s: need finite measured times > 0")
    if time_s.size < max(n_params, 1):
        raise SpecError(f"time_s: {time_s.size} points cannot fit {n_params} parameters")


def _diagnostics(
    log_err: FloatArray, params: tuple[str, ...], nfev: int, status: int, message: str
) -> FitDiagnostics:
    """FitDiagnostics from the final log residuals of an optimizer run."""
    return FitDiagnostics(
        n_points=int(log_err.size),
        params=params,
        mape=float(np.mean(np.abs(np.expm1(log_err)))),
        rms_log_error=float(np.sqrt(np.mean(log_err**2))),
        max_abs_log_error=float(np.max(np.abs(log_err))),
        nfev=int(nfev),
        converged=status > 0,
        message=str(message),
    )


def _fit_fields(
    predict_s: Callable[[dict[str, float]], FloatArray],
    time_s: FloatArray,
    names: tuple[str, ...],
    specs: dict[str, _Param],
) -> tuple[dict[str, float], FitDiagnostics]:
    """Robust least squares of log(predict_s(fields) / time_s) over the named fields."""
    _check_times(time_s, len(names))
    log_t = np.log(time_s)
    chosen = [specs[name] for name in names]

    def fields_of(x: FloatArray) -> dict[str, float]:
        return {
            name: spec.to_field(float(v)) for name, spec, v in zip(names, chosen, x, strict=True)
        }

    def residuals(x: FloatArray) -> FloatArray:
        return np.log(np.maximum(predict_s(fields_of(x)), 1e-300)) - log_t

    x0 = np.array([spec.from_field(spec.start) for spec in chosen], dtype=np.float64)
    result = least_squares(residuals, x0, loss=_LOSS, f_scale=_LOSS_SCALE)
    x_fit = np.asarray(result.x, dtype=np.float64)
    diag = _diagnostics(residuals(x_fit), names, result.nfev, result.status, result.message)
    return fields_of(x_fit), diag


def fit_gemm_efficiency(
    m: ArrayLike,
    k: ArrayLike,
    n: ArrayLike,
    time_s: ArrayLike,
    *,
    weight_bytes_per_param: float,
    act_bytes_per_elem: float,
    bandwidth_bytes_per_s: float,
    flops_per_s: float,
    params: Sequence[str] = GEMM_FIT_PARAMS,
    base: GemmEfficiency = GemmEfficiency(),
) -> tuple[GemmEfficiency, FitDiagnostics]:
    """Fit GemmEfficiency to measured GEMM times by robust least squares on log error.

    Minimizes a Cauchy loss (scale 5%) of log(predicted / measured) over all points with
    scipy.optimize.least_squares from fixed start values: deterministic, ~0.1 s for 4,000
    points.

    Args:
        m, k, n: GEMM shape of each measurement (tokens; per-GPU weight shard), broadcast.
        time_s: measured kernel time of each point, s (> 0).
        weight_bytes_per_param, act_bytes_per_elem, bandwidth_bytes_per_s, flops_per_s: as for
            gemm_time_s (datasheet numbers of the GPU that was measured).
        params: names of the GemmEfficiency fields to fit (default all of GEMM_FIT_PARAMS);
            the others keep their value in ``base``.
        base: values of the fields that are not fitted (and tile_rows).

    Returns:
        (fitted GemmEfficiency, FitDiagnostics on the fitted points).
    """
    names = _check_fit_params(params, _GEMM_PARAMS)
    m_a, k_a, n_a, t_a = np.broadcast_arrays(
        _as_nonneg_array("m", m),
        _as_nonneg_array("k", k),
        _as_nonneg_array("n", n),
        np.asarray(time_s, dtype=np.float64),
    )

    def predict_s(fields: dict[str, float]) -> FloatArray:
        return gemm_time_s(
            m_a,
            k_a,
            n_a,
            weight_bytes_per_param=weight_bytes_per_param,
            act_bytes_per_elem=act_bytes_per_elem,
            bandwidth_bytes_per_s=bandwidth_bytes_per_s,
            flops_per_s=flops_per_s,
            eff=_replace_gemm(base, fields),
        )

    fields, diag = _fit_fields(predict_s, t_a, names, _GEMM_PARAMS)
    return _replace_gemm(base, fields), diag


def _replace_gemm(base: GemmEfficiency, fields: dict[str, float]) -> GemmEfficiency:
    """A copy of base with some float fields replaced (clamped to their valid ranges)."""
    values = {
        "bandwidth": base.bandwidth,
        "flops": base.flops,
        "floor_s": base.floor_s,
        "overlap_p": base.overlap_p,
        "tile_fraction": base.tile_fraction,
        "epilogue_k": base.epilogue_k,
    }
    values.update(fields)
    values["tile_fraction"] = min(max(values["tile_fraction"], 0.0), 1.0)
    values["overlap_p"] = max(values["overlap_p"], 1.0)
    return GemmEfficiency(tile_rows=base.tile_rows, **values)


# --- attention -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionEfficiency:
    """Fitted departures of an attention kernel from the ideal roofline (defaults: ideal).

    Attributes:
        floor_s: fixed kernel time, s (>= 0); ~15 us for decode on an A100.
        bandwidth: effective fraction of the datasheet bandwidth for the KV-cache stream (> 0).
        flops: effective fraction of peak flops on the cached-context part (> 0).
        causal_flops: effective fraction of peak flops on the causal triangle of the new
            tokens (> 0); masked tiles make it much less efficient than the context part.
    """

    floor_s: float = 0.0
    bandwidth: float = 1.0
    flops: float = 1.0
    causal_flops: float = 1.0

    def __post_init__(self) -> None:
        _check_positive("AttentionEfficiency.floor_s", self.floor_s, allow_zero=True)
        _check_positive("AttentionEfficiency.bandwidth", self.bandwidth)
        _check_positive("AttentionEfficiency.flops", self.flops)
        _check_positive("AttentionEfficiency.causal_flops", self.causal_flops)


def attention_time_s(
    batch: ArrayLike,
    q_tokens: ArrayLike,
    kv_len: ArrayLike,
    *,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    kv_bytes_per_elem: float,
    act_bytes_per_elem: float,
    bandwidth_bytes_per_s: float,
    flops_per_s: float,
    eff: AttentionEfficiency = AttentionEfficiency(),
) -> FloatArray:
    """Time of one attention kernel over ``batch`` sequences on one GPU (one layer).

    Each sequence has ``kv_len`` cached tokens and ``q_tokens`` new ones (1 in decode, the
    chunk in prefill) that attend causally to the cache and to each other. With the default
    ``eff`` this is the ideal roofline max(bytes / bandwidth, flops / peak).

    Args:
        batch: sequences in the kernel, >= 0 (broadcast with q_tokens and kv_len).
        q_tokens: new (query) tokens per sequence, >= 0.
        kv_len: cached tokens per sequence, >= 0.
        q_heads, kv_heads, head_dim: per-GPU attention shape.
        kv_bytes_per_elem: bytes per cached K or V element.
        act_bytes_per_elem: bytes per query and output element.
        bandwidth_bytes_per_s, flops_per_s: datasheet numbers.
        eff: fitted efficiency terms (default: ideal).

    Returns:
        Time in s, the broadcast shape of the three arrays.
    """
    for name, value in (("q_heads", q_heads), ("kv_heads", kv_heads), ("head_dim", head_dim)):
        _check_positive(name, float(value))
    _check_positive("kv_bytes_per_elem", kv_bytes_per_elem)
    _check_positive("act_bytes_per_elem", act_bytes_per_elem, allow_zero=True)
    _check_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    _check_positive("flops_per_s", flops_per_s)
    b, q, ctx = np.broadcast_arrays(
        _as_nonneg_array("batch", batch),
        _as_nonneg_array("q_tokens", q_tokens),
        _as_nonneg_array("kv_len", kv_len),
    )
    kv_row_bytes = 2.0 * kv_heads * head_dim * kv_bytes_per_elem  # K and V of one token
    # Read the cache, write the new K/V, read Q and write O.
    bytes_ = b * ((ctx + q) * kv_row_bytes + q * 2.0 * q_heads * head_dim * act_bytes_per_elem)
    # 4 flops per (query, key, head, dim): QK^T and PV; new token i sees ctx + i + 1 keys.
    ctx_flops = 4.0 * b * q * ctx * q_heads * head_dim
    causal_flops = 4.0 * b * q * (q + 1.0) / 2.0 * q_heads * head_dim
    t_mem_s = bytes_ / (eff.bandwidth * bandwidth_bytes_per_s)
    t_comp_s = (ctx_flops / eff.flops + causal_flops / eff.causal_flops) / flops_per_s
    return np.asarray(eff.floor_s + np.maximum(t_mem_s, t_comp_s), dtype=np.float64)


_ATTENTION_PARAMS: dict[str, _Param] = {
    "floor_s": _GEMM_PARAMS["floor_s"],
    "bandwidth": _GEMM_PARAMS["bandwidth"],
    "flops": _Param(_exp, math.log, 0.4),
    "causal_flops": _Param(_exp, math.log, 0.2),
}
# Decode kernels are bandwidth-bound and prefill kernels flop-bound: fit each with its terms.
DECODE_FIT_PARAMS: tuple[str, ...] = ("floor_s", "bandwidth")
PREFILL_FIT_PARAMS: tuple[str, ...] = ("floor_s", "flops", "causal_flops")


def fit_attention_efficiency(
    batch: ArrayLike,
    q_tokens: ArrayLike,
    kv_len: ArrayLike,
    time_s: ArrayLike,
    *,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    kv_bytes_per_elem: float,
    act_bytes_per_elem: float,
    bandwidth_bytes_per_s: float,
    flops_per_s: float,
    params: Sequence[str],
    base: AttentionEfficiency = AttentionEfficiency(),
) -> tuple[AttentionEfficiency, FitDiagnostics]:
    """Fit AttentionEfficiency to measured attention times (robust least squares, log error).

    Args:
        batch, q_tokens, kv_len, q_heads, kv_heads, head_dim, kv_bytes_per_elem,
            act_bytes_per_elem, bandwidth_bytes_per_s, flops_per_s: as for attention_time_s.
        time_s: measured kernel time of each point, s (> 0).
        params: fields to fit, e.g. DECODE_FIT_PARAMS for decode points and
            PREFILL_FIT_PARAMS for prefill points.
        base: values of the fields that are not fitted.

    Returns:
        (fitted AttentionEfficiency, FitDiagnostics on the fitted points).
    """
    names = _check_fit_params(params, _ATTENTION_PARAMS)
    b, q, ctx, t_a = np.broadcast_arrays(
        _as_nonneg_array("batch", batch),
        _as_nonneg_array("q_tokens", q_tokens),
        _as_nonneg_array("kv_len", kv_len),
        np.asarray(time_s, dtype=np.float64),
    )

    def with_fields(fields: dict[str, float]) -> AttentionEfficiency:
        values = {
            "floor_s": base.floor_s,
            "bandwidth": base.bandwidth,
            "flops": base.flops,
            "causal_flops": base.causal_flops,
        }
        values.update(fields)
        return AttentionEfficiency(**values)

    def predict_s(fields: dict[str, float]) -> FloatArray:
        return attention_time_s(
            b,
            q,
            ctx,
            q_heads=q_heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            kv_bytes_per_elem=kv_bytes_per_elem,
            act_bytes_per_elem=act_bytes_per_elem,
            bandwidth_bytes_per_s=bandwidth_bytes_per_s,
            flops_per_s=flops_per_s,
            eff=with_fields(fields),
        )

    fields, diag = _fit_fields(predict_s, t_a, names, _ATTENTION_PARAMS)
    return with_fields(fields), diag

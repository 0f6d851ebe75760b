"""Time of one weight GEMM: the datasheet roofline plus fitted efficiency terms.

A weight GEMM multiplies ``m`` token rows by a ``k x n`` weight shard. The ideal (datasheet)
roofline is

    t = max(bytes / bandwidth, 2 m k n / peak_flops),  bytes = k n wb + m (k + n) ab

(weights read once, activations in and out). Measured kernels (Vidur's A100/A40 tables) deviate
from it in the ways below, each modelled by :class:`GemmEfficiency` fields whose defaults switch
it off, so that the default efficiency reproduces the ideal roofline exactly. Fitted values
quoted are for Llama-2-7B's GEMMs (all TP degrees) on the A100 / A40.

1. ``bandwidth``, ``flops``: effective fractions of the datasheet numbers (HBM and tensor cores
   never run at their peaks; 0.86 / 0.77 and 0.76 / 0.79).
2. ``floor_s``: a fixed latency on the memory path. A kernel that streams ``B`` bytes takes
   ``floor + B / bw``: small TP shards do not saturate HBM (launch, ramp-up, tail), so a 4 MB
   shard reaches ~35% of the bandwidth that a 500 MB one reaches. Fitted 5.7 / 2.0 us.
3. ``tile_rows``, ``tile_fraction``: token-tile quantization. Tensor-core kernels compute the
   output in tiles of ``tile_rows`` token rows (128 on Ampere; for ``m`` below one tile the
   library picks the smallest power-of-two tile >= ``m``, at least 16), so the MMA work is paid
   on ``m`` padded up to a tile multiple: the 15-45% steps just past multiples of 128 tokens.
   Only ``tile_fraction`` of the tile time scales with padded rows; the rest (predicated
   activation loads and stores) scales with the real rows. Fitted 0.62 / 0.48.
4. ``epilogue_k``: per-output-element overhead (pipeline prologue and epilogue of every output
   tile: filling the k-pipeline, writing C), in units of reduction steps, so compute time is
   ``2 m_eff (k + epilogue_k) n / flops``. It lowers the efficiency of short-k shards (TP 8
   output projections reach only ~60% of peak when the large ones reach ~75%); fitted 76 / 112.
5. ``overlap_p``: memory and compute overlap imperfectly near the knee. The two times are
   combined by a smooth maximum ``(t_mem^p + t_comp^p)^(1/p)`` (p = inf: hard max, p = 1: no
   overlap). The fitted p = 2.0 / 2.0 puts the knee near 128 tokens, not at peak_flops /
   bandwidth.
6. ``sm_count``, ``tile_cols``, ``wave_fraction``: wave quantization. The ceil(m / tile_rows)
   x ceil(n / tile_cols) output tiles run ``sm_count`` at a time (108 SMs on the A100, 84 on the
   A40); a last wave that is only partly full still takes a whole wave's time on the busy SMs.
   Only ``wave_fraction`` of that idle time is paid (the library also picks other tile shapes
   and split-K kernels, which fill part of it): fitted 0.17 / 0.08 with 128 x 128 tiles, the
   width of {64, 128, 256} with the lowest training loss summed over the two GPUs.

Each term was kept only if it lowered the cross-model holdout error on the Vidur tables (train
on one model, predict the summed layer GEMM time of every other model on the same GPU): mean
absolute error 32% / 29% for the datasheet roofline, 7.4% / 7.6% with the first three fields,
3.2% / 4.2% with all of them, every A100 model <= 3.8% (``tests/test_vidur_calibration.py``).
What is left is mostly the library's per-shape kernel choice (tile shape, split-K, step
positions that differ shape to shape and do not carry over between shapes). On the A40 it
bounds this form above 4% for some models: fitted to each model's own rows it leaves
CodeLlama-34B and InternLM-20B at 4.3-4.5%, and the parameters that minimize the held-out error
itself leave 4.0% pooled.
"""

from __future__ import annotations

import functools
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
        sm_count: streaming multiprocessors of the GPU, which run the output tiles in waves
            (>= 0; 0: unknown, no wave term).
        tile_cols: weight columns (GEMM n) per output tile (>= 1).
        wave_fraction: share of the idle part of the last wave that is paid, in [0, 1]
            (0: no wave quantization; > 0 needs sm_count >= 1).
    """

    bandwidth: float = 1.0
    flops: float = 1.0
    floor_s: float = 0.0
    overlap_p: float = math.inf
    tile_rows: int = 128
    tile_fraction: float = 0.0
    epilogue_k: float = 0.0
    sm_count: int = 0
    tile_cols: int = 128
    wave_fraction: float = 0.0

    def __post_init__(self) -> None:
        _check_positive("GemmEfficiency.bandwidth", self.bandwidth)
        _check_positive("GemmEfficiency.flops", self.flops)
        _check_positive("GemmEfficiency.floor_s", self.floor_s, allow_zero=True)
        _check_positive("GemmEfficiency.epilogue_k", self.epilogue_k, allow_zero=True)
        if not (self.overlap_p >= 1.0):  # also rejects NaN
            raise SpecError(f"GemmEfficiency.overlap_p = {self.overlap_p!r}: need a number >= 1")
        for name in ("tile_fraction", "wave_fraction"):
            value = getattr(self, name)
            if not (0.0 <= value <= 1.0):
                raise SpecError(f"GemmEfficiency.{name} = {value!r}: need 0 <= value <= 1")
        for name, minimum in (("tile_rows", 1), ("tile_cols", 1), ("sm_count", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise SpecError(f"GemmEfficiency.{name} = {value!r}: need an integer >= {minimum}")
        if self.wave_fraction > 0.0 and self.sm_count < 1:
            raise SpecError(
                f"GemmEfficiency.wave_fraction = {self.wave_fraction!r} needs sm_count >= 1"
            )


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
    m_arr = np.atleast_1d(np.asarray(m, dtype=np.float64))
    padded = tile_rows * np.ceil(m_arr / tile_rows)  # 0 stays 0
    small = (m_arr > 0.0) & (m_arr <= tile_rows)
    if small.any():  # a sweep has few points below one tile: fix just those
        # Smallest power of two >= m: m = f 2^e with f in [0.5, 1) is one exactly at f = 0.5.
        fraction, exponent = np.frexp(np.maximum(m_arr[small], 1.0))
        pow2 = np.ldexp(1.0, exponent - (fraction == 0.5))
        padded[small] = np.clip(pow2, min(MIN_TILE_ROWS, tile_rows), tile_rows)
    result: FloatArray = padded.reshape(np.shape(m))
    return result


def wave_factor(padded_m: FloatArray, n: FloatArray, eff: GemmEfficiency) -> FloatArray:
    """Compute-time factor of the partly idle last wave of output tiles (1: whole waves).

    The kernel runs ceil(padded_m / tile_rows) x ceil(n / tile_cols) output tiles, sm_count at
    a time. With W = tiles / sm_count waves, the last one leaves ceil(W) - W of a wave idle;
    ``wave_fraction`` of that idle time is paid: factor = 1 + wave_fraction (ceil(W) - W) / W.

    Args:
        padded_m: tokens padded to the token tile (padded_tokens), any shape.
        n: output width of the weight shard, broadcast with padded_m.
        eff: supplies tile_rows, tile_cols, sm_count (>= 1) and wave_fraction.

    Returns:
        The factor (>= 1), the broadcast shape; 1 where there are no tiles.
    """
    # Integer tile counts first, so that whole waves divide exactly (no spurious extra wave);
    # padded_m is a whole number of token tiles, or one tile when it is below one.
    # (m = 0 has no tiles; counting it as one tile only scales a compute time of zero, and an
    # empty shard, n = 0, gets a finite factor for the same reason.)
    row_tiles = np.maximum(padded_m, eff.tile_rows) / eff.tile_rows
    waves = np.maximum(row_tiles * np.ceil(n / eff.tile_cols) / eff.sm_count, 1e-300)
    factor: FloatArray = 1.0 + eff.wave_fraction * ((np.ceil(waves) - waves) / waves)
    return factor


def smooth_max(a: FloatArray, b: FloatArray, p: float) -> FloatArray:
    """(a^p + b^p)^(1/p) for a, b >= 0, evaluated without overflow; p = inf gives max(a, b)."""
    if math.isinf(p):
        return np.maximum(a, b)
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    # hi (1 + r^p)^(1/p) with r = lo / hi in [0, 1]: the factor is read off a table of
    # SMOOTH_TABLE_SIZE intervals by linear interpolation (relative error below 1e-7), since
    # powers on every point of a 65,536-point sweep cost more than the rest of the pass.
    values, slopes = _smooth_table(float(p))
    with np.errstate(divide="ignore", invalid="ignore"):
        x = lo * (SMOOTH_TABLE_SIZE / hi)  # r scaled to table intervals
    x = np.atleast_1d(x)
    x[~(hi > 0.0)] = 0.0  # both times zero: factor 1, result 0
    index = x.astype(np.int64)
    np.minimum(index, SMOOTH_TABLE_SIZE - 1, out=index)
    scale = np.take(values, index) + (x - index) * np.take(slopes, index)
    return np.asarray(hi * scale.reshape(np.shape(hi)), dtype=np.float64)


SMOOTH_TABLE_SIZE = 8192


@functools.lru_cache(maxsize=32)
def _smooth_table(p: float) -> tuple[FloatArray, FloatArray]:
    """(1 + r^p)^(1/p) at SMOOTH_TABLE_SIZE + 1 evenly spaced r in [0, 1], and the slope of
    each interval (per unit of the scaled ratio)."""
    r = np.linspace(0.0, 1.0, SMOOTH_TABLE_SIZE + 1)
    table: FloatArray = (1.0 + r**p) ** (1.0 / p)
    return table, np.diff(table)


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
    padded = m_a
    if eff.tile_fraction > 0.0 or eff.wave_fraction > 0.0:
        padded = padded_tokens(m_a, eff.tile_rows)
        m_eff = m_a + eff.tile_fraction * (padded - m_a)
    # 2 flops per multiply-add, each output element costs k (+ epilogue) reduction steps.
    t_comp_s = m_eff * (2.0 * (k_a + eff.epilogue_k) * n_a / (eff.flops * flops_per_s))
    if eff.wave_fraction > 0.0:
        t_comp_s = t_comp_s * wave_factor(padded, n_a, eff)
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
    "wave_fraction": _Param(_logistic, lambda v: math.log(v / (1.0 - v)), 0.5),
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
    params: Sequence[str] | None = None,
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
        params: names of the GemmEfficiency fields to fit; the others keep their value in
            ``base``. Default: all of GEMM_FIT_PARAMS, less wave_fraction when base.sm_count
            is 0 (the wave term needs the GPU's SM count).
        base: values of the fields that are not fitted (and tile_rows, tile_cols, sm_count).

    Returns:
        (fitted GemmEfficiency, FitDiagnostics on the fitted points).
    """
    if params is None:
        params = tuple(p for p in GEMM_FIT_PARAMS if base.sm_count or p != "wave_fraction")
    names = _check_fit_params(params, _GEMM_PARAMS)
    if "wave_fraction" in names and base.sm_count < 1:
        raise SpecError("fit parameter 'wave_fraction' needs base.sm_count >= 1 (SMs of the GPU)")
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
    values = {name: float(getattr(base, name)) for name in _GEMM_PARAMS}
    values.update(fields)
    for name in ("tile_fraction", "wave_fraction"):
        values[name] = min(max(values[name], 0.0), 1.0)
    values["overlap_p"] = max(values["overlap_p"], 1.0)
    return GemmEfficiency(
        tile_rows=base.tile_rows, tile_cols=base.tile_cols, sm_count=base.sm_count, **values
    )

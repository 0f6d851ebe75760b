"""Fitting the GEMM time model to measured kernels: robust least squares on log error.

The model itself (what each `GemmEfficiency` field means) is in `specsim.forward.gemm`; this
module only estimates its fields from measured times, so scipy is imported by the commands
that fit and by no other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import least_squares

from specsim.errors import SpecError
from specsim.forward.gemm import FloatArray, as_nonneg_array, gemm_time_s
from specsim.specs.hardware import GemmEfficiency

# Robust loss for relative (log) residuals: Cauchy, with 5% as the scale of a typical error.
_LOSS = "cauchy"
_LOSS_SCALE = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class LogFit:
    """A robust log-error fit: the variables, the log residuals there, and the solver's report."""

    x: FloatArray
    log_residuals: FloatArray
    evaluations: int
    status: int
    message: str


def robust_log_fit(predict_s: Callable[[FloatArray], FloatArray], time_s: FloatArray,
                   x0: FloatArray, bounds: tuple[FloatArray, FloatArray] | None = None
                   ) -> LogFit:
    """Variables x minimizing a Cauchy loss (scale 5%) of log(predict_s(x) / time_s).

    Every calibration fit of specsim goes through here: relative errors, so that microsecond
    and millisecond kernels weigh alike, and a robust loss, so that a few outliers (a clock
    dip, a cold cache) do not pull the fit. Deterministic from the start values `x0`.
    """
    log_t = np.log(time_s)

    def residuals(x: FloatArray) -> FloatArray:
        return np.asarray(np.log(np.maximum(predict_s(x), 1e-300)) - log_t, dtype=np.float64)

    limits = bounds if bounds is not None else (-np.inf, np.inf)
    result = least_squares(residuals, x0, bounds=limits, loss=_LOSS, f_scale=_LOSS_SCALE)
    x = np.asarray(result.x, dtype=np.float64)
    return LogFit(x=x, log_residuals=residuals(x), evaluations=int(result.nfev),
                  status=int(result.status), message=str(result.message))


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
    chosen = [specs[name] for name in names]

    def fields_of(x: FloatArray) -> dict[str, float]:
        return {
            name: spec.to_field(float(v)) for name, spec, v in zip(names, chosen, x, strict=True)
        }

    x0 = np.array([spec.from_field(spec.start) for spec in chosen], dtype=np.float64)
    fit = robust_log_fit(lambda x: predict_s(fields_of(x)), time_s, x0)
    diag = _diagnostics(fit.log_residuals, names, fit.evaluations, fit.status, fit.message)
    return fields_of(fit.x), diag


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
        as_nonneg_array("m", m),
        as_nonneg_array("k", k),
        as_nonneg_array("n", n),
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

"""Fitting the GEMM time model to measured kernels: robust least squares on log error.

The model itself (what each `GemmEfficiency` field means) is in `specsim.forward.gemm`; this
module only estimates its fields from measured times, so scipy is imported by the commands
that fit and by no other.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
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
                   x0: FloatArray, bounds: tuple[FloatArray, FloatArray] | None = None,
                   prior: tuple[FloatArray, FloatArray] | None = None) -> LogFit:
    """Variables x minimizing a Cauchy loss (scale 5%) of log(predict_s(x) / time_s).

    Every calibration fit of specsim goes through here: relative errors, so that microsecond
    and millisecond kernels weigh alike, and a robust loss, so that a few outliers (a clock
    dip, a cold cache) do not pull the fit. Deterministic from the start values `x0`.
    prior: (centre, sigma) per variable (sigma inf: none): one extra residual
    5% (x - centre) / sigma each, i.e. a Gaussian prior as strong as one point whose log error
    is (x - centre) / sigma times the typical 5%; thousands of points outweigh it, a variable
    the points do not constrain stays near its centre.
    """
    log_t = np.log(time_s)
    centre, sigma = prior if prior is not None else (np.zeros_like(x0), np.full_like(x0, np.inf))
    weight = _LOSS_SCALE / sigma

    def data(x: FloatArray) -> FloatArray:
        return np.asarray(np.log(np.maximum(predict_s(x), 1e-300)) - log_t, dtype=np.float64)

    def residuals(x: FloatArray) -> FloatArray:
        return np.concatenate([data(x), weight * (x - centre)])

    limits = bounds if bounds is not None else (-np.inf, np.inf)
    result = least_squares(residuals, x0, bounds=limits, loss=_LOSS, f_scale=_LOSS_SCALE)
    x = np.asarray(result.x, dtype=np.float64)
    return LogFit(x=x, log_residuals=data(x), evaluations=int(result.nfev),
                  status=int(result.status), message=str(result.message))


def prior_share(predict_s: Callable[[FloatArray], FloatArray], x: FloatArray,
                sigma: FloatArray) -> FloatArray:
    """Per variable, the share of its posterior variance that the prior supplies (0 to 1).

    Linearized at x: data precision J^T J / s^2 (J: d log predict / dx by central differences,
    s = 5%, the residual scale), prior precision 1 / sigma^2; the posterior covariance C is the
    inverse of their sum and the share is C_ii / sigma_i^2. Near 1: the points do not
    identify the variable (the fit just returns the prior); near 0: the points decide it.
    """
    step = 1e-4
    columns = []
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += step
        down[i] -= step
        columns.append((np.log(predict_s(up)) - np.log(predict_s(down))) / (2 * step))
    jac = np.column_stack(columns)
    precision = jac.T @ jac / _LOSS_SCALE**2 + np.diag(1.0 / sigma**2)
    covariance = np.linalg.pinv(precision)
    return np.asarray(np.clip(np.diag(covariance) / sigma**2, 0.0, 1.0), dtype=np.float64)


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


# Inverse transforms take a field's value back to the optimizer's variable; a value exactly on
# a bound (a start or prior of 0, 1 or p = 1) maps just inside it instead of to +-inf.
_EDGE = 1e-9


def _logit(v: float) -> float:
    v = min(max(v, _EDGE), 1.0 - _EDGE)
    return math.log(v / (1.0 - v))


def _log(v: float) -> float:
    return math.log(max(v, _EDGE))


# Efficiencies are fractions of the datasheet: a logistic keeps them in (0, 1), so no fit can
# return a GPU faster than its datasheet; floors and overheads are exponentials (>= 0).
_GEMM_PARAMS: dict[str, _Param] = {
    "bandwidth": _Param(_logistic, _logit, 0.8),
    "flops": _Param(_logistic, _logit, 0.75),
    # floor in microseconds inside the optimizer, so that all variables are O(1).
    "floor_s": _Param(lambda x: 1e-6 * _exp(x), lambda v: _log(v / 1e-6), 3e-6),
    "overlap_p": _Param(lambda x: 1.0 + _exp(x), lambda v: _log(v - 1.0), 3.0),
    "tile_fraction": _Param(_logistic, _logit, 0.5),
    "epilogue_k": _Param(_exp, _log, 50.0),
    "wave_fraction": _Param(_logistic, _logit, 0.5),
}
# A fitted field whose posterior variance comes from its prior for more than this share is
# not identified by the points: the fit keeps the prior's value and says so.
UNIDENTIFIED_PRIOR_SHARE = 0.5
# Width of a prior in the optimizer's variable (log or logit of the field): 0.5 lets a
# fraction of 0.8 move to about 0.7 or 0.87 at one sigma, a floor by a factor 1.65.
PRIOR_SIGMA = 0.5


@dataclass(frozen=True, slots=True)
class Prior:
    """Centre of a weak Gaussian prior on a fitted field (in the field's own units), and its
    width in the optimizer's variable (log or logit of the field)."""

    value: float
    sigma: float = PRIOR_SIGMA
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
        kept_priors: per field the points could not identify, why the fit kept its prior.
        at_bound: fields that ended within 2% of a physical limit (an efficiency of 1).
    """

    n_points: int
    params: tuple[str, ...]
    mape: float
    rms_log_error: float
    max_abs_log_error: float
    nfev: int
    converged: bool
    message: str
    kept_priors: tuple[tuple[str, str], ...] = ()
    at_bound: tuple[str, ...] = ()


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
    priors: Mapping[str, Prior] | None = None,
) -> tuple[dict[str, float], FitDiagnostics]:
    """Robust least squares of log(predict_s(fields) / time_s) over the named fields.

    With priors, a field the points do not identify (prior_share above
    UNIDENTIFIED_PRIOR_SHARE) is set to its prior's value and the others are fitted again.
    """
    _check_times(time_s, len(names))
    priors = {k: v for k, v in (priors or {}).items() if k in names}
    fields, fit, x = _solve(predict_s, time_s, names, specs, priors, {})
    kept: dict[str, float] = {}
    shares: dict[str, float] = {}
    if priors:
        chosen = [specs[name] for name in names]
        sigma = np.array([priors[n].sigma if n in priors else np.inf for n in names])
        share = prior_share(lambda v: predict_s(_fields_of(names, chosen, v)), x,
                            np.where(np.isfinite(sigma), sigma, 1e3))
        kept = {n: priors[n].value for n, sh in zip(names, share, strict=True)
                if n in priors and sh > UNIDENTIFIED_PRIOR_SHARE}
        if kept:
            fields, fit, x = _solve(predict_s, time_s, names, specs, priors, kept)
            shares = {n: float(v) for n, v in zip(names, share, strict=True)}
    diag = _diagnostics(fit.log_residuals, names, fit.evaluations, fit.status, fit.message)
    reasons = tuple((n, f"the points do not identify it ({shares[n]:.0%} of its uncertainty "
                     f"is the prior's): kept the prior {v:.4g}") for n, v in kept.items())
    bound = tuple(n for n in ("bandwidth", "flops") if n in fields and fields[n] > 0.98)
    return fields, dataclasses.replace(diag, kept_priors=reasons, at_bound=bound)


def _fields_of(names: Sequence[str], chosen: Sequence[_Param], x: FloatArray
               ) -> dict[str, float]:
    return {name: spec.to_field(float(v)) for name, spec, v in zip(names, chosen, x, strict=True)}


def _solve(predict_s: Callable[[dict[str, float]], FloatArray], time_s: FloatArray,
           names: tuple[str, ...], specs: dict[str, _Param], priors: Mapping[str, Prior],
           fixed: Mapping[str, float]) -> tuple[dict[str, float], LogFit, FloatArray]:
    """Fit the named fields less `fixed` (held at their values); all fields, the fit, x."""
    free = tuple(n for n in names if n not in fixed)
    chosen = [specs[name] for name in free]

    def all_fields(x: FloatArray) -> dict[str, float]:
        return {**_fields_of(free, chosen, x), **fixed}

    start = [priors[n].value if n in priors else specs[n].start for n in free]
    x0 = np.array([spec.from_field(v) for spec, v in zip(chosen, start, strict=True)])
    centre = np.array([specs[n].from_field(priors[n].value) if n in priors else 0.0
                       for n in free])
    sigma = np.array([priors[n].sigma if n in priors else np.inf for n in free])
    fit = robust_log_fit(lambda x: predict_s(all_fields(x)), time_s, x0, prior=(centre, sigma))
    full = np.array([specs[n].from_field(all_fields(fit.x)[n]) for n in names])
    return all_fields(fit.x), fit, full


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
    priors: Mapping[str, Prior] | None = None,
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
        priors: weak priors on some fitted fields (e.g. CROSS_GPU_PRIORS); a field the points
            cannot identify keeps its prior's value, listed in the diagnostics' kept_priors.

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

    fields, diag = _fit_fields(predict_s, t_a, names, _GEMM_PARAMS, priors)
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

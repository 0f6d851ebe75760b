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
    the points do not constrain stays near its centre. The prior's residuals are squared, not
    put through the robust loss: a Cauchy loss would let a prior several sigmas away from the
    fit fade out, and a prior that fades is not the Gaussian prior_share assumes.
    """
    log_t = np.log(time_s)
    centre, sigma = prior if prior is not None else (np.zeros_like(x0), np.full_like(x0, np.inf))
    weight = _LOSS_SCALE / sigma

    def data(x: FloatArray) -> FloatArray:
        return np.asarray(np.log(np.maximum(predict_s(x), 1e-300)) - log_t, dtype=np.float64)

    def residuals(x: FloatArray) -> FloatArray:
        return np.concatenate([data(x), weight * (x - centre)])

    limits = bounds if bounds is not None else (-np.inf, np.inf)
    loss = _LOSS if prior is None else _cauchy_then_squares(log_t.size)
    result = least_squares(residuals, x0, bounds=limits, loss=loss, f_scale=_LOSS_SCALE)
    x = np.asarray(result.x, dtype=np.float64)
    return LogFit(x=x, log_residuals=data(x), evaluations=int(result.nfev),
                  status=int(result.status), message=str(result.message))


def _cauchy_then_squares(n_data: int) -> Callable[[FloatArray], FloatArray]:
    """scipy least_squares loss: Cauchy rho(z) = log(1 + z) on the first n_data residuals
    (the points), plain squares rho(z) = z on the rest (the priors); rows rho, rho', rho''."""
    def rho(z: FloatArray) -> FloatArray:
        out = np.empty((3, z.size))
        points = z[:n_data]
        out[0, :n_data] = np.log1p(points)
        out[1, :n_data] = 1.0 / (1.0 + points)
        out[2, :n_data] = -1.0 / (1.0 + points) ** 2
        out[0, n_data:], out[1, n_data:], out[2, n_data:] = z[n_data:], 1.0, 0.0
        return out
    return rho


def prior_share(predict_s: Callable[[FloatArray], FloatArray], x: FloatArray,
                sigma: FloatArray, log_residuals: FloatArray | None = None) -> FloatArray:
    """Per variable, the share of its posterior variance that the prior supplies (0 to 1).

    Linearized at x: data precision J^T W J / s^2 (J: d log predict / dx by central differences,
    s = 5%, the residual scale; W: each point's weight in the Cauchy loss, 1 / (1 + (r / s)^2)
    for its log residual r, all 1 without residuals), prior precision 1 / sigma^2; the
    posterior covariance C is the inverse of their sum and the share is C_ii / sigma_i^2. Near
    1: the points do not identify the variable (the fit just returns the prior); near 0: the
    points decide it. The answer is only as good as the variable's units: a variable that
    saturates (a logistic near 0 or 1) has a vanishing J there however well the points pin the
    field down, so fitted fields with priors are parametrized without saturation (log).
    """
    step = 1e-4
    columns = []
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += step
        down[i] -= step
        columns.append((np.log(predict_s(up)) - np.log(predict_s(down))) / (2 * step))
    jac = np.column_stack(columns)
    weights = np.ones(jac.shape[0]) if log_residuals is None else \
        1.0 / (1.0 + (log_residuals / _LOSS_SCALE) ** 2)
    precision = (jac.T * weights) @ jac / _LOSS_SCALE**2 + np.diag(1.0 / sigma**2)
    covariance = np.linalg.pinv(precision)
    return np.asarray(np.clip(np.diag(covariance) / sigma**2, 0.0, 1.0), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Param:
    """How one fitted field maps to the optimizer's variable (to_field), its start value, and
    the variable's upper bound (inf: none)."""

    to_field: Callable[[float], float]
    from_field: Callable[[float], float]
    start: float
    upper: float = math.inf


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


# Bandwidth and flops are fractions of the datasheet, fitted as their logs with a hard upper
# bound at 0 (a fraction of 1), so no fit returns a GPU faster than its datasheet and one that
# wants more stops at 1 and says so (at_bound). Not a logistic: it flattens towards 1, where a
# GPU streaming 0.9-0.97 of its datasheet sits, and the identifiability check (prior_share)
# then reads the flattening as "the points do not identify it" and replaces a measured 0.97
# with the prior. In log units a step is a relative change of the field wherever it is.
# Floors and overheads are exponentials (>= 0); the shape fractions, which have no prior,
# stay logistic (in (0, 1)).
_GEMM_PARAMS: dict[str, _Param] = {
    "bandwidth": _Param(_exp, _log, 0.8, upper=0.0),
    "flops": _Param(_exp, _log, 0.75, upper=0.0),
    # floor in microseconds inside the optimizer, so that all variables are O(1).
    "floor_s": _Param(lambda x: 1e-6 * _exp(x), lambda v: _log(v / 1e-6), 3e-6),
    "overlap_p": _Param(lambda x: 1.0 + _exp(x), lambda v: _log(v - 1.0), 3.0),
    "tile_fraction": _Param(_logistic, _logit, 0.5),
    "epilogue_k": _Param(_exp, _log, 50.0),
    "wave_fraction": _Param(_logistic, _logit, 0.5),
}
# A fitted field whose posterior variance comes from its prior for more than this share is
# not identified by the points (they pin it down less than the prior does): the fit keeps the
# prior's value and says so.
UNIDENTIFIED_PRIOR_SHARE = 0.5
# A field the points identify but pin down only to more than this one-sigma spread (log units,
# ~relative; points_only_spread) is fitted, drawn towards its prior, and named: 10% is twice
# the 5% residual scale of one point, and about the spread of the fitted fractions between
# the A100 and the A40 (bandwidth 0.86 / 0.77).
LOOSE_SPREAD = 0.10
# Default width of a prior in the optimizer's variable: for the GEMM fields with priors
# (bandwidth, flops, floor) the log of the field, so 0.5 is a factor 1.65 at one sigma; the
# attention fit (attention_fit) uses it on logits.
PRIOR_SIGMA = 0.5


@dataclass(frozen=True, slots=True)
class Prior:
    """Centre of a weak Gaussian prior on a fitted field (in the field's own units), and its
    width in the optimizer's variable (the log of a GEMM field: 0.25 is +-25%)."""

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
        kept_priors: per field the points could not identify, why the fit kept its prior and
            which points would identify it.
        at_bound: fields that ended within 2% of a physical limit (an efficiency of 1).
        prior_shares: per field with a prior, the share of its uncertainty that is the
            prior's (prior_share; 0: the points decide it, above UNIDENTIFIED_PRIOR_SHARE: kept).
        loosely_fitted: per field fitted although the points pin it down to more than
            LOOSE_SPREAD, how far and which points would pin it.
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
    prior_shares: tuple[tuple[str, float], ...] = ()
    loosely_fitted: tuple[tuple[str, str], ...] = ()


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
    would_identify: Callable[[str, dict[str, float]], str] | None = None,
) -> tuple[dict[str, float], FitDiagnostics]:
    """Robust least squares of log(predict_s(fields) / time_s) over the named fields.

    With priors, a field the points do not identify (prior_share above
    UNIDENTIFIED_PRIOR_SHARE) is set to its prior's value and the others are fitted again;
    would_identify(name, fields) says which points would identify it (appended to the reason).
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
                            np.where(np.isfinite(sigma), sigma, 1e3), fit.log_residuals)
        shares = {n: float(v) for n, v in zip(names, share, strict=True) if n in priors}
        kept = {n: priors[n].value for n, sh in shares.items() if sh > UNIDENTIFIED_PRIOR_SHARE}
        if kept:
            fields, fit, x = _solve(predict_s, time_s, names, specs, priors, kept)
    diag = _diagnostics(fit.log_residuals, names, fit.evaluations, fit.status, fit.message)

    def where(n: str) -> str:
        return f"; {would_identify(n, fields)}" if would_identify else ""

    reasons = tuple((n, f"the points do not identify it ({shares[n]:.0%} of its uncertainty "
                     f"is the prior's): kept the prior {v:.4g}{where(n)}")
                    for n, v in kept.items())
    spread = {n: points_only_spread(sh, priors[n].sigma) for n, sh in shares.items()}
    loose = tuple((n, f"the points pin it only to +-{spread[n]:.0%} ({shares[n]:.0%} of its "
                   f"uncertainty is the prior's): fitted {fields[n]:.4g}, drawn towards the "
                   f"prior {priors[n].value:.4g}{where(n)}")
                  for n in shares if n not in kept and spread[n] > LOOSE_SPREAD)
    bound = tuple(n for n in ("bandwidth", "flops") if n in fields and fields[n] > 0.98)
    return fields, dataclasses.replace(diag, kept_priors=reasons, loosely_fitted=loose,
                                       at_bound=bound, prior_shares=tuple(shares.items()))


def points_only_spread(share: float, sigma: float) -> float:
    """One-sigma spread of a field the points alone would leave (log units, ~relative), from
    the prior's share of its uncertainty: posterior 1/C = 1/sigma^2 + P, share = C / sigma^2,
    so the points' own precision P gives sigma sqrt(share / (1 - share)); inf at share 1."""
    return math.inf if share >= 1.0 else sigma * math.sqrt(share / (1.0 - share))


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
    upper = np.array([spec.upper for spec in chosen])
    # A start on or above an upper bound (a prior of 1) starts just inside it.
    x0 = np.minimum([spec.from_field(v) for spec, v in zip(chosen, start, strict=True)],
                    upper - 1e-3)
    centre = np.array([specs[n].from_field(priors[n].value) if n in priors else 0.0
                       for n in free])
    sigma = np.array([priors[n].sigma if n in priors else np.inf for n in free])
    fit = robust_log_fit(lambda x: predict_s(all_fields(x)), time_s, x0,
                         bounds=(np.full_like(upper, -np.inf), upper), prior=(centre, sigma))
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

    def would_identify(name: str, fields: dict[str, float]) -> str:
        return points_that_identify(name, _replace_gemm(base, fields), m_a,
                                    k_a * n_a * weight_bytes_per_param,
                                    bandwidth_bytes_per_s=bandwidth_bytes_per_s,
                                    flops_per_s=flops_per_s,
                                    weight_bytes_per_param=weight_bytes_per_param)

    fields, diag = _fit_fields(predict_s, t_a, names, _GEMM_PARAMS, priors, would_identify)
    return _replace_gemm(base, fields), diag


def ridge_tokens(eff: GemmEfficiency, *, bandwidth_bytes_per_s: float, flops_per_s: float,
                 weight_bytes_per_param: float) -> float:
    """Tokens at which a weight GEMM's flops take as long as streaming its weights.

    2 m k n / (flops x peak) = k n wb / (bandwidth x datasheet bandwidth) at
    m = flops x peak x wb / (2 bandwidth x datasheet bandwidth): activations, floor and the
    shape terms left out. Below it a GEMM is memory-bound, above it compute-bound (the A100 at
    the transferred fractions 0.78 / 0.77, fp16: 151 tokens).
    """
    return (eff.flops * flops_per_s * weight_bytes_per_param
            / (2.0 * eff.bandwidth * bandwidth_bytes_per_s))


def points_that_identify(name: str, eff: GemmEfficiency, m: FloatArray, weight_bytes: FloatArray,
                         *, bandwidth_bytes_per_s: float, flops_per_s: float,
                         weight_bytes_per_param: float) -> str:
    """Which measurements would identify a GEMM field these points leave to its prior.

    Args:
        name: the field (bandwidth, flops, floor_s; others get a generic answer).
        eff: the fitted terms (the ridge and the floor's size are read off them).
        m: tokens of each point; weight_bytes: bytes of each point's weight shard.
        bandwidth_bytes_per_s, flops_per_s, weight_bytes_per_param: the GPU's datasheet.

    Returns:
        One clause: the token region and shard sizes, and what these points span.
    """
    ridge = ridge_tokens(eff, bandwidth_bytes_per_s=bandwidth_bytes_per_s,
                         flops_per_s=flops_per_s, weight_bytes_per_param=weight_bytes_per_param)
    # Shard whose streaming takes as long as the floor: below it the floor is most of the time.
    floor_mb = eff.floor_s * eff.bandwidth * bandwidth_bytes_per_s / 1e6
    span = (f"these points span n = {m.min():.0f}-{m.max():.0f} tokens and shards of "
            f"{weight_bytes.min() / 1e6:.3g}-{weight_bytes.max() / 1e6:.3g} MB")
    memory_bound = (f"n below about {max(ridge / 4.0, 1.0):.0f} tokens (a quarter of the "
                    f"ridge, ~{ridge:.0f} tokens at these rates)")
    what = {
        "bandwidth": f"memory-bound points would: {memory_bound}, on shards of several sizes "
                     f"well above {floor_mb:.2g} MB (where streaming outlasts the "
                     f"{eff.floor_s * 1e6:.2g} us floor)",
        "flops": f"compute-bound points would: n above about {2.0 * ridge:.0f} tokens (twice the "
                 f"ridge, ~{ridge:.0f} tokens at these rates)",
        "floor_s": f"memory-bound points on small shards would: {memory_bound}, on shards of "
                   f"about {floor_mb:.2g} MB or less (where the floor is half the time or more) "
                   f"beside larger ones",
    }.get(name, "points over more token counts and shard shapes would")
    return f"{what}; {span}"


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

"""Training objectives for a drafter: what each one's optimum accepts, and position weights.

- The article's toy: a target mixing N(-4, 0.8^2), N(-0.5, 0.4^2) and N(6, 0.4^2) with weights
  0.4 / 0.3 / 0.3 on 241 tokens (grid -12..12 in steps of 0.1), and a drafter that is one
  discretized Gaussian N(mu, sigma^2). Each objective is minimized over (mu, sigma) by a
  deterministic grid search refined around the best point; the reported number is the optimum's
  acceptance alpha = sum min(p, q).
  Objectives: forward KL(p || q) (mass-covering), reverse KL(q || p) (mode-seeking), TV
  (alpha-optimal), LK likelihood -log alpha (same optimum as TV), and the LK hybrid
  lambda KL + (1 - lambda) TV with lambda = exp(-eta alpha), alpha held fixed (stop-gradient)
  and solved as a fixed point.
- Position weights: d tau / d alpha_k for tau = 1 + sum_k prod_{i<=k} alpha_i, normalized to
  the first position, against a fixed schedule exp(-(k - 1) / kappa) (DFlash: kappa = 7).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError
from specsim.speculation.distances import overlap, total_variation

FloatArray = npt.NDArray[np.float64]

# The article's toy target: (mean, std, weight) of each mode, and its 241-token grid.
TOY_MODES = ((-4.0, 0.8, 0.4), (-0.5, 0.4, 0.3), (6.0, 0.4, 0.3))
TOY_GRID = np.linspace(-12.0, 12.0, 241)
# LK hybrid's default eta (the article's drafter_losses uses 3.0).
LK_ETA = 3.0
# Search ranges for the drafter's (mu, sigma): the grid's span, sigma from a tenth of a token
# spacing to the whole span.
SIGMA_RANGE = (0.05, 24.0)
COARSE_POINTS = (121, 80)
REFINE_ROUNDS = 4
# Floor for log(0) in KL terms where a discretized Gaussian underflows.
TINY = 1e-300
# DFlash's per-position loss weight exp(-(k - 1) / 7) for blocks of 16 (the article).
DFLASH_KAPPA = 7.0
DFLASH_BLOCK = 16


def discretized_gaussian(grid: FloatArray, mu: FloatArray, sigma: FloatArray) -> FloatArray:
    """N(mu, sigma^2) evaluated on the grid and normalized, shape mu.shape + (V,)."""
    z = (grid - mu[..., None]) / sigma[..., None]
    logits = -0.5 * z * z
    logits -= logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    return np.asarray(weights / weights.sum(axis=-1, keepdims=True), dtype=np.float64)


def toy_target(grid: FloatArray = TOY_GRID) -> FloatArray:
    """The article's three-Gaussian target on the grid, shape (V,)."""
    parts = [w * discretized_gaussian(grid, np.array(m), np.array(s)) for m, s, w in TOY_MODES]
    return np.asarray(np.sum(parts, axis=0), dtype=np.float64)


def acceptance(p: FloatArray, q: FloatArray) -> FloatArray:
    """alpha = sum min(p, q) over the last axis (`specsim.speculation.distances.overlap`)."""
    return overlap(p, q)


def forward_kl(p: FloatArray, q: FloatArray) -> FloatArray:
    """KL(p || q) = sum p log(p / q) over the last axis (0 log 0 = 0)."""
    log_ratio = np.log(np.maximum(p, TINY)) - np.log(np.maximum(q, TINY))
    return np.asarray(np.where(p > 0.0, p * log_ratio, 0.0).sum(axis=-1), dtype=np.float64)


def reverse_kl(p: FloatArray, q: FloatArray) -> FloatArray:
    """KL(q || p), the mode-seeking direction."""
    return forward_kl(q, p)


def lk_likelihood(p: FloatArray, q: FloatArray) -> FloatArray:
    """LK likelihood loss -log alpha (Samarin et al. 2026)."""
    return np.asarray(-np.log(np.maximum(acceptance(p, q), TINY)), dtype=np.float64)


Objective = Callable[[FloatArray, FloatArray], FloatArray]

OBJECTIVES: dict[str, Objective] = {
    "forward_kl": forward_kl,
    "reverse_kl": reverse_kl,
    "tv": total_variation,
    "lk_likelihood": lk_likelihood,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussianFit:
    """The optimum of one objective over single-Gaussian drafters.

    Attributes:
        objective: the objective's name.
        mu, sigma: the drafter's mean and standard deviation, in grid units.
        alpha: the optimum's acceptance sum min(p, q), unitless.
        loss: the objective's value there.
    """

    objective: str
    mu: float
    sigma: float
    alpha: float
    loss: float


def _search(grid: FloatArray, loss: Callable[[FloatArray], FloatArray]
            ) -> tuple[float, float]:
    """(mu, sigma) minimizing `loss(q)` by a coarse grid, then finer grids around the best."""
    mus = np.linspace(grid.min(), grid.max(), COARSE_POINTS[0])
    log_sigmas = np.linspace(np.log(SIGMA_RANGE[0]), np.log(SIGMA_RANGE[1]), COARSE_POINTS[1])
    for _ in range(REFINE_ROUNDS + 1):
        mu_mesh, ls_mesh = np.meshgrid(mus, log_sigmas, indexing="ij")
        values = loss(discretized_gaussian(grid, mu_mesh, np.exp(ls_mesh)))
        i, j = np.unravel_index(int(np.nanargmin(values)), values.shape)  # first minimum wins
        mu_step, ls_step = mus[1] - mus[0], log_sigmas[1] - log_sigmas[0]
        best_mu, best_ls = float(mus[i]), float(log_sigmas[j])
        mus = np.linspace(best_mu - mu_step, best_mu + mu_step, 41)
        log_sigmas = np.linspace(best_ls - ls_step, best_ls + ls_step, 41)
    return best_mu, float(np.exp(best_ls))


def fit_gaussian(p: FloatArray, objective: str, grid: FloatArray = TOY_GRID,
                 eta: float = LK_ETA) -> GaussianFit:
    """Fit one Gaussian drafter to the target p on the grid by the named objective.

    Args:
        p: target distribution over the grid's tokens, shape (V,).
        objective: a name in OBJECTIVES, or "lk_hybrid".
        grid: each token's position (the Gaussian's axis), shape (V,).
        eta: the LK hybrid's eta in lambda = exp(-eta alpha).
    """
    if objective == "lk_hybrid":
        return _fit_lk_hybrid(p, grid, eta)
    try:
        loss = OBJECTIVES[objective]
    except KeyError:
        valid = ", ".join([*OBJECTIVES, "lk_hybrid"])
        raise SpecError(f"objective: unknown name {objective!r}; valid: {valid}") from None
    mu, sigma = _search(grid, lambda q: loss(p, q))
    q = discretized_gaussian(grid, np.array(mu), np.array(sigma))
    return GaussianFit(objective=objective, mu=mu, sigma=sigma, alpha=float(acceptance(p, q)),
                       loss=float(loss(p, q)))


def _hybrid_loss(p: FloatArray, lam: float) -> Callable[[FloatArray], FloatArray]:
    """q -> lambda KL(p || q) + (1 - lambda) TV(p, q) with lambda fixed."""

    def loss(q: FloatArray) -> FloatArray:
        return np.asarray(lam * forward_kl(p, q) + (1.0 - lam) * total_variation(p, q),
                          dtype=np.float64)

    return loss


def _fit_lk_hybrid(p: FloatArray, grid: FloatArray, eta: float) -> GaussianFit:
    """LK hybrid: lambda = exp(-eta sg[alpha]) held fixed per fit, iterated to a fixed point."""
    alpha = 0.0
    for _ in range(20):
        lam = float(np.exp(-eta * alpha))
        mu, sigma = _search(grid, _hybrid_loss(p, lam))
        q = discretized_gaussian(grid, np.array(mu), np.array(sigma))
        new_alpha = float(acceptance(p, q))
        if abs(new_alpha - alpha) < 1e-6:
            break
        alpha = new_alpha
    lam = float(np.exp(-eta * new_alpha))
    loss = lam * forward_kl(p, q) + (1.0 - lam) * total_variation(p, q)
    return GaussianFit(objective="lk_hybrid", mu=mu, sigma=sigma, alpha=new_alpha,
                       loss=float(loss))


def fitted_drafters(grid: FloatArray, fits: Sequence[GaussianFit]) -> FloatArray:
    """Each fit's drafter q on `grid` (one row per fit): the discretized Gaussian (mu, sigma)."""
    return np.array([discretized_gaussian(grid, np.array(f.mu), np.array(f.sigma))
                     for f in fits])


TOY_OBJECTIVES = ("forward_kl", "reverse_kl", "tv", "lk_likelihood", "lk_hybrid")


def fit_all(p: FloatArray, grid: FloatArray = TOY_GRID) -> list[GaussianFit]:
    """The optimum of every objective in TOY_OBJECTIVES."""
    return [fit_gaussian(p, name, grid) for name in TOY_OBJECTIVES]


def tau_position_weights(alphas: npt.ArrayLike) -> FloatArray:
    """d tau / d alpha_k of tau = 1 + sum_k prod_{i<=k} alpha_i, shape (gamma,).

    d tau / d alpha_k = prod_{i<k} alpha_i * (1 + sum_{j>k} prod_{k<i<=j} alpha_i), which is
    the article's (1 / alpha_k) sum_{j>=k} prod_{i<=j} alpha_i without the division.
    """
    a = np.asarray(alphas, dtype=np.float64)
    if a.ndim != 1 or a.size == 0 or np.any(~((a >= 0.0) & (a <= 1.0))):
        raise SpecError(f"alpha: need one or more acceptances in [0, 1], got {a}")
    before = np.concatenate([[1.0], np.cumprod(a)[:-1]])  # prod_{i<k} alpha_i
    tail = np.ones_like(a)  # T_k = 1 + alpha_{k+1} T_{k+1}, T_gamma = 1
    for k in range(a.size - 2, -1, -1):
        tail[k] = 1.0 + a[k + 1] * tail[k + 1]
    return np.asarray(before * tail, dtype=np.float64)


def normalized_position_weights(alphas: npt.ArrayLike) -> FloatArray:
    """Position weights divided by the first position's, shape (gamma,)."""
    w = tau_position_weights(alphas)
    return np.asarray(w / w[0], dtype=np.float64) if w[0] > 0.0 else w


def fixed_schedule(gamma: int, kappa: float = DFLASH_KAPPA) -> FloatArray:
    """A fixed per-position loss weight exp(-(k - 1) / kappa), k = 1..gamma."""
    if gamma < 1 or kappa <= 0.0:
        raise SpecError(f"schedule: need gamma >= 1 and kappa > 0, got {gamma}, {kappa}")
    return np.asarray(np.exp(-np.arange(gamma) / kappa), dtype=np.float64)

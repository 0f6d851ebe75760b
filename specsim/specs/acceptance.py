"""Acceptance models: tokens per round of a chain, the candidate-rank model of trees, and
measured acceptance profiles.

Vocabulary (used everywhere in specsim):

- ``alpha_k``: conditional acceptance of draft position k (1-based), given that positions
  1..k-1 were accepted.
- marginal (unconditional) acceptance of position k: ``prod_{i<=k} alpha_i``, the probability
  that a round accepts at least k draft tokens. vLLM's "per-position acceptance rate" is this.
- ``accepted``: accepted draft tokens in a round, 0..gamma.
- ``tau`` = tokens per round = accepted + 1 (the bonus or correction token from the target).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError

FloatArray = npt.NDArray[np.float64]

# Slack for probabilities that were summed or multiplied in floating point.
PROBABILITY_TOLERANCE = 1e-9
# Ranks of the geometric model kept for trees: a_j = alpha (1 - alpha)^j is below 1e-12 beyond
# them for any alpha >= 0.35.
GEOMETRIC_RANKS = 64


def _probabilities(values: npt.ArrayLike, field: str) -> FloatArray:
    """Return `values` as a float array, or raise SpecError if any is outside [0, 1]."""
    array = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(array)) or np.any(array < 0.0) or np.any(array > 1.0):
        bad = array[~((array >= 0.0) & (array <= 1.0))]
        raise SpecError(f"{field}: acceptance probabilities must lie in [0, 1], got {bad[:3]}")
    return array


def tau_chain(alphas: npt.ArrayLike) -> FloatArray:
    """Expected tokens per round of a chain from per-position conditional acceptance.

    Args:
        alphas: conditional acceptance alpha_k, k = 1..gamma, shape (..., gamma), unitless;
            leading axes are independent chains. gamma = 0 is allowed.

    Returns:
        tau, tokens per round, shape (...).
    """
    if np.ndim(alphas) == 0:
        raise SpecError("alphas: need an array of shape (..., gamma), got a scalar")
    return np.asarray(tau_prefixes(marginal_acceptance(alphas))[..., -1], dtype=np.float64)


def tau_prefixes(path_probability: npt.ArrayLike) -> FloatArray:
    """Tokens per round of the first n drafted nodes, n = 0..N, of a chain or a tree.

    tau = 1 + sum over drafted nodes of P(the whole root-to-node path is accepted) (Leviathan
    et al. 2023 for chains, Miao et al. 2023 for trees; the seed). For a chain the path
    probabilities are the marginal acceptances; for nodes in best-first order each prefix is
    the best tree of its size.

    Args:
        path_probability: P(path to node i accepted), shape (..., N), unitless.

    Returns:
        tau of the first 0..N nodes, shape (..., N + 1).
    """
    p = np.asarray(path_probability, dtype=np.float64)
    none = np.zeros(p.shape[:-1] + (1,))
    return np.asarray(1.0 + np.concatenate([none, np.cumsum(p, axis=-1)], axis=-1),
                      dtype=np.float64)


def tau_constant(alpha: npt.ArrayLike, gamma: npt.ArrayLike) -> FloatArray:
    """Tokens per round of a chain whose every position is accepted with probability alpha.

    Args:
        alpha: acceptance probability, any shape, unitless.
        gamma: draft length (non-negative integer), broadcastable with alpha.

    Returns:
        tau = (1 - alpha^(gamma+1)) / (1 - alpha), and gamma + 1 at alpha = 1; broadcast shape.
    """
    a = _probabilities(alpha, "alpha")
    g = np.asarray(gamma)
    if not np.issubdtype(g.dtype, np.integer) or np.any(g < 0):
        raise SpecError(f"gamma: draft length must be a non-negative integer, got {g}")
    terms = (g + 1).astype(np.float64)
    # Truncated geometric series; -expm1((g+1) log a) = 1 - a^(g+1) without cancellation
    with np.errstate(divide="ignore", invalid="ignore"):
        series = -np.expm1(terms * np.log(a)) / (1.0 - a)
    return np.asarray(np.where(a == 1.0, terms, series), dtype=np.float64)


def rank_acceptance_geometric(alpha: npt.ArrayLike, num_ranks: int) -> FloatArray:
    """Candidate-rank acceptance a_j = alpha (1 - alpha)^j, j = 0..num_ranks-1 (the seed's model).

    Args:
        alpha: acceptance of the drafter's top candidate, any shape, unitless.
        num_ranks: number of candidate ranks kept per node (>= 0).

    Returns:
        a_j, shape (*alpha.shape, num_ranks); the ranks are mutually exclusive events.
    """
    a = _probabilities(alpha, "alpha")
    if num_ranks < 0:
        raise SpecError(f"num_ranks: must be >= 0, got {num_ranks}")
    j = np.arange(num_ranks)
    return np.asarray(a[..., None] * (1.0 - a[..., None]) ** j, dtype=np.float64)


def speedup_constant_cost(
    tau: npt.ArrayLike, draft_passes: npt.ArrayLike, draft_cost: npt.ArrayLike
) -> FloatArray:
    """Speedup over plain decoding when verification costs one decoding step (the seed).

    Args:
        tau: tokens per round, any shape.
        draft_passes: drafter forward passes per round (gamma if autoregressive, 1 if
            parallel), broadcastable.
        draft_cost: cost c of one drafter pass relative to one target pass, broadcastable.

    Returns:
        speedup = tau / (draft_passes * c + 1), unitless, broadcast shape.
    """
    t = np.asarray(tau, dtype=np.float64)
    n = np.asarray(draft_passes, dtype=np.float64)
    c = np.asarray(draft_cost, dtype=np.float64)
    if np.any(n < 0) or np.any(c < 0):
        raise SpecError(f"draft_passes, draft_cost: must be >= 0, got {n}, {c}")
    # Seed, "How many tokens do we get?": speedup = tau / (n_draft c + 1)
    return np.asarray(t / (n * c + 1.0), dtype=np.float64)


def marginal_acceptance(alphas: npt.ArrayLike) -> FloatArray:
    """Per-position marginal acceptance from conditional acceptance.

    Args:
        alphas: conditional acceptance alpha_k, shape (..., gamma).

    Returns:
        P(position k accepted) = prod_{i<=k} alpha_i, shape (..., gamma); for a parallel drafter
        this is the rate at which position k of its block survives verification.
    """
    alpha = _probabilities(alphas, "alphas")
    return np.asarray(np.cumprod(alpha, axis=-1), dtype=np.float64)


def conditional_acceptance(marginals: npt.ArrayLike) -> FloatArray:
    """Conditional acceptance alpha_k = m_k / m_{k-1} (m_0 = 1) from marginal acceptance.

    Args:
        marginals: P(position k accepted), shape (..., gamma), non-increasing along the last
            axis.

    Returns:
        alpha_k, shape (..., gamma). Where m_{k-1} = 0 the position is never reached and
        alpha_k is reported as 0 (it adds nothing to tau).
    """
    m = _probabilities(marginals, "marginals")
    if m.ndim == 0:
        raise SpecError("marginals: need an array of shape (..., gamma), got a scalar")
    previous = np.concatenate([np.ones_like(m[..., :1]), m[..., :-1]], axis=-1)
    if np.any(m > previous + PROBABILITY_TOLERANCE):
        raise SpecError(f"marginals: must be non-increasing along the draft, got {m}")
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(previous > 0.0, m / previous, 0.0)
    return np.asarray(np.clip(alpha, 0.0, 1.0), dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptanceProfile:
    """Measured or assumed acceptance of a drafter against a target.

    Attributes:
        position_alphas: conditional acceptance alpha_k of chain positions k = 1..gamma_max,
            shape (gamma_max,), unitless; empty if unknown.
        rank_acceptance: a_j, probability that the target's token is the drafter's j-th
            candidate at a node (j = 0 best), shape (num_ranks,), sum <= 1; empty if unknown.
        source: where the numbers come from (file, paper, measurement).
        measured_positions: chain positions the numbers were measured over (deeper ones are
            extrapolated); None when alpha is assumed for every position (option --alpha).
        ranks_from_chain: rank_acceptance was derived from chain data (the geometric model of
            the first position's alpha), not measured on trees.
        measured_on: "chain", "tree" (a tree's tau read as a chain's: optimistic) or "proxy"
            (another drafter's or pair's number).
        task: the kind of prompts it was measured on, as a workload's `task` names it
            ("chat" for MT-Bench, "code", "math", ...); "" where not stated.
        measured_with: the Hub id of the drafter checkpoint it was measured with (a workload's
            entries; "" where not stated).
        provenance: how the acceptance was chosen for the drafter it is used for, one line
            (`Workload.profile_for`); "" where it was given directly.
    """

    position_alphas: tuple[float, ...] = ()
    rank_acceptance: tuple[float, ...] = ()
    source: str
    measured_positions: int | None = None
    ranks_from_chain: bool = False
    measured_on: str = "chain"
    task: str = ""
    measured_with: str = ""
    provenance: str = ""

    @property
    def is_proxy(self) -> bool:
        """Another drafter's or pair's number stands for this drafter's."""
        return self.measured_on == "proxy"

    def __post_init__(self) -> None:
        alphas = _probabilities(np.asarray(self.position_alphas, dtype=np.float64).ravel(),
                                f"{self.source}: position_alphas")
        ranks = _probabilities(np.asarray(self.rank_acceptance, dtype=np.float64).ravel(),
                               f"{self.source}: rank_acceptance")
        if alphas.size == 0 and ranks.size == 0:
            raise SpecError(f"{self.source}: need position_alphas or rank_acceptance, got neither")
        if ranks.sum() > 1.0 + PROBABILITY_TOLERANCE:
            raise SpecError(
                f"{self.source}: rank_acceptance must sum to <= 1 (mutually exclusive ranks), "
                f"got sum {ranks.sum():.6g}"
            )
        object.__setattr__(self, "position_alphas", tuple(float(a) for a in alphas))
        object.__setattr__(self, "rank_acceptance", tuple(float(a) for a in ranks))

    def alphas(self, gamma: int) -> FloatArray:
        """Conditional acceptance for draft positions 1..gamma, shape (gamma,).

        Positions beyond the measured ones repeat the last measured alpha (acceptance is
        assumed to level off, not to drop further). Without position data, every position uses
        the top-candidate acceptance a_0, as a chain of the rank model would.
        """
        if gamma < 0:
            raise SpecError(f"{self.source}: gamma must be >= 0, got {gamma}")
        measured = np.asarray(self.position_alphas or self.rank_acceptance[:1], dtype=np.float64)
        if gamma <= measured.size:
            return measured[:gamma].copy()
        padding = np.full(gamma - measured.size, measured[-1])
        return np.concatenate([measured, padding])

    def tau(self, gamma: int) -> float:
        """Tokens per round of a chain of `gamma` draft tokens under this profile."""
        return float(tau_chain(self.alphas(gamma)))

    def ranks(self, num_ranks: int) -> FloatArray:
        """Rank acceptance a_0..a_{num_ranks-1}, shape (num_ranks,); unmeasured ranks get 0."""
        if not self.rank_acceptance:
            raise SpecError(f"{self.source}: rank_acceptance is empty, cannot build a tree")
        measured = np.asarray(self.rank_acceptance[:num_ranks], dtype=np.float64)
        return np.concatenate([measured, np.zeros(max(0, num_ranks - measured.size))])


def constant_profile(alpha: float, *, source: str = "option --alpha") -> AcceptanceProfile:
    """The seed's idealized drafter: alpha at every chain position, a_j = alpha (1 - alpha)^j
    for the first GEOMETRIC_RANKS candidate ranks of a tree node. `source` names where alpha
    came from, in errors and in the profile."""
    if not (math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise SpecError(f"{source}: must be in [0, 1], got {alpha}")
    ranks = rank_acceptance_geometric(alpha, GEOMETRIC_RANKS)
    return AcceptanceProfile(position_alphas=(alpha,), rank_acceptance=tuple(ranks),
                             source=f"{source} {alpha:g} (a_j = alpha (1 - alpha)^j for trees)")


def alpha_from_tau(tau: npt.ArrayLike, gamma: npt.ArrayLike) -> FloatArray:
    """The constant alpha whose chain of gamma tokens yields `tau` tokens per round.

    Inverts tau = (1 - alpha^(gamma+1)) / (1 - alpha), which rises monotonically from 1 at
    alpha = 0 to gamma + 1 at alpha = 1, by bisection (vectorized). Used to turn a published
    mean acceptance length into a per-position acceptance.
    """
    t = np.asarray(tau, dtype=np.float64)
    g = np.asarray(gamma)
    integer = np.issubdtype(g.dtype, np.integer)
    if not integer or np.any(g < 1) or np.any(t < 1) or np.any(t > g + 1):
        raise SpecError(f"tau must be in [1, gamma + 1] with gamma >= 1, got tau={t}, gamma={g}")
    lo, hi = np.zeros(np.broadcast(t, g).shape), np.ones(np.broadcast(t, g).shape)
    for _ in range(60):  # 2^-60: far below any published precision
        mid = 0.5 * (lo + hi)
        below = tau_constant(mid, g) < t
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.asarray(0.5 * (lo + hi), dtype=np.float64)

"""Verification rules computed exactly from given distributions, plus samplers of whole rounds.

p and q are probability vectors over a vocabulary of V tokens: p from the target, q from the
drafter. Chains use per-position arrays: p_seq [gamma + 1, V] (the last row is the target's
distribution after the whole draft, used for the bonus token) and q_seq [gamma, V]. Each
position's distributions are fixed (context-independent), as in the seed's toy example.

Exact quantities: `tokenwise_acceptance`, `total_variation`, `tokenwise_expected_accepted`,
`block_expected_accepted`, `gumbel_match_probability` (+ bound), `gumbel_expected_accepted`.
Samplers: `VERIFICATION_RULES[name](rng, p_seq, q_seq, num_rounds) -> RoundBatch`; the seeded
Monte Carlo over them is `specsim.speculation.simulate` (`acceptance from-probs --check`).
For distributions along many target rollouts (large vocabularies, top-k data) use
`specsim.speculation.distributions`, which these exact rules check in the tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError
from specsim.specs.acceptance import tau_chain
from specsim.speculation import distances

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

__all__ = [
    "EXPECTED_ACCEPTED", "VERIFICATION_RULES", "RoundBatch", "block_expected_accepted",
    "block_rounds", "gumbel_expected_accepted", "gumbel_match_lower_bound",
    "gumbel_match_probability", "gumbel_rounds", "independent_match_probability",
    "tokenwise_acceptance", "tokenwise_expected_accepted", "tokenwise_rounds",
    "total_variation", "verification_rule",
]

# Probability vectors must sum to one within this slack.
SUM_TOLERANCE = 1e-6
# Exact enumeration of block verification visits V**gamma drafts; beyond this it is too slow.
MAX_ENUMERATED_DRAFTS = 2_000_000


def _distributions(values: npt.ArrayLike, field: str, ndim: int | None = None) -> FloatArray:
    """Return probability vectors along the last axis, or raise SpecError naming `field`."""
    array = np.asarray(values, dtype=np.float64)
    if ndim is not None and array.ndim != ndim:
        raise SpecError(f"{field}: expected {ndim} dimensions, got shape {array.shape}")
    if array.ndim == 0 or array.shape[-1] == 0:
        raise SpecError(f"{field}: need probability vectors over V >= 1 tokens, got {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array < 0.0):
        raise SpecError(f"{field}: probabilities must be finite and >= 0")
    sums = array.sum(axis=-1)
    if np.any(np.abs(sums - 1.0) > SUM_TOLERANCE):
        raise SpecError(f"{field}: each distribution must sum to 1, got sums {np.ravel(sums)[:4]}")
    return array


def _chain(
    p_seq: npt.ArrayLike, q_seq: npt.ArrayLike, bonus: bool
) -> tuple[FloatArray, FloatArray]:
    """Validate a chain's distributions: q [gamma, V] and p [gamma + 1, V] (or [gamma, V])."""
    p = _distributions(p_seq, "p_seq", ndim=2)
    q = _distributions(q_seq, "q_seq", ndim=2) if np.size(q_seq) else np.zeros((0, p.shape[1]))
    gamma = q.shape[0]
    allowed = (gamma + 1,) if bonus else (gamma, gamma + 1)
    if p.shape[0] not in allowed or p.shape[1] != q.shape[1]:
        raise SpecError(
            f"p_seq: shape {p.shape} does not fit q_seq {q.shape} (need gamma + 1 rows)"
        )
    return p, q


def total_variation(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """Total variation distance TV(p, q) = 1/2 sum |p - q| over the last axis, shape (...).

    Validates p and q as distributions, then `specsim.speculation.distances.total_variation`.
    """
    return distances.total_variation(_distributions(p, "p"), _distributions(q, "q"))


def tokenwise_acceptance(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """Acceptance rate of speculative sampling, sum min(p, q) = 1 - TV(p, q), shape (...).

    Validates p and q as distributions, then `specsim.speculation.distances.overlap`.
    """
    return distances.overlap(_distributions(p, "p"), _distributions(q, "q"))


def tokenwise_expected_accepted(p_seq: npt.ArrayLike, q_seq: npt.ArrayLike) -> float:
    """Expected accepted draft tokens per round of token-wise speculative sampling.

    Args:
        p_seq: target distributions per position, shape (gamma [+ 1], V).
        q_seq: drafter distributions per position, shape (gamma, V).

    Returns:
        sum_k prod_{i<=k} alpha_i with alpha_i = sum min(p_i, q_i), in tokens (0..gamma).
    """
    p, q = _chain(p_seq, q_seq, bonus=False)
    gamma = q.shape[0]
    alphas = distances.overlap(p[:gamma], q).clip(0.0, 1.0)
    return float(tau_chain(alphas)) - 1.0


def _running_weights(p_x: FloatArray, q_x: FloatArray) -> FloatArray:
    """Block verification's weights w_0..w_gamma per draft, shape (R, gamma + 1).

    Args:
        p_x, q_x: target and drafter probability of each drafted token, shape (R, gamma).
    """
    rounds, gamma = q_x.shape
    w = np.ones((rounds, gamma + 1))
    # Sun et al. 2024: w_k = min(1, w_{k-1} p_k(x_k) / q_k(x_k)), w_0 = 1
    for k in range(gamma):
        w[:, k + 1] = np.minimum(1.0, w[:, k] * p_x[:, k] / q_x[:, k])
    return w


def _block_survival(w: FloatArray, p: FloatArray, q: FloatArray) -> FloatArray:
    """Probability that the prefix of length k survives, k = 1..gamma, shape (R, gamma).

    Args:
        w: running weights w_0..w_gamma, shape (R, gamma + 1).
        p: target distributions, shape (gamma + 1, V); q: drafter distributions, (gamma, V).
    """
    rounds, gamma = w.shape[0], q.shape[0]
    q_next = np.concatenate([q[1:], np.zeros((1, q.shape[1]))])  # q_{gamma+1} = 0
    mass = np.empty((rounds, gamma))
    for k in range(1, gamma + 1):
        # residual mass after prefix k: sum_x (w_k p_{k+1}(x) - q_{k+1}(x))_+
        residual = w[:, k, None] * p[k][None, :] - q_next[k - 1][None, :]
        mass[:, k - 1] = np.maximum(residual, 0.0).sum(axis=-1)
    w_k = w[:, 1:]
    # Sun et al. 2024: survival = mass / (mass + 1 - w_k); a prefix with w_k = 1 always survives
    with np.errstate(divide="ignore", invalid="ignore"):
        survival = np.where(w_k < 1.0, mass / (mass + 1.0 - w_k), 1.0)
    return np.asarray(survival, dtype=np.float64)


def _longest_survivor_pmf(survival: FloatArray) -> FloatArray:
    """P(accepted = n), n = 0..gamma, when each prefix survives independently, shape (R, gamma+1).

    The accepted length is the longest surviving prefix: n survives, all longer ones do not.
    """
    rounds, gamma = survival.shape
    fail_after = np.ones((rounds, gamma + 1))  # prod_{j > n} (1 - s_j)
    for n in range(gamma - 1, -1, -1):
        fail_after[:, n] = fail_after[:, n + 1] * (1.0 - survival[:, n])
    survives = np.concatenate([np.ones((rounds, 1)), survival], axis=-1)  # empty prefix: always
    return np.asarray(survives * fail_after, dtype=np.float64)


def block_expected_accepted(p_seq: npt.ArrayLike, q_seq: npt.ArrayLike) -> float:
    """Expected accepted draft tokens per round of block verification, by exact enumeration.

    Enumerates all V**gamma drafts (raises SpecError above MAX_ENUMERATED_DRAFTS).

    Args:
        p_seq: target distributions per position, shape (gamma + 1, V).
        q_seq: drafter distributions per position, shape (gamma, V).

    Returns:
        E[accepted draft tokens] in tokens (0..gamma).
    """
    p, q = _chain(p_seq, q_seq, bonus=True)
    gamma, vocab = q.shape
    if gamma == 0:
        return 0.0
    if vocab**gamma > MAX_ENUMERATED_DRAFTS:
        raise SpecError(
            f"q_seq: exact block verification enumerates V**gamma = {vocab}**{gamma} drafts, "
            f"above the limit {MAX_ENUMERATED_DRAFTS}; use the Monte Carlo simulator"
        )
    drafts = np.array(list(itertools.product(range(vocab), repeat=gamma)), dtype=np.int64)
    positions = np.arange(gamma)
    q_x = q[positions, drafts]  # (R, gamma)
    draft_probability = q_x.prod(axis=-1)
    keep = draft_probability > 0.0  # drafts the drafter never proposes carry no weight
    w = _running_weights(p[positions, drafts[keep]], q_x[keep])
    pmf = _longest_survivor_pmf(_block_survival(w, p, q))
    expected_given_draft = pmf @ np.arange(gamma + 1)
    return float(draft_probability[keep] @ expected_given_draft)


def gumbel_match_probability(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """Probability that Gumbel-max samples of p and q with shared noise coincide.

    Args:
        p, q: probability vectors, shape (V,).

    Returns:
        sum_j 1 / sum_i max(p_i / p_j, q_i / q_j) over tokens j with p_j > 0 and q_j > 0.
    """
    p_, q_ = _distributions(p, "p", ndim=1), _distributions(q, "q", ndim=1)
    both = (p_ > 0.0) & (q_ > 0.0)
    # Split the inner sum by the likelihood ratio r_i = p_i / q_i: for r_i >= r_j the max is
    # p_i / p_j, else q_i / q_j. Sorting by r makes both parts prefix sums, O(V log V).
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q_ > 0.0, p_ / q_, np.inf)
    order = np.argsort(ratio, kind="stable")
    sorted_ratio = ratio[order]
    q_below = np.concatenate([[0.0], np.cumsum(q_[order])])  # q mass of ratios below position
    p_below = np.concatenate([[0.0], np.cumsum(p_[order])])
    j = np.flatnonzero(both)
    first_not_below = np.searchsorted(sorted_ratio, ratio[j], side="left")
    p_at_or_above = p_below[-1] - p_below[first_not_below]
    q_strictly_below = q_below[first_not_below]
    # Daliri et al. 2024: P[match] = sum_j 1 / sum_i max(p_i/p_j, q_i/q_j)
    inner = p_at_or_above / p_[j] + q_strictly_below / q_[j]
    return float(np.sum(1.0 / inner))


def gumbel_match_lower_bound(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """Lower bound (1 - TV) / (1 + TV) on the shared-noise match probability, shape (...)."""
    tv = total_variation(p, q)
    return np.asarray((1.0 - tv) / (1.0 + tv), dtype=np.float64)


def independent_match_probability(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """Probability that independent samples of p and q coincide, sum p q, shape (...)."""
    p_, q_ = _distributions(p, "p"), _distributions(q, "q")
    return np.asarray((p_ * q_).sum(axis=-1), dtype=np.float64)


def gumbel_expected_accepted(p_seq: npt.ArrayLike, q_seq: npt.ArrayLike) -> float:
    """Expected accepted draft tokens per round of Gumbel coupling (fresh noise per position).

    Returns:
        sum_k prod_{i<=k} m_i with m_i the shared-noise match probability at position i.
    """
    p, q = _chain(p_seq, q_seq, bonus=False)
    matches = np.array([gumbel_match_probability(p[k], q[k]) for k in range(q.shape[0])])
    return float(tau_chain(matches.clip(0.0, 1.0))) - 1.0


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RoundBatch:
    """Outcome of R independent draft-and-verify rounds.

    Attributes:
        accepted: accepted draft tokens per round, shape (R,), values 0..gamma.
        emitted: tokens emitted per round, shape (R, gamma + 1); row r holds accepted[r] + 1
            token ids followed by -1 padding.
    """

    accepted: IntArray
    emitted: IntArray

    @property
    def num_rounds(self) -> int:
        """Number of rounds R."""
        return int(self.accepted.shape[0])

    @property
    def first_token(self) -> IntArray:
        """First emitted token of each round, shape (R,)."""
        return self.emitted[:, 0]

    @property
    def tokens_per_round(self) -> IntArray:
        """Tokens emitted per round (accepted + 1), shape (R,)."""
        return self.accepted + 1


def _sample_rows(rng: np.random.Generator, probs: FloatArray) -> IntArray:
    """One categorical sample per row of (unnormalized, non-negative) weights [R, V]."""
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[0]) * cdf[:, -1]
    index = (cdf <= u[:, None]).sum(axis=-1)
    return np.asarray(np.minimum(index, probs.shape[-1] - 1), dtype=np.int64)


def _sample_drafts(rng: np.random.Generator, q: FloatArray, num_rounds: int) -> IntArray:
    """Draft tokens drawn independently per position from q [gamma, V], shape (R, gamma)."""
    gamma, vocab = q.shape
    drafts = np.empty((num_rounds, gamma), dtype=np.int64)
    for k in range(gamma):
        cdf = np.cumsum(q[k])
        u = rng.random(num_rounds) * cdf[-1]
        drafts[:, k] = np.minimum(np.searchsorted(cdf, u, side="right"), vocab - 1)
    return drafts


def _emit(drafts: IntArray, accepted: IntArray, next_token: IntArray) -> IntArray:
    """Emitted tokens per round: drafts[:n] then next_token, padded with -1, (R, gamma + 1)."""
    rounds, gamma = drafts.shape
    emitted = np.full((rounds, gamma + 1), -1, dtype=np.int64)
    kept = np.arange(gamma)[None, :] < accepted[:, None]
    emitted[:, :gamma] = np.where(kept, drafts, -1)
    emitted[np.arange(rounds), accepted] = next_token
    return emitted


def _first_false(flags: npt.NDArray[np.bool_]) -> IntArray:
    """Index of the first False per row of [R, gamma] flags (gamma if all True)."""
    padded = np.concatenate([flags, np.zeros((flags.shape[0], 1), dtype=bool)], axis=-1)
    return np.asarray(np.argmin(padded, axis=-1), dtype=np.int64)


def tokenwise_rounds(
    rng: np.random.Generator, p_seq: npt.ArrayLike, q_seq: npt.ArrayLike, num_rounds: int
) -> RoundBatch:
    """Sample rounds of token-wise speculative sampling (Leviathan et al. 2023)."""
    p, q = _chain(p_seq, q_seq, bonus=True)
    gamma, vocab = q.shape
    drafts = _sample_drafts(rng, q, num_rounds)
    positions = np.arange(gamma)
    ratio = p[positions, drafts] / q[positions, drafts]
    accepted = _first_false(rng.random((num_rounds, gamma)) < np.minimum(1.0, ratio))
    # residual after a rejection at position n: (p_n - q_n)_+; after the full draft q = 0
    q_padded = np.concatenate([q, np.zeros((1, vocab))])
    residual = np.maximum(p - q_padded, 0.0)
    empty = residual.sum(axis=-1) <= 0.0  # p_n = q_n: a rejection there has probability 0
    residual[empty] = p[empty]
    next_token = _sample_rows(rng, residual[accepted])
    return RoundBatch(accepted=accepted, emitted=_emit(drafts, accepted, next_token))


def block_rounds(
    rng: np.random.Generator, p_seq: npt.ArrayLike, q_seq: npt.ArrayLike, num_rounds: int
) -> RoundBatch:
    """Sample rounds of block verification (Sun et al. 2024)."""
    p, q = _chain(p_seq, q_seq, bonus=True)
    gamma, vocab = q.shape
    drafts = _sample_drafts(rng, q, num_rounds)
    positions = np.arange(gamma)
    w = _running_weights(p[positions, drafts], q[positions, drafts])
    survived = rng.random((num_rounds, gamma)) <= _block_survival(w, p, q)
    lengths = np.where(survived, positions + 1, 0)
    accepted = lengths.max(axis=-1, initial=0).astype(np.int64)  # longest surviving prefix
    q_padded = np.concatenate([q, np.zeros((1, vocab))])
    w_n = w[np.arange(num_rounds), accepted]
    # Sun et al. 2024: next token from the normalized residual (w_n p_{n+1} - q_{n+1})_+
    residual = np.maximum(w_n[:, None] * p[accepted] - q_padded[accepted], 0.0)
    empty = residual.sum(axis=-1) <= 0.0  # zero-probability event in exact arithmetic
    residual[empty] = p[accepted[empty]]
    next_token = _sample_rows(rng, residual)
    return RoundBatch(accepted=accepted, emitted=_emit(drafts, accepted, next_token))


def gumbel_rounds(
    rng: np.random.Generator, p_seq: npt.ArrayLike, q_seq: npt.ArrayLike, num_rounds: int
) -> RoundBatch:
    """Sample rounds of Gumbel coupling: drafter and target share the noise (Daliri et al. 2024)."""
    p, q = _chain(p_seq, q_seq, bonus=True)
    gamma = q.shape[0]
    noise = rng.gumbel(size=(num_rounds, gamma + 1, p.shape[1]))
    with np.errstate(divide="ignore"):
        log_p, log_q = np.log(p), np.log(q)
    drafts = np.argmax(log_q[None] + noise[:, :gamma], axis=-1).astype(np.int64)
    target = np.argmax(log_p[None] + noise, axis=-1).astype(np.int64)  # (R, gamma + 1)
    accepted = _first_false(drafts == target[:, :gamma])
    next_token = target[np.arange(num_rounds), accepted]
    return RoundBatch(accepted=accepted, emitted=_emit(drafts, accepted, next_token))


RoundSampler = Callable[[np.random.Generator, npt.ArrayLike, npt.ArrayLike, int], RoundBatch]

VERIFICATION_RULES: dict[str, RoundSampler] = {
    "tokenwise": tokenwise_rounds,
    "block": block_rounds,
    "gumbel": gumbel_rounds,
}

EXPECTED_ACCEPTED: dict[str, Callable[[npt.ArrayLike, npt.ArrayLike], float]] = {
    "tokenwise": tokenwise_expected_accepted,
    "block": block_expected_accepted,
    "gumbel": gumbel_expected_accepted,
}


def verification_rule(name: str) -> RoundSampler:
    """Look up a round sampler by name; SpecError lists the valid names."""
    try:
        return VERIFICATION_RULES[name]
    except KeyError:
        valid = ", ".join(sorted(VERIFICATION_RULES))
        raise SpecError(f"verification rule: unknown name {name!r}; valid: {valid}") from None

"""Acceptance from a drafter's and a target's next-token probabilities along target rollouts.

Input: for R target rollouts of T positions, the target's distribution p[r, t] and the
drafter's q[r, t] (full, or top-k with the remaining mass; file layout in
`specsim.specs.prob_arrays`). Position t = 1..T of a rollout is draft position k = t of
a round that starts at the rollout's beginning.

- Per-position acceptance alpha[r, k] = sum_x min(p, q) = 1 - TV(p, q) (Leviathan et al.).
  With top-k data only the ids both lists name count: a lower bound, short by at most the two
  remaining masses.
- Token-wise verification: the probability that a round accepts at least k draft tokens is
  prod_{i<=k} alpha[r, i] when each position's distributions do not depend on which draft
  tokens were accepted (the article's tau formula); exact per rollout under that assumption.
- Block verification (Sun et al.): a round accepts at least k tokens with probability
  E_{x~q}[w_k], and by importance weighting E_{x~q}[w_k] = E_{x~p}[min(1, r_1, ..., r_k)] with
  r_j = prod_{i<=j} q_i(x_i) / p_i(x_i) (the BV-loss identity). Along a target rollout with its
  sampled tokens, integrating the last token over the vocabulary gives the per-rollout term
  sum_x min(m_{k-1} p_k(x), r_{k-1} q_k(x)), m_{k-1} = min(1, r_1, ..., r_{k-1}); its mean over
  rollouts is unbiased for the true value and needs the target's sampled `tokens`.
- tau(gamma) = 1 + sum_{k<=gamma} survival_k for both rules; the survival curve (one per
  rollout) gives the spread, and its mean gives a chain profile whose conditional acceptance
  alpha_k = s_k / s_{k-1} reproduces the mean tau exactly in `tau_chain`.

Exact small-vocabulary rules and round samplers: `specsim.speculation.verification`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError, parameter_error
from specsim.specs.acceptance import AcceptanceProfile, rank_acceptance_geometric
from specsim.specs.prob_arrays import ProbArrays
from specsim.speculation.distances import overlap

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

VERIFICATIONS = ("tokenwise", "block")
# Ranks kept for trees built from the first position's alpha (as workloads do).
GEOMETRIC_RANKS = 64
# Top-k matching compares all id pairs up to this list product, else sorts; pair comparisons
# are done this many at a time.
MAX_PAIRWISE = 4096
PAIRWISE_CHUNK = 8_000_000


def match_topk(p_ids: IntArray, q_ids: IntArray) -> IntArray:
    """For each id the target lists, the slot of the same id in the drafter's list, or -1.

    Args:
        p_ids: target ids, shape (..., k_p); q_ids: drafter ids, shape (..., k_q), distinct
            within a row.

    Returns:
        slot into the last axis of q_ids, shape (..., k_p).
    """
    k_p, k_q = p_ids.shape[-1], q_ids.shape[-1]
    if k_p * k_q > MAX_PAIRWISE:
        return _match_sorted(p_ids, q_ids)
    rows = int(np.prod(p_ids.shape[:-1]))
    flat_p, flat_q = p_ids.reshape(rows, k_p), q_ids.reshape(rows, k_q)
    slots = np.empty((rows, k_p), dtype=np.int64)
    step = max(1, PAIRWISE_CHUNK // (k_p * k_q))
    for start in range(0, rows, step):
        same = flat_p[start:start + step, :, None] == flat_q[start:start + step, None, :]
        slots[start:start + step] = np.where(same.any(axis=-1), same.argmax(axis=-1), -1)
    return slots.reshape(p_ids.shape)


def _match_sorted(p_ids: IntArray, q_ids: IntArray) -> IntArray:
    """`match_topk` for long lists: one global sort instead of k_p x k_q comparisons."""
    rows = int(np.prod(p_ids.shape[:-1]))
    k_p, k_q = p_ids.shape[-1], q_ids.shape[-1]
    span = int(max(p_ids.max(initial=0), q_ids.max(initial=0))) + 1
    offset = np.arange(rows, dtype=np.int64)[:, None] * span
    # row r's ids become keys in [r span, (r + 1) span): one sorted array for all rows
    q_keys = q_ids.reshape(rows, k_q) + offset
    order = np.argsort(q_keys, axis=-1)
    sorted_keys = np.take_along_axis(q_keys, order, axis=-1).ravel()
    p_keys = (p_ids.reshape(rows, k_p) + offset).ravel()
    where = np.minimum(np.searchsorted(sorted_keys, p_keys), sorted_keys.size - 1)
    found = sorted_keys[where] == p_keys
    slot = order.ravel()[where]
    return np.where(found, slot, -1).reshape(p_ids.shape).astype(np.int64)


def overlap_topk(match: IntArray, p_w: FloatArray, q_w: FloatArray) -> FloatArray:
    """sum over ids listed by both of min(p_w(x), q_w(x)), weights already applied, (...).

    Args:
        match: `match_topk` of the two id lists, shape (..., k_p).
        p_w: target (weighted) probabilities, shape (..., k_p).
        q_w: drafter (weighted) probabilities, shape (..., k_q).
    """
    partner = np.take_along_axis(q_w, np.maximum(match, 0), axis=-1)
    # An unmatched id contributes min(0, partner) = 0.
    return overlap(np.where(match >= 0, p_w, 0.0), partner)


def _match(target: ProbArrays, draft: ProbArrays) -> IntArray:
    assert target.topk_ids is not None and draft.topk_ids is not None
    return match_topk(target.topk_ids, draft.topk_ids)


def position_acceptance(target: ProbArrays, draft: ProbArrays,
                        match: IntArray | None = None) -> FloatArray:
    """alpha[r, k] = 1 - TV(p[r, k], q[r, k]) along the rollouts, shape (R, T).

    Args:
        match: top-k data only, `match_topk` of the two id lists if already computed.
    """
    if not target.is_topk:
        assert target.probs is not None and draft.probs is not None
        return overlap(target.probs, draft.probs)
    assert target.topk_probs is not None and draft.topk_probs is not None
    slots = _match(target, draft) if match is None else match
    return overlap_topk(slots, target.topk_probs, draft.topk_probs).clip(0.0, 1.0)


def tokenwise_survival(alpha: FloatArray) -> FloatArray:
    """P(a round accepts >= k draft tokens) = prod_{i<=k} alpha_i per rollout, shape (R, T)."""
    return np.asarray(np.cumprod(alpha, axis=-1), dtype=np.float64)


def _token_probability(model: ProbArrays, tokens: IntArray, unlisted: str) -> FloatArray:
    """The model's probability of the rollout's token at each position, shape (R, T).

    Top-k data: a token outside the list gets 0 (unlisted="zero") or the remaining mass, an
    upper bound on its probability (unlisted="rest").
    """
    if model.probs is not None:
        return np.take_along_axis(model.probs, tokens[..., None], axis=-1)[..., 0]
    assert model.topk_ids is not None and model.topk_probs is not None
    assert model.rest is not None
    hit = model.topk_ids == tokens[..., None]
    listed = np.where(hit, model.topk_probs, 0.0).sum(axis=-1)
    fallback = model.rest if unlisted == "rest" else np.zeros_like(model.rest)
    return np.where(hit.any(axis=-1), listed, fallback)


def _prefix_weights(ratio: FloatArray) -> tuple[FloatArray, FloatArray]:
    """r_{k-1} and m_{k-1} = min(1, r_1..r_{k-1}) for k = 1..T, each shape (R, T).

    Args:
        ratio: q_i(x_i) / p_i(x_i) along the rollout's tokens, shape (R, T).
    """
    r = np.cumprod(ratio, axis=-1)
    m = np.minimum.accumulate(np.minimum(r, 1.0), axis=-1)
    ones = np.ones((ratio.shape[0], 1))
    return (np.concatenate([ones, r[:, :-1]], axis=-1),
            np.concatenate([ones, m[:, :-1]], axis=-1))


def block_survival(target: ProbArrays, draft: ProbArrays,
                   match: IntArray | None = None) -> FloatArray:
    """Per-rollout term of P(block verification accepts >= k tokens), shape (R, T).

    sum_x min(m_{k-1} p_k(x), r_{k-1} q_k(x)) along the target's sampled tokens (module
    docstring); its mean over rollouts is the survival curve. Top-k data gives a lower bound.
    """
    if target.tokens is None:
        raise SpecError(f"{target.path}: array 'tokens' is missing; block verification needs "
                        "the token the target sampled at each position")
    p_x = _token_probability(target, target.tokens, unlisted="rest")
    q_x = _token_probability(draft, target.tokens, unlisted="zero")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p_x > 0.0, q_x / p_x, 0.0)
    r_prev, m_prev = _prefix_weights(ratio)
    if not target.is_topk:
        assert target.probs is not None and draft.probs is not None
        return overlap(m_prev[..., None] * target.probs, r_prev[..., None] * draft.probs)
    assert target.topk_probs is not None and draft.topk_probs is not None
    slots = _match(target, draft) if match is None else match
    return overlap_topk(slots, m_prev[..., None] * target.topk_probs,
                        r_prev[..., None] * draft.topk_probs)


def survival(target: ProbArrays, draft: ProbArrays, verification: str,
             match: IntArray | None = None) -> FloatArray:
    """Per-rollout survival curve of the chosen rule, shape (R, T)."""
    if verification == "tokenwise":
        return tokenwise_survival(position_acceptance(target, draft, match))
    if verification == "block":
        return block_survival(target, draft, match)
    raise parameter_error("verification", f"unknown rule {verification!r}; "
                          f"valid: {', '.join(VERIFICATIONS)}")


def tau_by_draft_length(survival_curve: FloatArray) -> FloatArray:
    """tau(gamma) = 1 + sum_{k<=gamma} s_k for gamma = 0..T, shape (..., T + 1)."""
    zeros = np.zeros(survival_curve.shape[:-1] + (1,))
    return 1.0 + np.concatenate([zeros, np.cumsum(survival_curve, axis=-1)], axis=-1)


def conditional_alphas(mean_survival: FloatArray) -> FloatArray:
    """alpha_k = s_k / s_{k-1} (s_0 = 1) from a mean survival curve, shape (T,), in [0, 1].

    A chain with these conditional acceptances has exactly the survival curve given; after a
    zero survival the rest is 0.
    """
    previous = np.concatenate([[1.0], mean_survival[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(previous > 0.0, mean_survival / previous, 0.0)
    return np.asarray(ratio.clip(0.0, 1.0), dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AcceptanceFromProbs:
    """Acceptance of a drafter along target rollouts under one verification rule.

    Attributes:
        verification: "tokenwise" or "block".
        alpha: per-position 1 - TV per rollout, shape (R, G), unitless.
        survival: P(>= k accepted) per rollout, shape (R, G); block: per-rollout estimate.
        topk: True when the input was top-k (alpha and survival are lower bounds).
    """

    verification: str
    alpha: FloatArray
    survival: FloatArray
    topk: bool

    @property
    def tau(self) -> FloatArray:
        """Mean tokens per round for draft lengths gamma = 0..G, shape (G + 1,)."""
        return np.asarray(tau_by_draft_length(self.survival).mean(axis=0), dtype=np.float64)

    @property
    def tau_per_rollout(self) -> FloatArray:
        """Tokens per round per rollout for gamma = 0..G, shape (R, G + 1)."""
        return tau_by_draft_length(self.survival)

    @property
    def tau_standard_error(self) -> FloatArray:
        """Standard error of the mean tau across rollouts, shape (G + 1,)."""
        per = self.tau_per_rollout
        if per.shape[0] < 2:
            return np.zeros(per.shape[1])
        return np.asarray(per.std(axis=0, ddof=1) / np.sqrt(per.shape[0]), dtype=np.float64)

    def profile(self, source: str) -> AcceptanceProfile:
        """A chain profile whose tau_chain reproduces the mean tau at every draft length."""
        alphas = conditional_alphas(self.survival.mean(axis=0))
        ranks = rank_acceptance_geometric(float(alphas[0]), GEOMETRIC_RANKS)
        return AcceptanceProfile(position_alphas=tuple(float(a) for a in alphas),
                                 rank_acceptance=tuple(float(a) for a in ranks), source=source)


def acceptance_from_probs(target: ProbArrays, draft: ProbArrays, *, verification: str,
                          max_draft: int | None = None) -> AcceptanceFromProbs:
    """Per-position alpha, survival and tau of a drafter from both models' probabilities.

    Args:
        target, draft: validated arrays of the same layout and (R, T).
        verification: "tokenwise" or "block" (block needs the target's `tokens`).
        max_draft: longest draft length G to report (default T); 1 <= G <= T.
    """
    positions = target.shape[1]
    g = positions if max_draft is None else max_draft
    if not 1 <= g <= positions:
        raise parameter_error("max_draft", f"must be in 1..{positions} (positions in "
                              f"{target.path}), got {g}")
    match = _match(target, draft) if target.is_topk else None
    alpha = position_acceptance(target, draft, match)[:, :g]
    curve = (tokenwise_survival(alpha) if verification == "tokenwise"
             else survival(target, draft, verification, match)[:, :g])
    return AcceptanceFromProbs(verification=verification, alpha=alpha, survival=curve,
                               topk=target.is_topk)


@dataclass(frozen=True, slots=True, kw_only=True)
class MonteCarloCheck:
    """The exact tau at the longest draft against seeded Monte Carlo rounds.

    Attributes:
        gamma: draft length checked.
        rollouts: rollouts simulated (the first ones of the file).
        rounds_per_rollout: rounds simulated per rollout.
        exact_tau: the computed mean tau over those rollouts.
        simulated_tau: the Monte Carlo mean tokens per round.
        standard_error: combined standard error of the difference.
    """

    gamma: int
    rollouts: int
    rounds_per_rollout: int
    exact_tau: float
    simulated_tau: float
    standard_error: float

    @property
    def agrees(self) -> bool:
        """True when the two differ by at most 4 standard errors."""
        return abs(self.exact_tau - self.simulated_tau) <= 4.0 * self.standard_error + 1e-12


def monte_carlo_check(target: ProbArrays, draft: ProbArrays, result: AcceptanceFromProbs,
                      rng: np.random.Generator, *, rollouts: int = 16,
                      rounds_per_rollout: int = 4000) -> MonteCarloCheck:
    """Simulate rounds of the rule on each checked rollout's distributions and compare tau.

    Each rollout's per-position distributions are held fixed (the assumption the exact
    formulas make); full distributions only. For block verification the computed value is a
    per-rollout estimate, so its spread across the checked rollouts enters the error.
    """
    from specsim.speculation.simulate import simulate_rounds

    if target.probs is None or draft.probs is None:
        raise SpecError(f"{target.path}: --check simulates rounds and needs full "
                        "distributions ('probs'), not top-k")
    gamma = result.survival.shape[1]
    n = min(rollouts, target.shape[0])
    means = np.empty(n)
    for r in range(n):
        p_seq = target.probs[r, : gamma + 1]
        if p_seq.shape[0] == gamma:  # no row after the draft: the bonus row is not scored
            p_seq = np.concatenate([p_seq, p_seq[-1:]])
        q_seq = draft.probs[r, :gamma]
        # rows were accepted within the file tolerance; the samplers want exact sums
        batch = simulate_rounds(p_seq / p_seq.sum(axis=-1, keepdims=True),
                                q_seq / q_seq.sum(axis=-1, keepdims=True),
                                rounds_per_rollout, rng, result.verification)
        means[r] = batch.tokens_per_round.mean()
    exact = result.tau_per_rollout[:n, gamma]
    # accepted tokens lie in 0..gamma, so each round's variance is at most gamma^2 / 4
    rounds_var = (gamma / 2.0) ** 2 / rounds_per_rollout / n
    # block: one sampled rollout path per rollout, so the estimate's spread adds to the error
    estimate_var = exact.var(ddof=1) / n if (n > 1 and result.verification == "block") else 0.0
    return MonteCarloCheck(gamma=gamma, rollouts=n, rounds_per_rollout=rounds_per_rollout,
                           exact_tau=float(exact.mean()), simulated_tau=float(means.mean()),
                           standard_error=float(np.sqrt(rounds_var + estimate_var)))

"""Acceptance from distributions: pinned to the article's numbers, to brute-force enumeration of
small vocabularies and rollouts, and to the seeded Monte Carlo of the rounds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.specs.acceptance import tau_chain
from specsim.specs.prob_arrays import ProbArrays
from specsim.speculation.distributions import (
    acceptance_from_probs,
    block_survival,
    position_acceptance,
    tokenwise_survival,
)
from specsim.speculation.objectives import (
    fit_gaussian,
    fixed_schedule,
    normalized_position_weights,
    tau_position_weights,
    toy_target,
)
from specsim.speculation.rounds import (
    autoregressive_rounds,
    compare_rounds,
    equivalent_tau,
    expected_rounds,
)
from specsim.speculation.verification import (
    block_expected_accepted,
    tokenwise_expected_accepted,
)


def enumerated_rollouts(p_seq: np.ndarray, q_seq: np.ndarray
                        ) -> tuple[ProbArrays, ProbArrays, np.ndarray]:
    """Every token path of context-independent distributions as one rollout, with its
    probability under the target: the brute-force expectation over target rollouts."""
    gamma, vocab = q_seq.shape
    paths = np.array(list(itertools.product(range(vocab), repeat=gamma)), dtype=np.int64)
    weight = np.prod(p_seq[np.arange(gamma), paths], axis=-1)
    n = paths.shape[0]
    target = ProbArrays(path="t", probs=np.broadcast_to(p_seq[:gamma], (n, gamma, vocab)).copy(),
                        tokens=paths)
    draft = ProbArrays(path="d", probs=np.broadcast_to(q_seq, (n, gamma, vocab)).copy())
    return target, draft, weight


# --- the article's block-verification toy ----------------------------------------------------

def test_block_toy_ten_and_eleven_ninths() -> None:
    """Seed, block verification: p = (1/3, 2/3), q = (2/3, 1/3), gamma = 2 accepts 10/9 tokens
    token-wise and 11/9 with block verification."""
    p = np.array([[1 / 3, 2 / 3]] * 2)
    q = np.array([[2 / 3, 1 / 3]] * 2)
    target, draft, weight = enumerated_rollouts(p, q)
    block = weight @ block_survival(target, draft).sum(axis=-1)
    tokenwise = weight @ tokenwise_survival(position_acceptance(target, draft)).sum(axis=-1)
    assert block == pytest.approx(11 / 9, abs=1e-12)
    assert tokenwise == pytest.approx(10 / 9, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_block_and_tokenwise_match_enumeration(seed: int) -> None:
    """Averaged over all target rollouts (weighted by their probability), the per-rollout block
    term equals block verification enumerated over all drafts, and never falls below the
    token-wise rule."""
    rng = np.random.default_rng(seed)
    gamma, vocab = 3, 3
    p = rng.dirichlet(np.ones(vocab) * 0.7, size=gamma + 1)
    q = rng.dirichlet(np.ones(vocab) * 0.7, size=gamma)
    target, draft, weight = enumerated_rollouts(p, q)
    block = weight @ block_survival(target, draft).sum(axis=-1)
    tokenwise = tokenwise_survival(position_acceptance(target, draft))[0].sum()
    assert block == pytest.approx(block_expected_accepted(p, q), abs=1e-12)
    assert tokenwise == pytest.approx(tokenwise_expected_accepted(p, q), abs=1e-12)
    assert block >= tokenwise - 1e-12


def test_alpha_is_one_minus_tv_and_degenerate_cases() -> None:
    p = np.array([[[0.5, 0.5, 0.0]], [[1.0, 0.0, 0.0]]])
    q = np.array([[[0.0, 0.5, 0.5]], [[1.0, 0.0, 0.0]]])
    alpha = position_acceptance(ProbArrays(path="t", probs=p), ProbArrays(path="d", probs=q))
    tv = 0.5 * np.abs(p - q).sum(axis=-1)
    np.testing.assert_allclose(alpha, 1.0 - tv)
    np.testing.assert_allclose(alpha[:, 0], [0.5, 1.0])  # half overlap; identical models


def test_topk_with_everything_listed_equals_full() -> None:
    rng = np.random.default_rng(5)
    rollouts, positions, vocab = 7, 4, 5
    p = rng.dirichlet(np.ones(vocab), size=(rollouts, positions))
    q = rng.dirichlet(np.ones(vocab), size=(rollouts, positions))
    tokens = rng.integers(0, vocab, size=(rollouts, positions))
    ids_p = np.argsort(-p, axis=-1)
    ids_q = np.argsort(-q, axis=-1)[..., ::-1].copy()  # a different order of the same ids
    full_t = ProbArrays(path="t", probs=p, tokens=tokens)
    full_d = ProbArrays(path="d", probs=q)
    top_t = ProbArrays(path="t", topk_ids=ids_p, topk_probs=np.take_along_axis(p, ids_p, -1),
                       rest=np.zeros((rollouts, positions)), tokens=tokens)
    top_d = ProbArrays(path="d", topk_ids=ids_q, topk_probs=np.take_along_axis(q, ids_q, -1),
                       rest=np.zeros((rollouts, positions)))
    np.testing.assert_allclose(position_acceptance(top_t, top_d),
                               position_acceptance(full_t, full_d))
    np.testing.assert_allclose(block_survival(top_t, top_d), block_survival(full_t, full_d))
    # keeping only the top 2: a lower bound, short by at most the two remaining masses
    k = 2
    cut_t = ProbArrays(path="t", topk_ids=ids_p[..., :k], rest=1 - np.take_along_axis(
        p, ids_p[..., :k], -1).sum(-1), topk_probs=np.take_along_axis(p, ids_p[..., :k], -1))
    cut_d = ProbArrays(path="d", topk_ids=ids_q[..., -k:], rest=1 - np.take_along_axis(
        q, ids_q[..., -k:], -1).sum(-1), topk_probs=np.take_along_axis(q, ids_q[..., -k:], -1))
    exact = position_acceptance(full_t, full_d)
    bound = position_acceptance(cut_t, cut_d)
    assert np.all(bound <= exact + 1e-12)
    assert np.all(exact <= bound + cut_t.rest + cut_d.rest + 1e-12)  # type: ignore[operator]


def test_profile_reproduces_mean_tau_at_every_draft_length() -> None:
    rng = np.random.default_rng(11)
    p = rng.dirichlet(np.ones(4), size=(30, 6))
    q = rng.dirichlet(np.ones(4), size=(30, 6))
    tokens = np.array([[rng.choice(4, p=row) for row in rollout] for rollout in p])
    target = ProbArrays(path="t", probs=p, tokens=tokens)
    draft = ProbArrays(path="d", probs=q)
    for rule in ("tokenwise", "block"):
        result = acceptance_from_probs(target, draft, verification=rule, max_draft=5)
        alphas = np.asarray(result.profile("test").position_alphas)
        for gamma in range(6):
            assert float(tau_chain(alphas[:gamma])) == pytest.approx(result.tau[gamma])
    with pytest.raises(SpecError, match="max_draft: must be in 1..6"):
        acceptance_from_probs(target, draft, verification="tokenwise", max_draft=7)
    with pytest.raises(SpecError, match="'tokens' is missing"):
        acceptance_from_probs(ProbArrays(path="t", probs=p), draft, verification="block")


# --- EDR: exact expected rounds ---------------------------------------------------------------

def rounds_by_enumeration(a: np.ndarray) -> float:
    """Sum over every accept/reject sequence of its probability times 1 + rejections."""
    length = a.shape[0]
    total = 0.0
    for outcome in itertools.product((True, False), repeat=length):
        start, prob, rejections = 0, 1.0, 0
        for t, accepted in enumerate(outcome, start=1):
            prob *= a[start, t - 1] if accepted else 1.0 - a[start, t - 1]
            if not accepted:
                rejections, start = rejections + 1, t
        total += prob * (1 + rejections)
    return total


def rounds_by_monte_carlo(a: np.ndarray, runs: int, rng: np.random.Generator) -> np.ndarray:
    """Simulated rounds of the Markov reward process, one count per run."""
    length = a.shape[0]
    start = np.zeros(runs, dtype=np.int64)
    count = np.ones(runs)
    for t in range(1, length + 1):
        rejected = rng.random(runs) >= a[start, t - 1]
        count += rejected
        start = np.where(rejected, t, start)
    return count


def test_edr_matches_enumeration_and_monte_carlo() -> None:
    rng = np.random.default_rng(3)
    length = 6
    a = np.triu(rng.uniform(0.2, 0.95, size=(2, length, length)))
    exact = expected_rounds(a)
    for r in range(2):
        assert exact[r] == pytest.approx(rounds_by_enumeration(a[r]), abs=1e-12)
        sample = rounds_by_monte_carlo(a[r], 200_000, rng)
        standard_error = sample.std(ddof=1) / math.sqrt(sample.size)
        assert abs(sample.mean() - exact[r]) < 4 * standard_error


def test_edr_autoregressive_reduction() -> None:
    """A[t0, t] = a_t for every start: the occupancies at t sum to one, E = 1 + sum (1 - a_t)."""
    rng = np.random.default_rng(4)
    a_t = rng.uniform(0.0, 1.0, size=(5, 12))
    per_start = np.broadcast_to(a_t[:, None, :], (5, 12, 12))
    np.testing.assert_allclose(expected_rounds(per_start), autoregressive_rounds(a_t))
    np.testing.assert_allclose(autoregressive_rounds(a_t), 1.0 + (1.0 - a_t).sum(axis=-1))


def test_edr_degenerate_cases() -> None:
    """alpha = 1 with a block limit of 3 over 8 positions: the target emits positions 4 and 8,
    two rejections, 3 rounds; alpha = 0: every position is a rejection, L + 1 rounds."""
    length, block = 8, 3
    t0, t = np.meshgrid(np.arange(length), np.arange(1, length + 1), indexing="ij")
    limited = np.where(t - t0 <= block, 1.0, 0.0)[None]
    assert expected_rounds(limited)[0] == pytest.approx(3.0)
    assert expected_rounds(np.zeros((1, length, length)))[0] == pytest.approx(length + 1)
    assert equivalent_tau(np.array([4.0]), 8)[0] == pytest.approx(2.0)


def test_compare_two_drafters() -> None:
    rng = np.random.default_rng(8)
    a = rng.uniform(0.5, 1.0, size=(20, 10, 10))
    comparison = compare_rounds(a, a * 0.9)
    assert comparison.difference > 0.0  # lower acceptance everywhere: more rounds
    diff = expected_rounds(a * 0.9) - expected_rounds(a)
    assert comparison.difference == pytest.approx(diff.mean())
    with pytest.raises(SpecError, match="differ in shape"):
        compare_rounds(a, a[:, :9, :9])


# --- the objectives toy and the position weights ----------------------------------------------

@pytest.mark.parametrize("objective, article_alpha", [
    ("forward_kl", 0.42), ("reverse_kl", 0.40), ("tv", 0.54), ("lk_likelihood", 0.54)])
def test_objectives_toy_matches_the_article(objective: str, article_alpha: float) -> None:
    """Seed, "KL is only a proxy": forward KL accepts 42%, reverse KL 40%, the alpha-optimal
    drafter 54% (LK's -log alpha shares the TV optimum). The article rounds to whole percent, so
    the tolerance is half a percent plus the grid search's slack."""
    fit = fit_gaussian(toy_target(), objective)
    assert fit.alpha == pytest.approx(article_alpha, abs=0.006)


def test_toy_optima_sit_where_the_article_says() -> None:
    """Forward KL spreads over all modes (mean near the mixture mean 0.05); reverse KL sits on
    the widest mode N(-4, 0.8^2); the alpha-optimum covers the two left modes."""
    p = toy_target()
    forward, reverse, tv = (fit_gaussian(p, name) for name in ("forward_kl", "reverse_kl", "tv"))
    assert forward.mu == pytest.approx(0.05, abs=0.1) and forward.sigma > 3.5
    assert reverse.mu == pytest.approx(-4.0, abs=0.1) and reverse.sigma == pytest.approx(0.8,
                                                                                         abs=0.1)
    assert -4.0 < tv.mu < -0.5


def test_position_weights_at_dflash_alpha() -> None:
    """Constant alpha over 16 positions: d tau / d alpha_k = alpha^(k-1) (1 - alpha^(17-k)) /
    (1 - alpha), so normalized to k = 1 the weight is alpha^(k-1) (1 - alpha^(17-k)) /
    (1 - alpha^16); at alpha = e^(-1/7) the leading factor is DFlash's exp(-(k-1)/7)."""
    alpha = math.exp(-1 / 7)
    k = np.arange(1, 17)
    hand = alpha ** (k - 1) * (1 - alpha ** (17 - k)) / (1 - alpha ** 16)
    weights = normalized_position_weights([alpha] * 16)
    np.testing.assert_allclose(weights, hand, rtol=1e-12)
    np.testing.assert_allclose(weights / fixed_schedule(16), hand / np.exp(-(k - 1) / 7))
    assert weights[1] == pytest.approx(0.8518, abs=1e-4)
    # the article: alpha = e^(-1/7) ~ 0.87 gives an acceptance length of 6-7 out of 16
    assert 6.0 < float(tau_chain([alpha] * 16)) < 7.0


def test_position_weights_against_a_finite_difference_and_edges() -> None:
    rng = np.random.default_rng(2)
    alphas = rng.uniform(0.1, 0.99, size=7)
    step = 1e-7
    numeric = [(float(tau_chain(alphas + step * np.eye(7)[k]))
                - float(tau_chain(alphas - step * np.eye(7)[k]))) / (2 * step) for k in range(7)]
    np.testing.assert_allclose(tau_position_weights(alphas), numeric, rtol=1e-6)
    np.testing.assert_allclose(tau_position_weights([1.0] * 4), [4, 3, 2, 1])  # alpha = 1
    np.testing.assert_allclose(tau_position_weights([0.0] * 3), [1, 0, 0])  # alpha = 0
    with pytest.raises(SpecError):
        tau_position_weights([1.2])


@pytest.mark.parametrize("k", [5, 80])  # 80 x 80 > MAX_PAIRWISE: the sorted path
def test_topk_matching_against_brute_force(k: int) -> None:
    from specsim.speculation.distributions import match_topk

    rng = np.random.default_rng(k)
    p_ids = rng.random((3, 4, 2 * k)).argsort(axis=-1)[..., :k]
    q_ids = rng.random((3, 4, 2 * k)).argsort(axis=-1)[..., :k]
    slots = match_topk(p_ids, q_ids)
    for index in np.ndindex(3, 4):
        for i, token in enumerate(p_ids[index]):
            hits = np.flatnonzero(q_ids[index] == token)
            assert slots[index][i] == (hits[0] if hits.size else -1)

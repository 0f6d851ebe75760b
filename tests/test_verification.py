"""Tests of the exact verification rules: the seed toy numbers and re-derivations."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.speculation.verification import (
    EXPECTED_ACCEPTED,
    VERIFICATION_RULES,
    block_expected_accepted,
    gumbel_expected_accepted,
    gumbel_match_lower_bound,
    gumbel_match_probability,
    independent_match_probability,
    tokenwise_acceptance,
    tokenwise_expected_accepted,
    total_variation,
    verification_rule,
)

# Seed, "Block verification": p(a) = 1/3, p(b) = 2/3, q(a) = 2/3, q(b) = 1/3 at every
# position, gamma = 2: token-wise accepts 10/9 tokens per round on average, block 11/9.
TOY_P = np.array([[1 / 3, 2 / 3]] * 3)
TOY_Q = np.array([[2 / 3, 1 / 3]] * 2)


def random_chain(
    rng: np.random.Generator, gamma: int, vocab: int, sparsity: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Random per-position distributions; `sparsity` zeroes that share of entries."""
    def draw(rows: int) -> np.ndarray:
        x = rng.dirichlet(np.ones(vocab), size=rows)
        x[rng.random(x.shape) < sparsity] = 0.0
        x[np.arange(rows), rng.integers(0, vocab, rows)] += 0.1  # keep every row non-empty
        return np.asarray(x / x.sum(axis=-1, keepdims=True))

    return draw(gamma + 1), draw(gamma)


def gumbel_match_direct(p: np.ndarray, q: np.ndarray) -> float:
    """sum_j 1 / sum_i max(p_i / p_j, q_i / q_j), term by term (O(V^2))."""
    total = 0.0
    for j in range(len(p)):
        if p[j] > 0 and q[j] > 0:
            total += 1.0 / sum(max(p[i] / p[j], q[i] / q[j]) for i in range(len(p)))
    return total


def test_toy_tokenwise_pinned_ten_ninths() -> None:
    assert tokenwise_expected_accepted(TOY_P, TOY_Q) == pytest.approx(10 / 9, rel=1e-12)


def test_toy_block_pinned_eleven_ninths() -> None:
    assert block_expected_accepted(TOY_P, TOY_Q) == pytest.approx(11 / 9, rel=1e-12)


def test_tokenwise_acceptance_by_hand() -> None:
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.9, 0.05, 0.05])
    # min(p, q) = 0.5 + 0.05 + 0 = 0.55; TV = (0.4 + 0.45 + 0.05) / 2 = 0.45
    assert float(tokenwise_acceptance(p, q)) == pytest.approx(0.55)
    assert float(total_variation(p, q)) == pytest.approx(0.45)


def test_tokenwise_acceptance_is_one_minus_tv_vectorized() -> None:
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(7), size=(4, 5)), rng.dirichlet(np.ones(7), size=(4, 5))
    alpha = tokenwise_acceptance(p, q)
    assert alpha.shape == (4, 5)
    np.testing.assert_allclose(alpha, 1.0 - total_variation(p, q), atol=1e-12)


def test_tokenwise_expected_accepted_by_hand() -> None:
    # alphas 0.55 and sum min = 0.3 + 0.2 = 0.5: 0.55 + 0.55 * 0.5
    p = np.array([[0.5, 0.5, 0.0], [0.3, 0.7, 0.0]])
    q = np.array([[0.9, 0.05, 0.05], [0.8, 0.2, 0.0]])
    assert tokenwise_expected_accepted(p, q) == pytest.approx(0.55 + 0.275)


@pytest.mark.parametrize("seed", range(6))
def test_block_never_below_tokenwise(seed: int) -> None:
    # Sun et al. 2024: block verification is optimal among lossless rules for a given draft
    p, q = random_chain(np.random.default_rng(seed), gamma=3, vocab=3, sparsity=0.2)
    assert block_expected_accepted(p, q) >= tokenwise_expected_accepted(p, q) - 1e-12


def test_block_equals_tokenwise_for_single_token_draft() -> None:
    # gamma = 1: the whole block is one token, so both rules accept w.p. min(1, p/q)
    p, q = random_chain(np.random.default_rng(7), gamma=1, vocab=5)
    assert block_expected_accepted(p, q) == pytest.approx(tokenwise_expected_accepted(p, q))


def test_rules_accept_everything_when_drafter_equals_target() -> None:
    p, _ = random_chain(np.random.default_rng(8), gamma=3, vocab=4)
    for rule in ("tokenwise", "block", "gumbel"):
        assert EXPECTED_ACCEPTED[rule](p, p[:3]) == pytest.approx(3.0)


def test_rules_accept_nothing_for_disjoint_supports() -> None:
    p = np.array([[1.0, 0.0, 0.0]] * 3)
    q = np.array([[0.0, 0.5, 0.5]] * 2)
    for rule in ("tokenwise", "block", "gumbel"):
        assert EXPECTED_ACCEPTED[rule](p, q) == 0.0


def test_rules_degenerate_gamma_zero_accept_nothing() -> None:
    p = np.array([[0.2, 0.8]])
    q = np.zeros((0, 2))
    for rule in ("tokenwise", "block", "gumbel"):
        assert EXPECTED_ACCEPTED[rule](p, q) == 0.0


def test_block_enumeration_limit() -> None:
    p, q = random_chain(np.random.default_rng(9), gamma=8, vocab=8)
    with pytest.raises(SpecError, match="V\\*\\*gamma"):
        block_expected_accepted(p, q)


@pytest.mark.parametrize("seed", range(5))
def test_gumbel_match_matches_direct_sum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p, q = random_chain(rng, gamma=1, vocab=9, sparsity=0.3)
    assert gumbel_match_probability(p[0], q[0]) == pytest.approx(gumbel_match_direct(p[0], q[0]))


@pytest.mark.parametrize("seed", range(5))
def test_gumbel_match_between_bound_and_optimal_coupling(seed: int) -> None:
    p, q = random_chain(np.random.default_rng(10 + seed), gamma=1, vocab=12, sparsity=0.2)
    match = gumbel_match_probability(p[0], q[0])
    assert float(gumbel_match_lower_bound(p[0], q[0])) <= match + 1e-12
    assert match <= float(tokenwise_acceptance(p[0], q[0])) + 1e-12  # 1 - TV is the best coupling
    assert match >= float(independent_match_probability(p[0], q[0])) - 1e-12


def test_gumbel_match_by_monte_carlo_with_shared_noise() -> None:
    rng = np.random.default_rng(11)
    p, q = np.array([0.5, 0.3, 0.15, 0.05]), np.array([0.2, 0.5, 0.1, 0.2])
    noise = rng.gumbel(size=(200_000, 4))
    matches = np.argmax(np.log(p) + noise, axis=1) == np.argmax(np.log(q) + noise, axis=1)
    standard_error = matches.std() / np.sqrt(matches.size)
    assert abs(matches.mean() - gumbel_match_probability(p, q)) < 5 * standard_error


def test_gumbel_toy_values_by_hand() -> None:
    # toy p = (1/3, 2/3), q = (2/3, 1/3): each j gives 1 / (1 + 2) -> 2/3; TV = 1/3
    assert gumbel_match_probability(TOY_P[0], TOY_Q[0]) == pytest.approx(2 / 3)
    assert float(gumbel_match_lower_bound(TOY_P[0], TOY_Q[0])) == pytest.approx(0.5)
    assert float(independent_match_probability(TOY_P[0], TOY_Q[0])) == pytest.approx(4 / 9)
    assert gumbel_expected_accepted(TOY_P, TOY_Q) == pytest.approx(2 / 3 + 4 / 9)


def test_gumbel_match_degenerate_identical_and_one_hot() -> None:
    p = np.array([0.1, 0.6, 0.3])
    assert gumbel_match_probability(p, p) == pytest.approx(1.0)
    one_hot = np.array([0.0, 1.0, 0.0])
    assert gumbel_match_probability(one_hot, one_hot) == pytest.approx(1.0)
    assert gumbel_match_probability(one_hot, np.array([1.0, 0.0, 0.0])) == 0.0


def test_distribution_validation_names_field() -> None:
    with pytest.raises(SpecError, match="p:"):
        tokenwise_acceptance([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(SpecError, match="q:"):
        total_variation([0.5, 0.5], [1.5, -0.5])
    with pytest.raises(SpecError, match="p_seq"):
        block_expected_accepted(TOY_P[:2], TOY_Q)  # needs gamma + 1 rows


def test_rule_lookup_lists_valid_names() -> None:
    assert set(VERIFICATION_RULES) == {"tokenwise", "block", "gumbel"}
    assert verification_rule("block") is VERIFICATION_RULES["block"]
    with pytest.raises(SpecError, match="block, gumbel, tokenwise"):
        verification_rule("typical")

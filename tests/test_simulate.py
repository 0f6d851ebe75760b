"""Monte Carlo cross-checks: simulated rounds vs the exact formulas, and losslessness.

Tolerances: a simulated mean is compared with the exact value within 5 standard errors of the
mean (std / sqrt(R)), a false alarm rate below 1e-6 per comparison for a normal mean.
Losslessness: a chi-square goodness-of-fit test of emitted tokens against the target
distribution must not reject at the 1e-3 level (seeds fixed, so the test is deterministic).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from specsim.errors import SpecError
from specsim.specs.acceptance import rank_acceptance_geometric, tau_chain
from specsim.speculation.simulate import (
    mean_and_standard_error,
    simulate_chain,
    simulate_rounds,
    simulate_tokens,
    simulate_tree_walk,
)
from specsim.speculation.trees import Tree, best_first_tree, chain
from specsim.speculation.verification import (
    EXPECTED_ACCEPTED,
    gumbel_match_probability,
    gumbel_rounds,
)
from tests.oracles import ddtree

RULES = ("tokenwise", "block", "gumbel")
ROUNDS = 100_000
SIGMAS = 5.0
P_VALUE_FLOOR = 1e-3

# Seed, "Block verification": the toy with p = (1/3, 2/3), q = (2/3, 1/3) and gamma = 2.
TOY_P = np.array([[1 / 3, 2 / 3]] * 3)
TOY_Q = np.array([[2 / 3, 1 / 3]] * 2)
# A 3-token chain whose drafter over- and underestimates different tokens at each position.
MIXED_P = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4], [0.2, 0.2, 0.6]])
MIXED_Q = np.array([[0.2, 0.5, 0.3], [0.3, 0.4, 0.3], [0.6, 0.1, 0.3]])
CASES = {"toy": (TOY_P, TOY_Q), "mixed": (MIXED_P, MIXED_Q)}


def assert_mean_close(sample: np.ndarray, expected: float) -> None:
    mean, standard_error = mean_and_standard_error(sample)
    assert abs(mean - expected) <= SIGMAS * standard_error + 1e-12, (mean, expected)


def chisquare_p_value(tokens: np.ndarray, probs: np.ndarray) -> float:
    observed = np.bincount(tokens, minlength=probs.size)
    return float(chisquare(observed, probs * tokens.size).pvalue)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("rule", RULES)
def test_simulated_mean_matches_exact_expectation(case: str, rule: str) -> None:
    p, q = CASES[case]
    batch = simulate_rounds(p, q, ROUNDS, np.random.default_rng(100), rule)
    assert_mean_close(batch.accepted, EXPECTED_ACCEPTED[rule](p, q))


@pytest.mark.parametrize("rule", RULES)
def test_first_token_follows_target(rule: str) -> None:
    p, q = CASES["mixed"]
    batch = simulate_rounds(p, q, ROUNDS, np.random.default_rng(200), rule)
    assert chisquare_p_value(batch.first_token, p[0]) > P_VALUE_FLOOR


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("rule", RULES)
def test_first_two_tokens_jointly_follow_target(case: str, rule: str) -> None:
    # a lossless rule emits token t ~ p[t] independently (the toy language is position-indexed)
    p, q = CASES[case]
    tokens = simulate_tokens(p, q, 2, ROUNDS, np.random.default_rng(300), rule)
    vocab = p.shape[1]
    joint = np.outer(p[0], p[1]).ravel()
    assert chisquare_p_value(tokens[:, 0] * vocab + tokens[:, 1], joint) > P_VALUE_FLOOR


@pytest.mark.parametrize("rule", RULES)
def test_whole_round_output_follows_target(rule: str) -> None:
    p, q = CASES["mixed"]
    tokens = simulate_tokens(p, q, 4, 50_000, np.random.default_rng(400), rule)
    for position in range(4):
        assert chisquare_p_value(tokens[:, position], p[position]) > P_VALUE_FLOOR


def test_chisquare_detects_a_lossy_sampler() -> None:
    # the check has power: emitting the draft token unverified (distribution q) is rejected
    p, q = CASES["mixed"]
    drafts = np.random.default_rng(500).choice(3, size=ROUNDS, p=q[0])
    assert chisquare_p_value(drafts, p[0]) < 1e-12


def test_gumbel_match_rate_matches_formula() -> None:
    p, q = MIXED_P[:2], MIXED_Q[:1]  # gamma = 1: a round accepts iff the two samples match
    batch = simulate_rounds(p, q, ROUNDS, np.random.default_rng(600), "gumbel")
    assert_mean_close(batch.accepted, gumbel_match_probability(p[0], q[0]))


def test_gumbel_output_is_drafter_invariant() -> None:
    # Daliri et al. 2024: with the same noise, every drafter yields the same first token
    p = MIXED_P
    first = gumbel_rounds(np.random.default_rng(700), p, MIXED_Q, 10_000).first_token
    other_q = np.array([[0.9, 0.05, 0.05]] * 3)
    second = gumbel_rounds(np.random.default_rng(700), p, other_q, 10_000).first_token
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("rule", RULES)
def test_emitted_rows_are_accepted_plus_one_tokens(rule: str) -> None:
    batch = simulate_rounds(MIXED_P, MIXED_Q, 1000, np.random.default_rng(800), rule)
    lengths = (batch.emitted >= 0).sum(axis=1)
    np.testing.assert_array_equal(lengths, batch.tokens_per_round)
    assert batch.num_rounds == 1000 and batch.accepted.max() <= 3


@pytest.mark.parametrize("rule", RULES)
def test_degenerate_drafter_equals_target_accepts_all(rule: str) -> None:
    batch = simulate_rounds(MIXED_P, MIXED_P[:3], 2000, np.random.default_rng(900), rule)
    assert np.all(batch.accepted == 3)


@pytest.mark.parametrize("rule", RULES)
def test_degenerate_disjoint_supports_accept_nothing(rule: str) -> None:
    p = np.array([[1.0, 0.0, 0.0]] * 3)
    q = np.array([[0.0, 0.5, 0.5]] * 2)
    batch = simulate_rounds(p, q, 2000, np.random.default_rng(1000), rule)
    assert np.all(batch.accepted == 0) and np.all(batch.first_token == 0)


@pytest.mark.parametrize("rule", RULES)
def test_degenerate_gamma_zero_samples_target(rule: str) -> None:
    p = np.array([[0.2, 0.5, 0.3]])
    batch = simulate_rounds(p, np.zeros((0, 3)), 20_000, np.random.default_rng(1100), rule)
    assert np.all(batch.accepted == 0)
    assert chisquare_p_value(batch.first_token, p[0]) > P_VALUE_FLOOR



def test_simulation_is_reproducible_with_seed() -> None:
    first = simulate_rounds(MIXED_P, MIXED_Q, 500, np.random.default_rng(5), "block")
    second = simulate_rounds(MIXED_P, MIXED_Q, 500, np.random.default_rng(5), "block")
    np.testing.assert_array_equal(first.emitted, second.emitted)


def test_unknown_rule_lists_valid_names() -> None:
    with pytest.raises(SpecError, match="tokenwise"):
        simulate_rounds(TOY_P, TOY_Q, 10, np.random.default_rng(0), "greedy")


def test_chain_simulation_matches_tau_chain() -> None:
    alphas = np.array([0.9, 0.8, 0.6, 0.5, 0.3])
    accepted = simulate_chain(alphas, ROUNDS, np.random.default_rng(1300))
    assert_mean_close(accepted, float(tau_chain(alphas)) - 1.0)


def test_chain_simulation_degenerate_alpha_zero_and_one() -> None:
    rng = np.random.default_rng(1400)
    assert np.all(simulate_chain(np.zeros(4), 100, rng) == 0)
    assert np.all(simulate_chain(np.ones(4), 100, rng) == 4)
    assert np.all(simulate_chain(np.zeros(0), 100, rng) == 0)


@pytest.mark.parametrize("budget", [1, 8, 36, 128])
def test_tree_walk_matches_best_first_tau(budget: int) -> None:
    tree = best_first_tree(rank_acceptance_geometric(0.8, 6), budget)
    accepted = simulate_tree_walk(tree, ROUNDS, np.random.default_rng(1500 + budget))
    assert_mean_close(accepted, tree.tau - 1.0)
    assert accepted.max() <= tree.depth


def test_tree_walk_matches_chain_and_ddtree_tau() -> None:
    rng = np.random.default_rng(1600)
    seeded_chain = chain([0.9, 0.7, 0.7, 0.4])
    assert_mean_close(simulate_tree_walk(seeded_chain, ROUNDS, rng), seeded_chain.tau - 1.0)
    q = np.random.default_rng(3).dirichlet(np.ones(5), size=4)
    tree, _ = ddtree(np.log(q), 30)
    assert_mean_close(simulate_tree_walk(tree, ROUNDS, rng), tree.tau - 1.0)


def test_tree_walk_degenerate_empty_tree_and_certain_chain() -> None:
    rng = np.random.default_rng(1700)
    empty = best_first_tree([0.8], 0)
    assert np.all(simulate_tree_walk(empty, 100, rng) == 0)
    assert np.all(simulate_tree_walk(chain(np.ones(3)), 100, rng) == 3)


def test_tree_walk_rejects_non_exclusive_siblings() -> None:
    tree = Tree(
        parents=np.array([-1, -1]),
        depths=np.array([1, 1]),
        ranks=np.array([0, 1]),
        path_probability=np.array([0.8, 0.8]),
    )
    with pytest.raises(SpecError, match="exclusive"):
        simulate_tree_walk(tree, 10, np.random.default_rng(0))

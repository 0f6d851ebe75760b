"""Tests of specsim.specs.acceptance: pinned to the seed's worked numbers, and re-derived."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.specs.acceptance import (
    AcceptanceProfile,
    conditional_acceptance,
    constant_profile,
    marginal_acceptance,
    rank_acceptance_geometric,
    speedup_constant_cost,
    tau_chain,
    tau_constant,
)


def tau_by_outcomes(alphas: np.ndarray) -> float:
    """1 + E[accepted], summing k * P(accepted = k) over the outcomes of one round."""
    gamma = len(alphas)
    expected = 0.0
    for k in range(gamma + 1):
        reach = float(np.prod(alphas[:k]))
        stop = 1.0 - alphas[k] if k < gamma else 1.0
        expected += k * reach * stop
    return 1.0 + expected


# Seed, "How many tokens do we get?": alpha = 0.8, gamma = 5, c = 0.05 gives tau ~ 3.69 and
# speedup ~ 2.95x; "Parallel drafters": the same numbers with one drafter pass give ~ 3.51x.
def test_seed_example_tau_pinned() -> None:
    assert float(tau_constant(0.8, 5)) == pytest.approx(3.69, abs=0.005)
    assert float(tau_constant(0.8, 5)) == pytest.approx((1 - 0.8**6) / 0.2, rel=1e-12)


def test_seed_example_speedup_autoregressive_pinned() -> None:
    tau = tau_constant(0.8, 5)
    assert float(speedup_constant_cost(tau, 5, 0.05)) == pytest.approx(2.95, abs=0.005)


def test_seed_example_speedup_parallel_pinned() -> None:
    tau = tau_constant(0.8, 5)
    assert float(speedup_constant_cost(tau, 1, 0.05)) == pytest.approx(3.51, abs=0.005)


def test_parallel_beats_autoregressive_and_gap_grows_with_gamma() -> None:
    gammas = np.arange(1, 21)
    tau = tau_constant(0.8, gammas)
    autoregressive = speedup_constant_cost(tau, gammas, 0.05)
    parallel = speedup_constant_cost(tau, 1, 0.05)
    gap = parallel / autoregressive
    assert gap[0] == pytest.approx(1.0)  # gamma = 1: one pass either way
    assert np.all(np.diff(gap) > 0)


def test_autoregressive_has_interior_optimum_parallel_keeps_gaining() -> None:
    # Seed: an autoregressive drafter has an optimal draft length; a parallel one keeps gaining.
    gammas = np.arange(1, 41)
    tau = tau_constant(0.8, gammas)
    autoregressive = speedup_constant_cost(tau, gammas, 0.05)
    assert 1 < int(np.argmax(autoregressive)) < len(gammas) - 1
    assert np.all(np.diff(speedup_constant_cost(tau, 1, 0.05)) > 0)


def test_tau_chain_matches_outcome_enumeration_vectorized() -> None:
    rng = np.random.default_rng(1)
    alphas = rng.uniform(0.0, 1.0, size=(4, 3, 6))
    tau = tau_chain(alphas)
    assert tau.shape == (4, 3)
    expected = np.apply_along_axis(tau_by_outcomes, -1, alphas)
    np.testing.assert_allclose(tau, expected, rtol=1e-12)


def test_tau_constant_matches_explicit_series_broadcast() -> None:
    alpha = np.array([0.0, 0.3, 0.8, 0.999, 1.0])[:, None]
    gamma = np.arange(0, 7)[None, :]
    series = np.array([[sum(a**k for k in range(g + 1)) for g in range(7)] for a in alpha[:, 0]])
    np.testing.assert_allclose(tau_constant(alpha, gamma), series, rtol=1e-12)


def test_tau_degenerate_alpha_zero_gives_one() -> None:
    assert float(tau_constant(0.0, 5)) == 1.0
    assert float(tau_chain(np.zeros(5))) == 1.0


def test_tau_degenerate_alpha_one_gives_gamma_plus_one() -> None:
    assert float(tau_constant(1.0, 5)) == 6.0
    assert float(tau_chain(np.ones(5))) == 6.0
    assert float(tau_constant(1.0 - 1e-12, 5)) == pytest.approx(6.0, rel=1e-9)


def test_tau_degenerate_gamma_zero_gives_one() -> None:
    assert float(tau_constant(0.7, 0)) == 1.0
    assert float(tau_chain(np.zeros(0))) == 1.0
    assert tau_chain(np.zeros((3, 0))).tolist() == [1.0, 1.0, 1.0]


def test_tau_rejects_bad_input() -> None:
    with pytest.raises(SpecError, match="alpha"):
        tau_constant(1.2, 3)
    with pytest.raises(SpecError, match="gamma"):
        tau_constant(0.5, -1)
    with pytest.raises(SpecError, match="gamma"):
        tau_constant(0.5, 2.5)
    with pytest.raises(SpecError, match="alphas"):
        tau_chain([0.5, -0.1])
    with pytest.raises(SpecError, match="alphas"):
        tau_chain(0.5)


def test_rank_acceptance_geometric_values_by_hand() -> None:
    # a_j = alpha (1 - alpha)^j with alpha = 0.8: 0.8, 0.16, 0.032, 0.0064
    np.testing.assert_allclose(rank_acceptance_geometric(0.8, 4), [0.8, 0.16, 0.032, 0.0064])
    assert rank_acceptance_geometric(0.8, 0).shape == (0,)
    assert rank_acceptance_geometric([0.5, 0.9], 3).shape == (2, 3)


def test_rank_acceptance_geometric_mass_is_one_minus_miss_probability() -> None:
    # the target misses all J candidates with probability (1 - alpha)^J
    a = rank_acceptance_geometric(0.6, 7)
    assert a.sum() == pytest.approx(1.0 - 0.4**7, rel=1e-12)


def test_rank_acceptance_geometric_degenerate_alpha_one_and_zero() -> None:
    np.testing.assert_array_equal(rank_acceptance_geometric(1.0, 3), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(rank_acceptance_geometric(0.0, 3), [0.0, 0.0, 0.0])


def test_marginal_and_conditional_by_hand() -> None:
    # conditional 0.8, 0.75, 0.5 -> marginal 0.8, 0.6, 0.3
    np.testing.assert_allclose(marginal_acceptance([0.8, 0.75, 0.5]), [0.8, 0.6, 0.3])
    np.testing.assert_allclose(conditional_acceptance([0.8, 0.6, 0.3]), [0.8, 0.75, 0.5])


def test_marginal_conditional_round_trip_vectorized() -> None:
    rng = np.random.default_rng(2)
    alphas = rng.uniform(0.05, 1.0, size=(5, 4))
    np.testing.assert_allclose(conditional_acceptance(marginal_acceptance(alphas)), alphas)


def test_conditional_of_unreached_position_is_zero() -> None:
    np.testing.assert_array_equal(conditional_acceptance([0.5, 0.0, 0.0]), [0.5, 0.0, 0.0])


def test_conditional_rejects_increasing_marginals() -> None:
    with pytest.raises(SpecError, match="non-increasing"):
        conditional_acceptance([0.5, 0.6])


def test_profile_alphas_extend_with_last_value() -> None:
    profile = AcceptanceProfile(position_alphas=(0.9, 0.8, 0.7), source="test")
    np.testing.assert_allclose(profile.alphas(2), [0.9, 0.8])
    np.testing.assert_allclose(profile.alphas(5), [0.9, 0.8, 0.7, 0.7, 0.7])
    assert profile.alphas(0).shape == (0,)
    # tau = 1 + 0.9 + 0.72 + 0.504 + 0.3528 + 0.24696
    assert profile.tau(5) == pytest.approx(3.72376, abs=1e-12)


def test_profile_from_ranks_only_uses_top_candidate_for_chains() -> None:
    profile = AcceptanceProfile(rank_acceptance=(0.7, 0.2), source="test")
    np.testing.assert_allclose(profile.alphas(3), [0.7, 0.7, 0.7])
    np.testing.assert_allclose(profile.ranks(4), [0.7, 0.2, 0.0, 0.0])


def test_constant_profile_matches_seed_model() -> None:
    profile = constant_profile(0.8)
    np.testing.assert_allclose(profile.ranks(3), [0.8, 0.16, 0.032])
    assert profile.tau(5) == pytest.approx(3.68928, abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"position_alphas": (0.5, 1.2)}, "position_alphas"),
        ({"position_alphas": (-0.1,)}, "position_alphas"),
        ({"rank_acceptance": (0.7, 0.4)}, "rank_acceptance"),
        ({"rank_acceptance": (float("nan"),)}, "rank_acceptance"),
        ({}, "neither"),
    ],
)
def test_profile_validation_names_field(kwargs: dict[str, tuple[float, ...]], field: str) -> None:
    with pytest.raises(SpecError, match=field):
        AcceptanceProfile(source="drafter.yaml", **kwargs)


def test_profile_without_ranks_cannot_build_tree() -> None:
    profile = AcceptanceProfile(position_alphas=(0.8,), source="x.yaml")
    with pytest.raises(SpecError, match="rank_acceptance"):
        profile.ranks(3)

"""Exact expected number of rounds over a target rollout (EDR, Zhao and Cai 2026).

A parallel drafter's prediction at position t depends on where its round started, t0. Along a
target rollout of L positions, speculative decoding is a Markov reward process on states
(t0, t): the round that started at t0 has reached position t. The token at t is accepted with
probability A[t0, t] and the process moves to (t0, t + 1); otherwise the round ends, the next
starts at t and the process moves to (t, t + 1). Every rejection costs one round:

    E[#rounds] = 1 + sum_{t=1..L} sum_{t0<t} omega[t0, t] eps[t0, t],   eps = 1 - A,

with omega[t0, t] the probability that decoding visits (t0, t) (its occupancy). A block limit
gamma enters as A[t0, t] = 0 for t - t0 > gamma (the target emits that token). The count
includes the round opened by a rejection at L, as the article's formula does.

For an autoregressive drafter A[t0, t] = a_t for every t0, the occupancies at each t sum to
one and the expectation collapses to 1 + sum_t (1 - a_t).

Arrays: A has shape (R, L, L) with A[r, t0, t - 1] = A_{t0,t} for t0 < t (layout in
`specsim.specs.prob_arrays`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecError

FloatArray = npt.NDArray[np.float64]


def expected_rounds(acceptance: npt.ArrayLike) -> FloatArray:
    """Exact E[#rounds] per rollout from per-start acceptances.

    Args:
        acceptance: A[r, t0, t - 1] = P(token t accepted | round started at t0), shape
            (R, L, L); entries with t0 >= t are ignored.

    Returns:
        expected rounds per rollout, shape (R,).
    """
    a = np.asarray(acceptance, dtype=np.float64)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise SpecError(f"acceptance: need shape (rollouts, L, L), got {a.shape}")
    rollouts, length = a.shape[0], a.shape[1]
    occupancy = np.zeros((rollouts, length + 1))  # omega[:, t0] at the current t
    occupancy[:, 0] = 1.0  # decoding starts in state (0, 1)
    cost = np.ones(rollouts)
    for t in range(1, length + 1):
        accept = a[:, :t, t - 1]  # t0 = 0..t-1
        # Zhao and Cai 2026: local cost eps = 1 - A weighted by the occupancy omega
        rejected = (occupancy[:, :t] * (1.0 - accept)).sum(axis=-1)
        cost += rejected
        occupancy[:, :t] *= accept
        occupancy[:, t] = rejected  # a rejection at t starts the next round at t
    return cost


def autoregressive_rounds(alpha: npt.ArrayLike) -> FloatArray:
    """E[#rounds] = 1 + sum_t (1 - a_t) when acceptance does not depend on the start, (R,).

    Args:
        alpha: per-position acceptance a_t along each rollout, shape (R, L).
    """
    a = np.asarray(alpha, dtype=np.float64)
    return np.asarray(1.0 + (1.0 - a).sum(axis=-1), dtype=np.float64)


def equivalent_tau(rounds: npt.ArrayLike, length: int) -> FloatArray:
    """Tokens per round over a rollout of `length` positions, L / E[#rounds], shape of rounds."""
    return np.asarray(length / np.asarray(rounds, dtype=np.float64), dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RoundsComparison:
    """Two drafters on the same rollouts.

    Attributes:
        rounds_a, rounds_b: exact expected rounds per rollout, shape (R,).
        length: positions L per rollout.
    """

    rounds_a: FloatArray
    rounds_b: FloatArray
    length: int

    @property
    def difference(self) -> float:
        """Mean of rounds_b - rounds_a over rollouts (negative: b needs fewer rounds)."""
        return float((self.rounds_b - self.rounds_a).mean())

    @property
    def difference_standard_error(self) -> float:
        """Paired standard error of `difference` across rollouts (0 for one rollout)."""
        diff = self.rounds_b - self.rounds_a
        if diff.shape[0] < 2:
            return 0.0
        return float(diff.std(ddof=1) / np.sqrt(diff.shape[0]))


def compare_rounds(acceptance_a: npt.ArrayLike, acceptance_b: npt.ArrayLike,
                   ) -> RoundsComparison:
    """Exact expected rounds of two drafters on the same rollouts, shapes (R, L, L) each."""
    a = np.asarray(acceptance_a, dtype=np.float64)
    b = np.asarray(acceptance_b, dtype=np.float64)
    if a.shape != b.shape:
        raise SpecError(f"acceptance: the two drafters' arrays differ in shape, {a.shape} vs "
                        f"{b.shape}; compare them on the same rollouts")
    return RoundsComparison(rounds_a=expected_rounds(a), rounds_b=expected_rounds(b),
                            length=int(a.shape[1]))

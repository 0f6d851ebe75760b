"""A prompt pool whose output lengths spread drains its batch (specsim.measurement.pool).

Expected values come from order statistics of the lognormal by quadrature, and from an
event-by-event simulation written here with its own seed, not from the module's vectorized
simulation."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest
from scipy import integrate, stats

from specsim.measurement.pool import pool_occupancy


def _lognormal(cv: float) -> stats.rv_continuous:
    """The lognormal of mean 1 and coefficient of variation cv."""
    sigma = math.sqrt(math.log1p(cv * cv))
    return stats.lognorm(s=sigma, scale=math.exp(-sigma * sigma / 2.0))


def _order_mean(dist: stats.rv_continuous, j: int, n: int) -> float:
    """E of the j-th smallest of n draws, by quadrature of its density."""
    coef = math.factorial(n) / (math.factorial(j - 1) * math.factorial(n - j))

    def density(x: float) -> float:
        f = dist.cdf(x)
        return float(x * coef * f ** (j - 1) * (1.0 - f) ** (n - j) * dist.pdf(x))

    return float(integrate.quad(density, 0.0, np.inf, limit=200)[0])


@pytest.mark.parametrize("cv", [0.66, 0.3])
def test_requests_that_start_together_leave_by_order_statistics(cv: float) -> None:
    """Four requests in four slots all start at once; the batch is 4 until the shortest
    ends, then 3 until the second ends, ...: the time at batch k is the spacing
    E[L_(5-k)] - E[L_(4-k)] of the lengths' order statistics (mean length 1)."""
    dist = _lognormal(cv)
    means = [0.0] + [_order_mean(dist, j, 4) for j in range(1, 5)]
    occupancy = pool_occupancy(4, 4, cv)
    for k in range(1, 5):
        expected = means[5 - k] - means[4 - k]
        assert occupancy[k] == pytest.approx(expected, rel=0.05, abs=0.01)


def _makespan(slots: int, requests: int, cv: float, trials: int, seed: int) -> float:
    """Mean time until the last request ends, clients taking prompts in order as a slot
    frees up: an event simulation with a heap, one trial at a time."""
    sigma = math.sqrt(math.log1p(cv * cv))
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(trials):
        lengths = rng.lognormal(-sigma * sigma / 2.0, sigma, requests)
        free = [0.0] * slots
        heapq.heapify(free)
        end = 0.0
        for length in lengths:
            start = heapq.heappop(free)
            heapq.heappush(free, start + length)
            end = max(end, start + length)
        total += end
    return total / trials


@pytest.mark.parametrize(("slots", "requests"), [(8, 20), (64, 80), (16, 20), (4, 20)])
def test_a_pool_takes_as_long_as_its_last_request(slots: int, requests: int) -> None:
    """The time over every batch size is the run's length (in mean request lengths), and
    the tokens over them are the pool's: sum(w_k) = E[makespan], sum(k w_k) = requests."""
    occupancy = pool_occupancy(slots, requests, 0.66)
    assert sum(k * w for k, w in occupancy.items()) == pytest.approx(requests)
    expected = _makespan(slots, requests, 0.66, trials=3000, seed=7)
    assert sum(occupancy.values()) == pytest.approx(expected, rel=0.03)


def test_equal_lengths_run_in_waves_and_spread_ones_drain() -> None:
    """With equal lengths 20 prompts in 64 slots are one wave at batch 20; with MT-Bench's
    spread the run lasts as long as its longest request, at a batch that falls as the
    others end: a step time flat in the batch makes tokens/s = 20 / E[max of 20]."""
    assert pool_occupancy(64, 20) == {20: 1.0}
    spread = pool_occupancy(64, 20, 0.66)
    assert max(spread) == 20 and min(spread) == 1
    longest = _order_mean(_lognormal(0.66), 20, 20)
    assert sum(spread.values()) == pytest.approx(longest, rel=0.03)


@pytest.mark.parametrize("bad", [-0.1, 3.5, float("nan")])
def test_a_spread_outside_its_range_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="cv"):
        pool_occupancy(8, 20, bad)

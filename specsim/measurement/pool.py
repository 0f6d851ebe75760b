"""How a benchmark's requests occupy the batch when their output lengths differ.

A client that keeps `slots` requests in flight over a pool of prompts (a thread pool over a
question set, `--max-concurrency` over `--num-prompts`) runs the batch full while prompts are
left, then drains it: each request leaves when its own output ends, so the last ones decode at a
small batch while the longest finishes. With equal output lengths the pool runs in waves of
`slots` (`waves_of_equal`); with lengths that spread, the run spends part of its time at every
batch size below `slots`, which lowers its tokens/s at large batch.

`pool_occupancy` gives the expected time the run spends at each batch size, in units of the
mean request's decoding time, so that a run's tokens/s is sum(k w_k) / sum(w_k t(k)) for a step
time t(k) at batch k, with sum(k w_k) = requests. Speculative rounds scale every request's
decoding by the same 1 / tau, so the same occupancy holds for rounds.

A request's output tokens are lognormal with a stated coefficient of variation (a published
row's `output_cv`, with its source). Measured values, for the rows that state one:

- MT-Bench, one client running both turns of a question (SGLang's and SpecForge's MT-Bench
  benchmarks): 0.66, the mean of 0.64 / 0.70 / 0.63 over the 80 questions' summed turns in
  Medusa's published greedy answers of Vicuna-7B / 13B / 33B v1.3 (github.com/FasterDecoding/
  Medusa, llm_judge/data/mt_bench/model_answer; `new_tokens` per turn, at most 1,024 each; the
  turns' lengths correlate, 0.57-0.73, so summing two turns narrows the spread less than
  independent turns would); one turn alone 0.70 / 0.79 / 0.68;
- production chat: 0.77, the Azure LLM inference trace of 2023, conversation (19,366 requests,
  output tokens mean 211, median 129, p90 424; github.com/Azure/AzurePublicDataset).
"""

from __future__ import annotations

import functools
import math

import numpy as np

# Monte Carlo draws of a pool's lengths (a fixed seed: every call returns the same numbers).
TRIALS = 512
SEED = 20231201
# Largest coefficient of variation a row may state (a lognormal this wide has a p99 of ~7x
# its mean; the measured ones are 0.6-0.8).
MAX_CV = 3.0
# Batch sizes a run's occupancy is folded onto: the time at a batch k between two of them is
# split between the two in the proportions that give k, which keeps both sum(k w_k) and, for
# a step time linear in the batch between them, sum(w_k t(k)); the pool's own batch closes it.
GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def waves_of_equal(slots: int, requests: int | None) -> dict[int, float]:
    """{batch: time at it, in mean request lengths} for equal output lengths: requests //
    slots full waves, then one of the remainder (None: the batch stays full, one wave)."""
    if requests is None:
        return {slots: 1.0}
    full, rest = divmod(requests, slots)
    waves = {slots: float(full)} if full else {}
    if rest:
        waves[rest] = 1.0
    return waves


def pool_occupancy(slots: int, requests: int | None, cv: float = 0.0) -> dict[int, float]:
    """{batch size: expected time the run spends at it, in units of the mean request's
    decoding} for `requests` prompts kept `slots` at a time in flight, each request's output
    lognormal with coefficient of variation `cv` (0: equal lengths, `waves_of_equal`).
    sum(k w_k) = requests. requests None: a batch kept full throughout."""
    if slots < 1 or (requests is not None and requests < 1):
        raise ValueError("slots and requests must be positive")
    if not 0.0 <= cv <= MAX_CV:
        raise ValueError(f"cv must be within 0-{MAX_CV}, not {cv}")
    if cv == 0.0 or requests is None:
        return waves_of_equal(slots, requests)
    return dict(_spread(min(slots, requests), requests, float(cv)))


@functools.cache
def _spread(slots: int, requests: int, cv: float) -> tuple[tuple[int, float], ...]:
    """The occupancy of lengths that spread, folded onto GRID (cached: validate asks per
    row and batch)."""
    return _fold(_occupancy_histogram(slots, requests, cv), requests)


def _occupancy_histogram(slots: int, requests: int, cv: float) -> np.ndarray:
    """Expected time at each batch size 0..slots, (slots + 1,), in mean request lengths, over
    TRIALS pools whose requests start in order as slots free up (slots <= requests)."""
    sigma = math.sqrt(math.log1p(cv * cv))
    lengths = np.random.default_rng(SEED).lognormal(-sigma * sigma / 2.0, sigma,
                                                   size=(TRIALS, requests))
    free_at = np.zeros((TRIALS, slots))
    trials = np.arange(TRIALS)
    start = np.empty((TRIALS, requests))
    for i in range(requests):
        slot = np.argmin(free_at, axis=1)
        start[:, i] = free_at[trials, slot]
        free_at[trials, slot] = start[:, i] + lengths[:, i]
    times = np.concatenate([start, start + lengths], axis=1)
    delta = np.concatenate([np.ones_like(start), -np.ones_like(start)], axis=1)
    order = np.argsort(times, axis=1, kind="stable")
    times = np.take_along_axis(times, order, axis=1)
    active = np.cumsum(np.take_along_axis(delta, order, axis=1), axis=1)
    spans = np.diff(times, axis=1)  # time between consecutive events, at active[:, :-1]
    hist = np.zeros(slots + 1)
    np.add.at(hist, np.clip(active[:, :-1], 0, slots).astype(np.int64), spans)
    return hist / TRIALS


def _fold(hist: np.ndarray, requests: int) -> tuple[tuple[int, float], ...]:
    """Histogram weights folded onto GRID (see there), scaled so that sum(k w_k) = requests
    exactly (the Monte Carlo mean is within a fraction of a percent of it)."""
    top = len(hist) - 1
    grid = np.array([g for g in GRID if g < top] + [top], dtype=np.float64)
    folded = np.zeros(len(grid))
    for k in range(1, top + 1):
        if hist[k] <= 0.0:
            continue
        i = int(np.searchsorted(grid, k))
        if grid[i] == k:
            folded[i] += hist[k]
            continue
        f = (k - grid[i - 1]) / (grid[i] - grid[i - 1])
        folded[i - 1] += hist[k] * (1.0 - f)
        folded[i] += hist[k] * f
    folded *= requests / float(np.sum(grid * folded))
    return tuple((int(g), float(w)) for g, w in zip(grid, folded, strict=True) if w > 0.0)

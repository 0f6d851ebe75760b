"""Latency as users measure it: time to first token and the gaps between streamed chunks.

A replica in steady state at batch B runs rounds (a decoding step, or a draft-and-verify round
of N drafted tokens). Per round B tau / L_out requests finish on average and as many arrive
(Poisson), each with a prompt drawn from the scenario's lognormal lengths. Their prompt tokens
queue first come, first served for the round's chunked-prefill budget C = budget - B (N + 1)
(vLLM and SGLang schedule the decode tokens first and fill the rest of the pass with prompt
chunks). A round that prefills x prompt tokens takes d + f(x): d its decoding part, f the
marginal kernel time of x prompt tokens riding in its pass (`chunk_share_s`, not linear: a
small chunk rides almost free in a memory-bound pass, a large one pays full compute).

- Gap between chunks: the time of one round. Each round streams the tokens it accepted as one
  chunk, so this is what `vllm bench serve` reports as ITL (one sample per chunk); a client that
  spreads a chunk's gap over its tokens (sglang.bench_serving) sees it divided by tau on average.
- TTFT: the rest of the round the request arrives in (uniform), then the rounds that prefill the
  prompt tokens queued ahead of it and its own prompt; its first token comes with the last one.
- TPOT: the mean round over tau (`ServingTable.tpot_s`).

Simulated over ROUNDS rounds with a seeded generator (the same draws for every setting, so
numbers are reproducible and settings compare on the same traffic), vectorized over settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.forward.shapes import FloatArray
from specsim.specs.workloads import LengthDistribution

# Rounds simulated per setting, and the first rounds left out (the queue starts empty).
ROUNDS = 2048
WARMUP_ROUNDS = 256
# Share of arrivals left unserved at the end of the simulation above which the queue is taken
# as not draining (TTFT inf); the last round or two leave a fraction of a percent.
STUCK_SHARE = 0.05
# Quantiles reported: median, p90, p99.
QUANTILES = (0.5, 0.9, 0.99)
# Chunk sizes at which a round's prefill time f(x) is priced, as fractions of the budget C
# (log-spaced; f is interpolated between them, f(0) = 0).
CHUNK_FRACTIONS = np.geomspace(1.0 / 4096, 1.0, 25)


@dataclass(frozen=True, slots=True, kw_only=True)
class Latency:
    """What a user of one setting sees, seconds: TTFT and chunk-gap quantiles (QUANTILES)."""

    ttft_s: tuple[float, float, float]
    itl_s: tuple[float, float, float]
    tpot_s: float

    @property
    def ttft_p90_s(self) -> float:
        return self.ttft_s[1]

    @property
    def itl_p99_s(self) -> float:
        return self.itl_s[2]


def _weighted_quantiles(values: FloatArray, weights: FloatArray) -> FloatArray:
    """(M, len(QUANTILES)) quantiles of each column of values (R, M) under weights (R, M)."""
    order = np.argsort(values, axis=0)
    v = np.take_along_axis(values, order, axis=0)
    w = np.take_along_axis(weights, order, axis=0)
    cum = np.cumsum(w, axis=0)
    total = cum[-1]
    out = np.empty((values.shape[1], len(QUANTILES)))
    for j, q in enumerate(QUANTILES):
        idx = np.argmax(cum >= q * total[None, :], axis=0)
        out[:, j] = v[idx, np.arange(values.shape[1])]
    out[total <= 0] = np.nan
    return out


def simulate(decode_s: ArrayLike, chunk_tokens: ArrayLike, arrivals_per_round: ArrayLike,
             chunk_s: ArrayLike, prompt: LengthDistribution, *, closed_loop: ArrayLike = 0,
             rounds: int = ROUNDS, seed: int = 0) -> tuple[FloatArray, FloatArray]:
    """TTFT and chunk-gap quantiles of M settings (see the module docstring).

    Args:
        decode_s: (M,) the decoding part d of a round, s.
        chunk_tokens: (M,) the prefill budget C of a round, tokens (> 0).
        arrivals_per_round: (M,) mean requests arriving per round.
        chunk_s: (M, P) the seconds f that CHUNK_FRACTIONS x C prompt tokens add to a round
            (interpolated linearly between them, 0 at no tokens).
        prompt: the scenario's prompt lengths.
        closed_loop: (M,) 0 for requests arriving at random times (a service: the rest of the
            round they arrive in); else the concurrency C of a benchmark whose clients send a
            request when their previous one ends, at the end of a round: it waits out the whole
            round the others have started, and none when it is alone (C = 1).

    Returns:
        ttft (M, 3), gaps (M, 3): seconds at QUANTILES; TTFT is inf for a setting whose queue
        does not drain within the simulated rounds.
    """
    d = np.atleast_1d(np.asarray(decode_s, dtype=np.float64))
    cap = np.atleast_1d(np.asarray(chunk_tokens, dtype=np.float64))
    lam = np.atleast_1d(np.asarray(arrivals_per_round, dtype=np.float64))
    fs = np.concatenate([np.zeros((d.size, 1)),
                         np.atleast_2d(np.asarray(chunk_s, dtype=np.float64))], axis=1)
    grid = np.concatenate([[0.0], CHUNK_FRACTIONS])
    m = d.size
    rng = np.random.default_rng(seed)
    # The same uniforms for every setting: arrivals by inverse CDF of their own Poisson rate.
    count = _poisson(rng.random((rounds, 1)), lam[None, :])
    most = int(count.max()) if count.size else 0
    lengths = prompt.sample(rng, rounds * max(most, 1)).reshape(rounds, max(most, 1))
    upto = np.arange(max(most, 1))[None, None, :] < count[:, :, None]  # (R, M, most)
    arrived = np.sum(np.where(upto, lengths[:, None, :], 0.0), axis=2)  # (R, M)
    # One tagged request arrives in every round (Poisson arrivals see the queue as it is on
    # average over rounds), with its own prompt, a place among the round's other arrivals and
    # a share of its arrival round still to run; it joins no queue, so it changes nothing.
    tagged = prompt.sample(rng, rounds).reshape(rounds, 1)
    before = rng.random((rounds, 1))
    left = rng.random((rounds, 1))

    queue = np.zeros(m)  # prompt tokens waiting at the start of a round
    gaps = np.empty((rounds, m))
    waiting = np.empty((rounds, m))  # tokens still queued after a round's prefill
    for r in range(rounds):
        x = np.minimum(queue, cap)
        gaps[r] = d + _interp_rows(x / cap, grid, fs)
        queue = queue - x
        waiting[r] = queue
        queue = queue + arrived[r]

    ahead = waiting + before * arrived
    need = np.ceil((ahead + tagged) / cap[None, :]).astype(np.int64)  # rounds to prefill
    cum = np.concatenate([np.zeros((1, m)), np.cumsum(gaps, axis=0)])  # cum[r] = before r
    rows = np.arange(rounds)[:, None]
    last = rows + need  # the round that emits the first token
    done = last < rounds
    end = cum[np.minimum(last, rounds - 1) + 1, np.arange(m)[None, :]]
    # its own prompt lengthens the rounds that prefill it: whole budgets, then the rest
    whole = np.floor(tagged / cap[None, :])
    own = whole * _interp_rows(np.ones((1, m)), grid, fs) \
        + _interp_rows(tagged / cap[None, :] - whole, grid, fs)
    clients = np.broadcast_to(np.asarray(closed_loop, dtype=np.float64), (m,))[None, :]
    rest = np.where(clients == 0, 1.0 - left, np.where(clients > 1, 1.0, 0.0)) * gaps
    ttft = rest + end - cum[rows + 1, np.arange(m)[None, :]] + own
    keep = slice(WARMUP_ROUNDS, rounds)
    ttft_q = _weighted_quantiles(np.where(done, ttft, np.inf)[keep],
                                 done[keep].astype(np.float64))
    # tagged requests the simulated rounds do not serve: the last round's or two, or those of
    # a queue that keeps growing; more than STUCK_SHARE of them: the queue does not drain
    unserved = 1.0 - done[keep].mean(axis=0)
    ttft_q[unserved > STUCK_SHARE] = np.inf
    gap_q = np.quantile(gaps[keep], QUANTILES, axis=0).T
    return ttft_q, gap_q


def _poisson(u: FloatArray, lam: FloatArray) -> FloatArray:
    """Poisson(lam) counts at uniforms u by inverse CDF (broadcast), so that every setting sees
    the same draws: the count is the first k with P(X <= k) >= u. The CDF is summed from a
    start 12 standard deviations below the mean (the mass below it is under 1e-30), its
    probability taken in log space, so large rates neither underflow nor loop long."""
    lam = np.maximum(np.asarray(lam, dtype=np.float64), 1e-300)
    start = np.floor(np.maximum(lam - 12.0 * np.sqrt(lam) - 12.0, 0.0))
    log_fact = np.vectorize(math.lgamma, otypes=[np.float64])(start + 1.0)
    p = np.exp(-lam + start * np.log(lam) - log_fact)
    cdf = p.copy()
    count = np.zeros(np.broadcast_shapes(np.shape(u), lam.shape))
    for step in range(1, int(np.max(24.0 * np.sqrt(lam) + 40.0)) + 1):
        above = u > cdf
        if not above.any():
            break
        count += above
        p = p * lam / (start + step)
        cdf = cdf + p
    return np.asarray(start + count, dtype=np.float64)


def _interp_rows(x: FloatArray, grid: FloatArray, fs: FloatArray) -> FloatArray:
    """fs[m] interpolated linearly over the shared grid at x[..., m]: x (M,) or (R, M)."""
    j = np.clip(np.searchsorted(grid, x, side="right"), 1, grid.size - 1)
    cols = np.arange(fs.shape[0])
    lo, hi = grid[j - 1], grid[j]
    t = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    return np.asarray(fs[cols, j - 1] + t * (fs[cols, j] - fs[cols, j - 1]))

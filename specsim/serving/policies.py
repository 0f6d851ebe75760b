"""Batch-level speculation policies over a load sweep: fixed drafts, DSpark, goodput (TurboSpec).

Every policy decides how many tokens each request of a batch of B drafts per round; a round
then takes the engine round time of its token count (`RoundProfile`, from `speedup_table`)
and yields 1 + sum_k prod_{i<=k} pi_{b,i} tokens per request b in expectation.

- fixed: every request drafts the same chain (or the same tree), whatever the load.
- DSpark (the article's DSpark section): the confidences pi_{b,i} give each candidate position
  a survival prod_{i<=k} pi_{b,i}; positions are sorted by survival (non-increasing along a
  request, so any prefix of the sorted list is a set of draft prefixes) and the scheduler keeps
  the m best that maximize expected tokens per round x steps per second SPS(B + m).
- goodput (TurboSpec, Liu et al. 2024): one draft length for the batch, adjusted online by
  measuring goodput (accepted tokens per second, Monte Carlo over a window of rounds) at the
  neighbouring lengths and moving to the best, starting from the length the previous load
  settled on (a draft of 1 at the first load: the controller lengthens while goodput grows).
  At every load it also measures plain decoding and turns speculation off where that is
  faster, so the policy is never slower than plain decoding by more than its measurement
  noise (a hill climb alone stayed at long drafts at high load, 0.46x plain at batch 256).

Requests' confidences are drawn with a seeded generator: a per-request multiplier (Beta around
1) on the acceptance profile's per-position alphas. The DSpark head is trained to predict the
acceptance rate, so the simulation takes its confidences as exact.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.forward.shapes import FloatArray
from specsim.specs.acceptance import AcceptanceProfile, rank_acceptance_geometric
from specsim.speculation.speedup import Candidates, Setup, speedup_table, tree_candidates

LOADS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# Spread of per-request acceptance: Beta(K a, K (1 - a)), mean a (a scenario choice).
CONCENTRATION = 20.0
WINDOW_ROUNDS = 32  # rounds a goodput measurement averages over
MAX_STEPS = 12  # controller moves per load level


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundProfile:
    """Round seconds of uniform chains of 0..max_gamma draft tokens, (batch, gamma + 1)."""

    batch: FloatArray
    round_s: FloatArray

    def seconds(self, i: int, tokens_per_request: ArrayLike) -> FloatArray:
        """Round time at batch index i for a mean of `tokens_per_request` scored per request
        (1 + drafted), linear between the uniform chains."""
        n = np.arange(self.round_s.shape[1], dtype=np.float64) + 1.0
        t = np.asarray(tokens_per_request, dtype=np.float64)
        return np.asarray(np.interp(t, n, self.round_s[i]), dtype=np.float64)


def round_profile(setup: Setup, batch: ArrayLike, max_gamma: int) -> RoundProfile:
    """The engine round time of every uniform chain length at every batch size."""
    gamma = np.arange(max_gamma + 1, dtype=np.float64)
    chains = Candidates(nodes=gamma, depth=gamma, tau=np.ones_like(gamma),
                        max_width=np.minimum(gamma, 1.0), shape=("chain",) * gamma.size)
    table = speedup_table(setup, batch, chains)
    return RoundProfile(batch=table.batch, round_s=table.round_s)


def confidences(profile: AcceptanceProfile, requests: int, max_gamma: int,
                rng: np.random.Generator) -> FloatArray:
    """(requests, max_gamma) per-position acceptance of each request, seeded."""
    alphas = np.asarray(profile.alphas(max_gamma), dtype=np.float64)
    mean = float(np.clip(alphas.mean(), 1e-3, 1 - 1e-3))
    scale = rng.beta(CONCENTRATION * mean, CONCENTRATION * (1 - mean), size=requests) / mean
    return np.asarray(np.clip(alphas[None, :] * scale[:, None], 0.0, 0.999), dtype=np.float64)


def survival(conf: FloatArray) -> FloatArray:
    """prod_{i<=k} pi_{b,i}: chance the first k drafted tokens of request b all survive."""
    return np.asarray(np.cumprod(conf, axis=1), dtype=np.float64)


def dspark_allocation(surv: FloatArray, rounds: RoundProfile, i: int
                      ) -> tuple[FloatArray, float]:
    """Draft length per request and the expected tokens per second (DSpark's scheduler).

    Sort all candidate positions by survival (ties: request, then position); the objective
    (B + sum of the m best survivals) x SPS(B + m) is evaluated for every m at once.
    """
    b, g = surv.shape
    flat = surv.ravel()
    order = np.lexsort((np.tile(np.arange(g), b), np.repeat(np.arange(b), g), -flat))
    gains = np.concatenate([[0.0], np.cumsum(flat[order])])
    m = np.arange(gains.size, dtype=np.float64)
    rate = (b + gains) / rounds.seconds(i, 1.0 + m / b)
    best = int(np.argmax(rate))
    lengths = np.zeros(b * g)
    lengths[order[:best]] = 1.0
    return lengths.reshape(b, g).sum(axis=1), float(rate[best])


def fixed_rate(surv: FloatArray, rounds: RoundProfile, i: int, gamma: int) -> float:
    """Expected tokens per second when every request drafts a chain of gamma."""
    b = surv.shape[0]
    tokens = b + surv[:, :gamma].sum()
    return float(tokens / rounds.seconds(i, gamma + 1.0))


def measured_rate(conf: FloatArray, rounds: RoundProfile, i: int, gamma: int,
                  rng: np.random.Generator) -> float:
    """Goodput of a chain of gamma measured over WINDOW_ROUNDS sampled rounds."""
    b = conf.shape[0]
    if gamma == 0:
        return float(b / rounds.seconds(i, 1.0))
    draws = rng.random((WINDOW_ROUNDS, b, gamma)) < conf[None, :, :gamma]
    accepted = np.cumprod(draws, axis=2).sum(axis=2)  # accepted prefix per request and round
    tokens = (accepted + 1).sum(axis=1).mean()
    return float(tokens / rounds.seconds(i, gamma + 1.0))


def goodput_length(conf: FloatArray, rounds: RoundProfile, i: int, start: int,
                   rng: np.random.Generator) -> int:
    """TurboSpec-style hill climb on measured goodput from `start` (ties keep the length),
    then off (0) where plain decoding measures faster than the length it settled on."""
    g = conf.shape[1]
    gamma = start
    for _ in range(MAX_STEPS):
        near = [k for k in (gamma - 1, gamma, gamma + 1) if 0 <= k <= g]
        rates = [measured_rate(conf, rounds, i, k, rng) for k in near]
        best = near[int(np.argmax(rates))]
        if best == gamma:
            break
        gamma = best
    if gamma and measured_rate(conf, rounds, i, 0, rng) >= measured_rate(conf, rounds, i,
                                                                          gamma, rng):
        return 0
    return gamma


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySweep:
    """Expected output tokens/s of each policy at each load; (policy, load) arrays.

    mean_draft: mean drafted tokens per request (nodes for the tree policy).
    """

    batch: FloatArray
    policies: tuple[str, ...]
    tokens_per_s: FloatArray
    mean_draft: FloatArray

    def relative_to_none(self) -> FloatArray:
        """Each policy's throughput over plain decoding's at the same load."""
        none = self.tokens_per_s[self.policies.index("none")]
        return np.asarray(self.tokens_per_s / none[None, :], dtype=np.float64)

    def slower_than_none(self, policy: str) -> FloatArray:
        """Loads at which `policy` makes the server slower than not speculating."""
        ratio = self.relative_to_none()[self.policies.index(policy)]
        return np.asarray(self.batch[ratio < 1.0], dtype=np.float64)


def tree_rate(setup: Setup, alpha: float, batch: FloatArray, nodes: int
              ) -> tuple[FloatArray, float]:
    """Tokens/s of a fixed best-first tree of `nodes` nodes (rank model a_j = a (1 - a)^j)."""
    cands = tree_candidates(rank_acceptance_geometric(alpha, 16), nodes)
    last = Candidates(nodes=cands.nodes[-1:], depth=cands.depth[-1:], tau=cands.tau[-1:],
                      max_width=cands.max_width[-1:], shape=cands.shape[-1:])
    table = speedup_table(setup, batch, last)
    return table.throughput[:, 0], float(last.tau[0])


def simulate_policies(setup: Setup, profile: AcceptanceProfile, *, loads: ArrayLike = LOADS,
                      max_gamma: int = 16, fixed: tuple[int, ...] = (2, 8),
                      tree_nodes: int = 64, seed: int = 0) -> PolicySweep:
    """Every policy at every load (concurrent requests), deterministic for a seed.

    setup: target, GPU, drafter (or draft cost) and engine; its context is used as is.
    fixed: chain lengths of the fixed policies; tree_nodes: the fixed tree's size (0: none).
    """
    batch = np.atleast_1d(np.asarray(loads, dtype=np.float64))
    rounds = round_profile(setup, batch, max_gamma)
    rng = np.random.default_rng(seed)
    names = ["none", *(f"fixed chain {g}" for g in fixed)]
    if tree_nodes:
        names.append(f"fixed tree {tree_nodes}")
    names += ["DSpark allocation", "goodput (TurboSpec)"]
    rate = np.zeros((len(names), batch.size))
    draft = np.zeros_like(rate)
    if tree_nodes:
        alpha = float(profile.alphas(1)[0])
        tree, _ = tree_rate(dataclasses.replace(setup), alpha, batch, tree_nodes)
    start = 1
    for i, b in enumerate(batch.astype(int)):
        conf = confidences(profile, b, max_gamma, rng)
        surv = survival(conf)
        row = [fixed_rate(surv, rounds, i, 0)]
        row += [fixed_rate(surv, rounds, i, min(g, max_gamma)) for g in fixed]
        lengths = [0.0, *(float(min(g, max_gamma)) for g in fixed)]
        if tree_nodes:
            row.append(float(tree[i]))
            lengths.append(float(tree_nodes))
        alloc, best = dspark_allocation(surv, rounds, i)
        row.append(best)
        lengths.append(float(alloc.mean()))
        gamma = goodput_length(conf, rounds, i, start, rng)
        start = max(gamma, 1)  # the next load resumes from the last length (from 1 if off)
        row.append(fixed_rate(surv, rounds, i, gamma))
        lengths.append(float(gamma))
        rate[:, i] = row
        draft[:, i] = lengths
    return PolicySweep(batch=batch, policies=tuple(names), tokens_per_s=rate, mean_draft=draft)

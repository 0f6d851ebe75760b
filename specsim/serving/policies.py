"""Batch-level speculation policies over a load sweep: fixed drafts, DSpark, goodput (TurboSpec).

Every policy decides how many tokens each request of a batch of B drafts per round; a round
then takes the engine round time of its token count (`RoundProfile`, from `speedup_table`)
and yields 1 + sum_k prod_{i<=k} pi_{b,i} tokens per request b in expectation.

- fixed: every request drafts the same chain (or the same tree), whatever the load.
- DSpark (the article's DSpark section): the confidences pi_{b,i} give each candidate position
  a survival prod_{i<=k} pi_{b,i}; for every cap L on the longest draft, the positions below L
  are sorted by survival (non-increasing along a request, so any prefix of the sorted list is
  a set of draft prefixes) and the scheduler keeps the L and the m best positions that
  maximize expected tokens per round / round time. The round time is the one
  every policy here is charged (`RoundProfile.seconds`): verification of B + m tokens, the
  drafter's passes up to the longest draft, the speculation overhead once anything is drafted.
  m = 0 (plain decoding) and every uniform chain are in its search, so it is never below plain
  decoding nor below the best fixed chain. (Scoring rounds by the mean draft alone, as the
  article's SPS(B + m) does, let long drafts ride free: in the Llama-3.1-8B / EAGLE-3 / H100
  chat report it claimed 1.07x plain at batch 64 for drafts of up to 16 tokens, which the
  drafter's 16 passes make 0.91x.)
- best fixed chain (per load): the fixed chain length that is fastest at each load, chosen
  with hindsight; the yardstick for the adaptive policies, which must find it online.
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
# A goodput measurement averages over WINDOW_ROUNDS rounds, and over at least
# WINDOW_REQUEST_ROUNDS request-rounds (a controller measures over a time window: at light load
# a round carries few requests, so it takes more of them; 1,024 draws of a round's tokens keep
# the measurement within about 2% at batch 1).
WINDOW_ROUNDS = 32
WINDOW_REQUEST_ROUNDS = 1024
MAX_STEPS = 12  # controller moves per load level
NONE, BEST_FIXED = "none", "best fixed chain (per load)"
DSPARK, GOODPUT = "DSpark allocation", "goodput (TurboSpec)"
ADAPTIVE = (DSPARK, GOODPUT)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundProfile:
    """The parts of the engine round time of uniform chains of 0..max_gamma draft tokens.

    batch: (loads,) concurrent requests. verify_s, draft_s: (loads, max_gamma + 1) seconds of
    the target's verification pass and of the drafter, per chain length. overhead_s: (loads,)
    host seconds a speculative round adds; hidden_s: (loads,) host seconds a speculative round
    overlaps with the GPU (its floor); combined as in `SpeedupTable.round_s`.
    """

    batch: FloatArray
    verify_s: FloatArray
    draft_s: FloatArray
    overhead_s: FloatArray
    hidden_s: FloatArray

    @property
    def round_s(self) -> FloatArray:
        """(loads, max_gamma + 1) seconds of a round in which every request drafts gamma."""
        speculating = np.arange(self.verify_s.shape[1]) > 0
        gpu = self.verify_s + self.draft_s + self.overhead_s[:, None] * speculating
        return np.asarray(np.maximum(gpu, self.hidden_s[:, None] * speculating))

    def seconds(self, i: int, drafted: ArrayLike, longest: ArrayLike) -> FloatArray:
        """Round seconds at load index i when the batch drafts `drafted` tokens in all and its
        longest draft is `longest` tokens (integer arrays that broadcast together).

        Verification scores B + drafted tokens: linear between the uniform chains on the mean
        tokens per request. The drafter runs as for a uniform chain of the longest draft (an
        autoregressive drafter's passes; a parallel drafter's block costs the same at any
        length). The host overhead is paid once anything is drafted.
        """
        gamma = np.arange(self.verify_s.shape[1], dtype=np.float64)
        per_request = np.asarray(drafted, dtype=np.float64) / self.batch[i]
        verify = np.interp(per_request, gamma, self.verify_s[i])
        longest = np.asarray(longest, dtype=np.intp)
        speculating = longest > 0
        gpu = verify + self.draft_s[i, longest] + self.overhead_s[i] * speculating
        return np.asarray(np.maximum(gpu, self.hidden_s[i] * speculating), dtype=np.float64)


def round_profile(setup: Setup, batch: ArrayLike, max_gamma: int) -> RoundProfile:
    """The parts of the engine round time of every uniform chain length at every batch size."""
    gamma = np.arange(max_gamma + 1, dtype=np.float64)
    chains = Candidates(nodes=gamma, depth=gamma, tau=np.ones_like(gamma),
                        max_width=np.minimum(gamma, 1.0), shape=("chain",) * gamma.size)
    table = speedup_table(setup, batch, chains)
    per_load = np.ones_like(table.batch)
    return RoundProfile(batch=table.batch, verify_s=table.verify_s, draft_s=table.draft_s,
                        overhead_s=per_load * table.round_overhead_s,
                        hidden_s=per_load * table.round_host_overlap_s)


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

    surv: (B, g) survivals, non-increasing along each request. For every cap L = 1..g on the
    longest draft, sort the positions below L by survival (ties: request, then position) and
    evaluate (B + sum of the m best survivals) / round seconds for every m at once; the m best
    below L are the most tokens any allocation of m drafts no longer than L expects, so (with
    the drafter's time non-decreasing in length) the best over (L, m) is the best allocation.
    Plain decoding (m = 0) is the start; a later candidate must be strictly faster.
    Returns (B,) drafted tokens per request and tokens/s.
    """
    b, g = surv.shape
    lengths, best = np.zeros(b), float(b / rounds.seconds(i, 0.0, 0)[()])
    for cap in range(1, g + 1):
        flat = surv[:, :cap].ravel()
        request, position = np.repeat(np.arange(b), cap), np.tile(np.arange(cap), b)
        order = np.lexsort((position, request, -flat))
        m = np.arange(1, order.size + 1)
        longest = np.maximum.accumulate(position[order] + 1)
        rate = (b + np.cumsum(flat[order])) / rounds.seconds(i, m, longest)
        k = int(np.argmax(rate))
        if rate[k] > best:
            best = float(rate[k])
            lengths = np.bincount(request[order[:k + 1]], minlength=b).astype(np.float64)
    return lengths, best


def fixed_rate(surv: FloatArray, rounds: RoundProfile, i: int, gamma: int) -> float:
    """Expected tokens per second when every request drafts a chain of gamma."""
    b = surv.shape[0]
    tokens = b + surv[:, :gamma].sum()
    return float(tokens / rounds.seconds(i, b * gamma, gamma)[()])


def best_fixed_length(surv: FloatArray, rounds: RoundProfile, i: int) -> tuple[int, float]:
    """The chain length 0..g every request drafting it is fastest at load i (ties: the
    shortest), and its tokens per second: the per-load best fixed setting."""
    rates = [fixed_rate(surv, rounds, i, gamma) for gamma in range(surv.shape[1] + 1)]
    gamma = int(np.argmax(rates))
    return gamma, rates[gamma]


def measured_rate(conf: FloatArray, rounds: RoundProfile, i: int, gamma: int,
                  rng: np.random.Generator) -> float:
    """Goodput of a chain of gamma measured over sampled rounds (WINDOW_ROUNDS, and at least
    WINDOW_REQUEST_ROUNDS request-rounds)."""
    b = conf.shape[0]
    if gamma == 0:
        return float(b / rounds.seconds(i, 0.0, 0)[()])
    window = max(WINDOW_ROUNDS, -(-WINDOW_REQUEST_ROUNDS // b))
    draws = rng.random((window, b, gamma)) < conf[None, :, :gamma]
    accepted = np.cumprod(draws, axis=2).sum(axis=2)  # accepted prefix per request and round
    tokens = (accepted + 1).sum(axis=1).mean()
    return float(tokens / rounds.seconds(i, b * gamma, gamma)[()])


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

    def relative_to(self, policy: str) -> FloatArray:
        """Each policy's throughput over `policy`'s at the same load."""
        ref = self.tokens_per_s[self.policies.index(policy)]
        return np.asarray(self.tokens_per_s / ref[None, :], dtype=np.float64)

    def relative_to_none(self) -> FloatArray:
        """Each policy's throughput over plain decoding's at the same load."""
        return self.relative_to(NONE)

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
    names = [NONE, *(f"fixed chain {g}" for g in fixed)]
    if tree_nodes:
        names.append(f"fixed tree {tree_nodes}")
    names += [BEST_FIXED, DSPARK, GOODPUT]
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
        best_gamma, best_rate = best_fixed_length(surv, rounds, i)
        row.append(best_rate)
        lengths.append(float(best_gamma))
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

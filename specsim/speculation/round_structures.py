"""Rounds beyond one draft and one verification (the article's "Beyond a single round").

Every structure here drafts a chain; alpha_i is the conditional acceptance of chain position i
(the acceptance profile), s_i = alpha_1 ... alpha_i its survival, tau(g) = 1 + s_1 + ... + s_g
the tokens of a single round of g draft tokens, V(n) the verification pass scoring n draft
tokens per request (plus the bonus position) and D(g) the drafting of g tokens, both at the
round's batch size; H the host work a round adds, H_o the host work an engine overlaps with
the GPU (`SpeedupTable.round_s`).

single (one round):
    round = max(V(g) + D(g) + H, H_o),  tokens = tau(g)

multistage (DLoop, Gu et al. 2026): k drafting stages of g tokens each, the drafter standing
in its own hidden states for the target's it has not got yet, then one verification of all kg:
    round = max(V(kg) + k D(g) + H, H_o)        (h = 1; else V(E K) + E[max_b K_b / g] D(g))
    tokens = 1 + sum_{i<=kg} prod_{l<=i} a_l,  a_{(s-1)g+j} = rho^(s-1) alpha_j
One verification checks the whole chain, so a token of stage s counts only if every earlier
token was accepted. Each stage is a fresh block anchored at the previous stage's last token, so
its positions restart the per-position profile; rho (`stage_acceptance`) is what drafting from
its own states instead of the target's costs each further stage (1: loop-aware training
closes that gap entirely, the bound). DLoop drafts the next stage only while the drafter stays
confident: here, while the predicted chance that the draft so far is all accepted,
a_1 ... a_{sg}, stays at or above 1 - h (the adaptive stop's head and rule, asked between
stages only), up to k stages; h = 1 always drafts k. A round then drafts K tokens, and the
batch as many stages as its longest draft. k = 1 is the single round exactly.

overlap (PEARL, Liu et al. 2024, post-verify): while the target verifies g drafted tokens, the
drafter drafts the g + 1 after them (its guess for the bonus position, then g more). The bonus
token equals that guess with probability alpha_{g+1} (the token-wise rule accepts it as a
draft), so the overlapped draft is used with probability q = s_g alpha_{g+1}; otherwise it is
thrown away and the next round first drafts alone:
    round = max(O + (1 - q) D(g) + H, H_o),  tokens = tau(g)
O is the overlapped part. On the drafter's own GPU (PEARL's setting) O = max(V(g), D(g + 1)).
On the same GPU both passes stream from one HBM and share its SMs, so the two together take
at least their bytes over the bandwidth and their flops over the peak:
    O = max(V(g), D(g + 1), V_mem(g) + D_mem(g + 1), V_fl(g) + D_fl(g + 1))
with V_mem, D_mem the passes' times on the same GPU with unbounded flops (their HBM time) and
V_fl, D_fl with unbounded bandwidth (their compute time).
Where both passes are memory-bound (small batch) O ~ V + D: the overlap hides only the
drafter's fixed latencies and host time, and the redrafting after a rejection makes it slower
than a single round. With a free drafter (D = 0) it is the single round exactly.

adaptive_stop (SpecDec++, Huang et al. 2024): the drafter drafts token by token while an
acceptance head predicts each token's acceptance a_i; it stops after token k once the
predicted chance of a rejection among the drafted tokens, 1 - a_1 ... a_k, exceeds the
threshold h, or at the cap g. The head is taken as calibrated: a_i is the token's true
acceptance, drawn per token from Beta(kappa alpha_i, kappa (1 - alpha_i)) (mean alpha_i).
kappa (`head_concentration`) is how sharp the head is: 0 a head that knows each token's outcome
(a_i in {0, 1}: it stops exactly at the first token the target will reject, the bound), inf one
that knows only alpha_i (the stop is a fixed length and nothing is gained over the best chain).
Given the a_i the acceptances are independent, so a round yields 1 + sum_{i<=K} a_1 ... a_i
tokens in expectation and the distribution of the stop K follows by dynamic programming over
the survival (`stop_lengths`). At batch B the verification scores the requests' mean draft and
an autoregressive drafter runs as many passes as the longest draft, P(max K <= k) = F(k)^B:
    round = max(V(E K) + E D(max_b K_b) + H, H_o)
h = 1 never stops: the single round of g tokens exactly. The optimizer picks h and the cap g.

Rejected work recycled into the next draft (Token Recycling, ReTrace, Carryover) is not a
structure here: see docs/round_structures.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import check_int, check_number, parameter_error
from specsim.forward.shapes import FloatArray
from specsim.specs.acceptance import AcceptanceProfile, tau_chain, tau_prefixes
from specsim.speculation import engine_time
from specsim.speculation.speedup import Setup, SpeedupTable, chain_candidates, speedup_table
from specsim.speculation.structure_results import (
    SPECDEC_HEAD_CONCENTRATION,
    StructureChoice,
    StructureComparison,
)

STRUCTURES = ("single", "multistage", "overlap", "adaptive_stop")
# Where the overlapped drafter runs: on the target's GPU, or on a GPU of its own (PEARL).
DEVICES = ("same", "separate")
# Stages the optimizer tries, k = 1..MAX_STAGES: a search range, not a measured limit. Stage k
# counts only where the (k - 1) g tokens before it survive whole (s_g^(k-1) of the rounds).
# The built-in DSpark on math (s_6 = 0.77) reaches it at batch 1-8, where with rho = 1 more
# stages would pay still more: a bound DLoop's published 5-41% does not bear out, so the range
# is not widened to chase it.
MAX_STAGES = 4
# Thresholds h the optimizer tries for the adaptive stop; 1.0 (never stop) is always added.
STOP_THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 10))
# Survival grid of the stop's dynamic program (log-spaced between 1 - h and 1) and the
# equal-probability atoms a Beta head distribution is cut into; with these the expected
# tokens of a round agree with a seeded Monte Carlo of 200,000 rounds within its noise
# (tests/test_round_structures.py).
SURVIVAL_POINTS = 384
BETA_ATOMS = 64
# A multi-stage drafter asks its head only between stages, so its survival grid spans down to
# 1e-6 (below, a token adds under 1e-6 to tau), in steps of 1% of the survival.
STAGE_SURVIVAL_FLOOR = 1e-6
STAGE_SURVIVAL_POINTS = 1389
# Scale of one GPU resource (flops, or HBM bandwidth) that leaves a pass only its time on the
# other (the memory or the compute part of the roofline).
UNBOUNDED = 1e9


def multistage_alphas(alphas: ArrayLike, stages: int, stage_acceptance: float = 1.0
                      ) -> FloatArray:
    """Conditional acceptance of the kg chain positions of k stages of g tokens, (kg,).

    Args:
        alphas: alpha_1..alpha_g of one stage's positions, shape (g,).
        stages: k >= 1.
        stage_acceptance: rho in [0, 1], the factor each further stage multiplies them by.
    """
    check_int(stages, "stages", low=1, high=1_000)
    check_number(stage_acceptance, "stage_acceptance", low=0.0, high=1.0)
    a = np.asarray(alphas, dtype=np.float64)
    factor = stage_acceptance ** np.arange(stages, dtype=np.float64)
    return np.asarray((factor[:, None] * a[None, :]).ravel(), dtype=np.float64)


def multistage_tau(alphas: ArrayLike, stages: int, stage_acceptance: float = 1.0) -> float:
    """Tokens per round of k stages of g tokens verified once (module docstring)."""
    return float(tau_chain(multistage_alphas(alphas, stages, stage_acceptance)))


def overlapped_s(verify_s: ArrayLike, draft_s: ArrayLike, verify_memory_s: ArrayLike,
                 draft_memory_s: ArrayLike, device: str = "same",
                 verify_compute_s: ArrayLike = 0.0, draft_compute_s: ArrayLike = 0.0
                 ) -> FloatArray:
    """Seconds of a verification and a drafting run at the same time (broadcast shapes).

    same: one GPU; the two share its HBM and its SMs, so they take at least the sum of their
    HBM times and the sum of their compute times. separate: the drafter on a GPU of its own;
    the longer of the two.
    """
    if device not in DEVICES:
        raise parameter_error("overlap_device",
                              f"{device!r} is not one of {', '.join(DEVICES)}")
    longer = np.maximum(np.asarray(verify_s, dtype=np.float64),
                        np.asarray(draft_s, dtype=np.float64))
    if device == "separate":
        return np.asarray(longer)
    memory = np.asarray(verify_memory_s, dtype=np.float64) + np.asarray(draft_memory_s)
    compute = np.asarray(verify_compute_s, dtype=np.float64) + np.asarray(draft_compute_s)
    return np.asarray(np.maximum(longer, np.maximum(memory, compute)))


@dataclass(frozen=True, slots=True, kw_only=True)
class StopLengths:
    """What an adaptive stop does per round, per setting (threshold h, cap c); S settings, the
    longest cap g.

    thresholds, caps: each setting's h and c, shape (S,).
    length_probability: P(the round drafts k tokens), k = 0..g, shape (S, g + 1) (k = 0 and
        k > c have probability 0: a round drafts at least one token and at most its cap).
    tau: expected tokens per round (accepted + 1), shape (S,).
    """

    thresholds: FloatArray
    caps: FloatArray
    length_probability: FloatArray
    tau: FloatArray

    @property
    def mean_length(self) -> FloatArray:
        """Expected draft tokens per round, shape (S,)."""
        k = np.arange(self.length_probability.shape[1], dtype=np.float64)
        return np.asarray(self.length_probability @ k, dtype=np.float64)

    def longest_probability(self, batch: ArrayLike) -> FloatArray:
        """P(the longest of B independent requests' drafts is k tokens), (B, S, g + 1)."""
        b = np.asarray(batch, dtype=np.float64).reshape(-1, 1, 1)
        cdf = np.clip(np.cumsum(self.length_probability, axis=1), 0.0, 1.0)[None]
        at_most = cdf ** b
        below = np.concatenate([np.zeros_like(at_most[..., :1]), at_most[..., :-1]], axis=-1)
        return np.asarray(at_most - below, dtype=np.float64)


# A finite kappa outside this range is as sharp (or as blunt) as the bounds 0 and inf, and
# scipy's Beta quantiles break there (NaN atoms past ~1e30, an overflow below ~1e-300).
HEAD_CONCENTRATION_RANGE = (1e-12, 1e12)


def check_head_concentration(value: float) -> None:
    """kappa: 0 (a head that knows each outcome), inf (one that knows only alpha), or a finite
    value in HEAD_CONCENTRATION_RANGE."""
    low, high = HEAD_CONCENTRATION_RANGE
    if not (value == 0.0 or value == math.inf or low <= value <= high):
        raise parameter_error("head_concentration", f"must be 0, inf or in [{low:g}, {high:g}], "
                              f"got {value:g}")


def head_atoms(alpha: float, concentration: float) -> tuple[FloatArray, FloatArray]:
    """Per-token acceptances a calibrated head predicts, as (values, probabilities) with mean
    alpha: Beta(kappa alpha, kappa (1 - alpha)) cut into BETA_ATOMS equal-probability bins,
    each at its conditional mean; kappa = 0: {0, 1}; kappa = inf: {alpha}. Cached (a chain
    repeats its alphas across the settings tried); the arrays are read-only."""
    values, probs = _head_atoms(float(alpha), float(concentration))
    for array in (values, probs):
        array.setflags(write=False)
    return values, probs


@lru_cache(maxsize=4096)
def _head_atoms(alpha: float, concentration: float) -> tuple[FloatArray, FloatArray]:
    if concentration == 0.0 or alpha in (0.0, 1.0):
        return np.array([0.0, 1.0]), np.array([1.0 - alpha, alpha])
    if math.isinf(concentration):
        return np.array([alpha]), np.array([1.0])
    probs = np.full(BETA_ATOMS, 1.0 / BETA_ATOMS)
    if alpha > 0.5:  # the rejection 1 - a is the small one: resolve it, not a near 1
        values, _ = _head_atoms(1.0 - alpha, concentration)
        return np.asarray(1.0 - values[::-1]), probs
    a, b = concentration * alpha, concentration * (1.0 - alpha)
    # The Beta quantiles and CDF as regularized incomplete beta functions (what
    # scipy.stats.beta.ppf / cdf evaluate; scipy.special imports in a third of the time)
    from scipy import special

    edges = special.betaincinv(a, b, np.linspace(0.0, 1.0, BETA_ATOMS + 1))
    # E[X 1{X <= x}] = alpha I_x(a + 1, b): each bin's conditional mean, mean alpha
    partial = alpha * special.betainc(a + 1.0, b, edges)
    values = np.clip(np.diff(partial) * BETA_ATOMS, 0.0, 1.0)
    # where the quantiles saturate in floating point, restore the mean exactly in [0, 1]
    mean = float(values.mean())
    if mean > alpha:
        values = values * (alpha / mean)
    elif mean < alpha:
        values = values + (1.0 - values) * (alpha - mean) / (1.0 - mean)
    return np.asarray(values), probs


def stop_lengths(alphas: ArrayLike, thresholds: ArrayLike, head_concentration: float = 0.0,
                 *, every_cap: bool = False, stride: int = 1) -> StopLengths:
    """The adaptive stop's draft lengths and tokens per round (module docstring).

    Args:
        alphas: alpha_1..alpha_g, the mean acceptance of each position; g is the cap, (g,).
        thresholds: h in [0, 1] per setting, (H,); 1 never stops (a chain of the cap).
        head_concentration: kappa >= 0 of the head's Beta spread (0: it knows each outcome;
            inf: it knows only alpha_i).
        every_cap: settings for every cap under each threshold (threshold-major), else for
            the cap g only (S = H).
        stride: the head is asked only after every `stride` tokens (a multi-stage drafter
            decides between stages of that many); the caps are its multiples, and g one.
    """
    a = np.asarray(alphas, dtype=np.float64)
    h = np.atleast_1d(np.asarray(thresholds, dtype=np.float64))
    if a.ndim != 1 or a.size == 0:
        raise parameter_error("alphas", "need one or more positions")
    if np.any(~((h >= 0.0) & (h <= 1.0))):
        raise parameter_error("threshold", f"must lie in [0, 1], got {h}")
    check_head_concentration(head_concentration)
    g = a.size
    check_int(stride, "stride", low=1, high=g)
    if g % stride:
        raise parameter_error("stride", f"{g} positions are not whole stages of {stride}")
    atoms = [head_atoms(float(x), head_concentration) for x in a] if stride == 1 else []
    caps = np.arange(stride, g + 1, stride) if every_cap else np.array([g])
    lengths, tau = [], []
    factors = _stage_factors(a, head_concentration, stride) if stride > 1 else []
    for threshold in h.tolist():
        if threshold >= 1.0:  # never stops: the chain, tau of every prefix
            stops, going = np.zeros(g + 1), np.ones(g + 1)
            tokens = tau_prefixes(np.cumprod(a))
        elif stride == 1:
            stops, going, tokens = _stop_program(atoms, 1.0 - threshold)
        else:
            stops, going, tokens = _stage_program(factors, a, 1.0 - threshold, stride)
        for c in caps.tolist():
            # cap c: the threshold's stops before c, and every round still drafting at c
            row = np.zeros(g + 1)
            row[1:c] = stops[1:c]
            row[c] = going[c - 1]
            lengths.append(row)
            tau.append(tokens[c])
    return StopLengths(thresholds=np.repeat(h, caps.size),
                       caps=np.tile(caps, h.size).astype(np.float64),
                       length_probability=np.array(lengths), tau=np.array(tau))


def _stop_program(atoms: Sequence[tuple[FloatArray, FloatArray]], floor: float
                  ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per draft step k = 0..g of the stop at survival below `floor`, asked after every token,
    with no cap: the probability it stops right after token k, the probability it is still
    drafting after k, and the expected tokens of a round capped at k (accepted + 1), each
    (g + 1,).

    The drafting rounds' survival s = a_1 ... a_k lies in [floor, 1] (floor > 0; h = 1 is the
    chain, `stop_lengths`); it is kept as mass on a log-spaced grid there (linear in log s
    between neighbours, exact where an atom is 0 or 1).
    """
    g = len(atoms)
    grid = np.linspace(math.log(floor), 0.0, SURVIVAL_POINTS)
    survival = np.exp(grid)
    mass = np.zeros(grid.size)
    mass[-1] = 1.0  # nothing drafted yet: survival 1
    stops, going, tokens = np.zeros(g + 1), np.ones(g + 1), np.ones(g + 1)
    for k, (values, probs) in enumerate(atoms, start=1):
        s = survival[:, None] * values[None, :]
        m = mass[:, None] * probs[None, :]
        tokens[k] = tokens[k - 1] + float((m * s).sum())  # token k accepted w.p. s_k
        stop = s < floor
        stops[k] = float(m[stop].sum())
        going[k] = going[k - 1] - stops[k]
        mass = _regrid(np.log(np.where(stop, 1.0, s)), np.where(stop, 0.0, m), grid)
    return stops, going, tokens


def _stage_program(factors: Sequence[FloatArray], alphas: FloatArray, floor: float,
                   stride: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """`_stop_program` for a head asked only after every `stride` tokens (between stages).

    Within a stage nothing stops, so a stage multiplies the survival by the product of its
    tokens' acceptances (`_stage_factors`). The survival is kept in depth t = -log s / step on
    STAGE_SURVIVAL_POINTS points down to STAGE_SURVIVAL_FLOOR (what falls lower is gone: it
    stops at the stage's end, and each of its tokens is worth under 1e-6). A stage's tokens
    add E[s at its start] times sum_j prod_{i<=j} alpha_i over the stage's positions: exact,
    as acceptances are independent given the head's predictions.
    """
    g = alphas.size
    points = STAGE_SURVIVAL_POINTS
    step = -math.log(STAGE_SURVIVAL_FLOOR) / (points - 1)
    survival = np.exp(-step * np.arange(points))
    kept = np.arange(points) <= -math.log(floor) / step
    mass = np.zeros(points)
    mass[0] = 1.0
    stops, going, tokens = np.zeros(g + 1), np.ones(g + 1), np.ones(g + 1)
    for stage, start in enumerate(range(0, g, stride)):
        end = start + stride
        worth = float(np.cumprod(alphas[start:end]).sum())
        tokens[start + 1:end + 1] = tokens[start]  # a cap falls only on a stage's end
        tokens[end] = tokens[start] + float(mass @ survival) * worth
        mass = np.maximum(fft_convolve(mass, factors[stage])[:points], 0.0)
        left = float(mass[kept].sum())
        going[start + 1:end + 1] = going[start]
        stops[end] = going[start] - left
        going[end] = left
        mass = np.where(kept, mass, 0.0)
    return stops, going, tokens


def _stage_factors(alphas: FloatArray, concentration: float, stride: int
                   ) -> list[FloatArray]:
    """Per stage of `stride` tokens, the distribution of the product of their acceptances in
    depth -log / step (`_stage_program`'s grid); `_prefix_factor` of the stage's positions."""
    return [_prefix_factor(tuple(alphas[start:start + stride].tolist()), concentration)
            for start in range(0, alphas.size, stride)]


@lru_cache(maxsize=4096)
def _prefix_factor(alphas: tuple[float, ...], concentration: float) -> FloatArray:
    """The distribution, in depth, of a_1 ... a_n for tokens of mean acceptances `alphas`:
    that of a_1 ... a_(n-1) times the last token's, whose values are split linearly between
    the two nearest depths (below the grid, gone). Cached by prefix, so that stages of
    g = 1, 2, 3, ... tokens each add one token's convolution."""
    points = STAGE_SURVIVAL_POINTS
    if not alphas:
        delta = np.zeros(points)
        delta[0] = 1.0
        return delta
    step = -math.log(STAGE_SURVIVAL_FLOOR) / (points - 1)
    values, probs = head_atoms(alphas[-1], concentration)
    kernel = np.zeros(points)
    with np.errstate(divide="ignore"):
        depth = -np.log(values) / step
    inside = np.isfinite(depth) & (depth <= points - 1)
    lo = np.minimum(np.floor(depth[inside]).astype(np.intp), points - 2)
    frac = depth[inside] - lo
    np.add.at(kernel, lo, probs[inside] * (1.0 - frac))
    np.add.at(kernel, lo + 1, probs[inside] * frac)
    before = _prefix_factor(alphas[:-1], concentration)
    return np.asarray(np.maximum(fft_convolve(before, kernel)[:points], 0.0))


def fft_convolve(a: FloatArray, b: FloatArray) -> FloatArray:
    """The full linear convolution of two real 1-D arrays through numpy's real FFT (what
    scipy.signal.fftconvolve computes, to rounding; importing scipy.signal costs a second on
    every command that compares structures)."""
    n = a.size + b.size - 1
    size = 1 << max(n - 1, 0).bit_length()
    return np.asarray(np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:n])


def _regrid(log_s: FloatArray, mass: FloatArray, grid: FloatArray) -> FloatArray:
    """Mass at log survivals put on the grid, split linearly between the two nearest points."""
    step = grid[1] - grid[0]
    x = np.clip((log_s.ravel() - grid[0]) / step, 0.0, grid.size - 1.0)
    lo = np.minimum(np.floor(x).astype(np.intp), grid.size - 2)
    frac = x - lo
    w = mass.ravel()
    return np.asarray(np.bincount(lo, w * (1.0 - frac), grid.size)
                      + np.bincount(lo + 1, w * frac, grid.size), dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class StructureOptions:
    """The assumptions a structure comparison is made under (module docstring).

    stage_acceptance: rho of multi-stage drafting (1: each stage as good as the first, the
    bound DLoop's loop-aware training aims at). device: where the overlapped drafter runs
    ("same": the target's GPU, sharing its HBM). head_concentration: kappa of the adaptive
    stop's acceptance head (0: a head that knows each token's outcome, the bound; default:
    SpecDec++'s head, SPECDEC_HEAD_CONCENTRATION).
    """

    stage_acceptance: float = 1.0
    device: str = "same"
    head_concentration: float = SPECDEC_HEAD_CONCENTRATION


def compare_structures(setup: Setup, profile: AcceptanceProfile, batch: ArrayLike, *,
                       max_gamma: int, structures: Sequence[str] = STRUCTURES,
                       max_stages: int = MAX_STAGES, stage_acceptance: float = 1.0,
                       device: str = "same",
                       head_concentration: float = SPECDEC_HEAD_CONCENTRATION,
                       thresholds: Sequence[float] = STOP_THRESHOLDS) -> StructureComparison:
    """Per batch size, the best setting of each structure (module docstring), all timed on the
    setup's GPU and engine from one table of chains.

    max_gamma: the most draft tokens a stage (or the stop's cap) holds: the drafter's block
    or chain limit. The optimizer picks g (and k, h) per batch size by speedup.
    """
    for s in structures:
        if s not in STRUCTURES:
            raise parameter_error("round_structure", f"{s!r} is not one of "
                                  f"{', '.join(STRUCTURES)}")
    check_int(max_gamma, "max_gamma", low=1, high=1_000)
    check_int(max_stages, "max_stages", low=1, high=64)
    check_number(stage_acceptance, "stage_acceptance", low=0.0, high=1.0)
    check_head_concentration(head_concentration)
    if device not in DEVICES:
        raise parameter_error("overlap_device",
                              f"{device!r} is not one of {', '.join(DEVICES)}")
    longest = max(max_stages * max_gamma, max_gamma + 1)
    alphas = np.asarray(profile.alphas(longest), dtype=np.float64)
    batches = np.atleast_1d(np.asarray(batch, dtype=np.int64))
    chains = chain_candidates(profile, longest)
    table = speedup_table(setup, batches, chains)
    parts: dict[str, list[StructureChoice]] = {}
    for s in structures:
        if s == "single":
            parts[s] = _single(table, alphas, max_gamma)
        elif s == "multistage":
            parts[s] = _multistage(table, alphas, max_gamma, max_stages, stage_acceptance,
                                   head_concentration, thresholds)
        elif s == "overlap":
            parts[s] = _overlap(setup, table, alphas, max_gamma, device)
        else:
            parts[s] = _adaptive(table, alphas, max_gamma, head_concentration, thresholds)
    rows = [parts[s][i] for i in range(batches.size) for s in STRUCTURES if s in parts]
    return StructureComparison(rows=tuple(rows), stage_acceptance=stage_acceptance,
                               device=device, head_concentration=head_concentration)


def _round(table: SpeedupTable, verify: FloatArray, draft: FloatArray) -> FloatArray:
    """A speculative round's seconds from its verification and drafting, (B, K) each."""
    overhead = np.reshape(table.round_overhead_s, (-1, 1))
    hidden = np.reshape(table.round_host_overlap_s, (-1, 1))
    return np.asarray(np.maximum(verify + draft + overhead, hidden))


def _pick(structure: str, table: SpeedupTable, tau: FloatArray, round_s: FloatArray,
          gamma: FloatArray, stages: FloatArray, threshold: FloatArray, drafted: FloatArray
          ) -> list[StructureChoice]:
    """Per batch the candidate (columns of round_s, (B, K)) with the highest speedup."""
    speedup = tau[None, :] * table.baseline_s[:, None] / round_s
    best = np.argmax(np.round(speedup, 12), axis=1)  # ties: the first (smallest) candidate
    fits = np.broadcast_to(np.asarray(table.fits, dtype=bool), table.batch.shape)
    rows = []
    for i, k in enumerate(best.tolist()):
        per_user = float(tau[k] / round_s[i, k])
        rows.append(StructureChoice(
            batch=int(table.batch[i]), structure=structure, gamma=int(gamma[k]),
            stages=int(stages[k]), threshold=float(threshold[k]), tau=float(tau[k]),
            drafted=float(drafted[k]), round_s=float(round_s[i, k]),
            speedup=float(speedup[i, k]), tokens_per_s_per_user=per_user,
            throughput=float(table.batch[i]) * per_user, fits=bool(fits[i])))
    return rows


def _single(table: SpeedupTable, alphas: FloatArray, max_gamma: int) -> list[StructureChoice]:
    g = np.arange(1, max_gamma + 1)
    tau = tau_prefixes(np.cumprod(alphas[:max_gamma]))[1:]
    round_s = _round(table, table.verify_s[:, g], table.draft_s[:, g])
    nan = np.full(g.size, np.nan)
    return _pick("single", table, tau, round_s, g.astype(np.float64), np.ones(g.size), nan,
                 g.astype(np.float64))


def _multistage(table: SpeedupTable, alphas: FloatArray, max_gamma: int, max_stages: int,
                rho: float, concentration: float, thresholds: Sequence[float]
                ) -> list[StructureChoice]:
    """Stages of g = 1..max_gamma tokens, up to k = max_stages of them, going on to the next
    stage while the head's predicted survival stays above 1 - h (h = 1: always k stages)."""
    h = np.array(sorted({*thresholds, 1.0}), dtype=np.float64)
    n = np.arange(table.verify_s.shape[1], dtype=np.float64)
    parts: list[tuple[FloatArray, ...]] = []
    for g in range(1, max_gamma + 1):
        chain = multistage_alphas(alphas[:g], max_stages, rho)
        stop = stop_lengths(chain, h, concentration, every_cap=True, stride=g)
        mean = stop.mean_length
        verify = np.stack([np.interp(mean, n, row) for row in table.verify_s])
        longest = stop.longest_probability(table.batch)  # (B, S, k g + 1)
        stages = longest @ (np.arange(longest.shape[-1]) / g)  # E[max stages over the batch]
        round_s = _round(table, verify, stages * table.draft_s[:, g:g + 1])
        parts.append((stop.tau, round_s.T, np.full(h.size * max_stages, float(g)),
                      stop.caps / g, stop.thresholds, mean))
    tau, round_t, gamma, k, threshold, drafted = (np.concatenate(p) for p in zip(*parts,
                                                                                strict=True))
    return _pick("multistage", table, tau, round_t.T, gamma, k, threshold, drafted)


def _overlap(setup: Setup, table: SpeedupTable, alphas: FloatArray, max_gamma: int,
             device: str) -> list[StructureChoice]:
    g = np.arange(1, max(max_gamma, 2))  # the overlapped draft holds g + 1 <= max_gamma
    verify_mem, draft_mem = _resource_times(setup, table, "memory")
    verify_fl, draft_fl = _resource_times(setup, table, "compute")
    together = overlapped_s(table.verify_s[:, g], table.draft_s[:, g + 1], verify_mem[:, g],
                            draft_mem[:, g + 1], device, verify_fl[:, g], draft_fl[:, g + 1])
    reuse = np.cumprod(alphas)[g]  # s_g alpha_{g+1} = s_{g+1}
    # the redraft after a rejection is GPU work too: host work an engine overlaps hides it
    round_s = _round(table, together, (1.0 - reuse) * table.draft_s[:, g])
    tau = tau_prefixes(np.cumprod(alphas[:max_gamma]))[g]
    nan = np.full(g.size, np.nan)
    drafted = g + 1.0 + (1.0 - reuse) * g  # g + 1 overlapped, g more after a rejection
    return _pick("overlap", table, tau, round_s, g.astype(np.float64), np.ones(g.size), nan,
                 drafted)


def _resource_times(setup: Setup, table: SpeedupTable, resource: str
                    ) -> tuple[FloatArray, FloatArray]:
    """(verification, drafting) seconds of every chain in `table` on one resource of the GPU,
    (B, K) each, in the table's seconds (with an engine, on the GPU's kernel model): "memory",
    the same passes with unbounded flops (their HBM time); "compute", with unbounded HBM
    bandwidth (their flops time)."""
    hw = engine_time.timing_hardware(setup.engine, setup.hardware)
    if resource == "memory":
        scaled = dataclasses.replace(
            hw, peak_flops_per_s={k: v * UNBOUNDED for k, v in hw.peak_flops_per_s.items()},
            achievable_flops_per_s={k: v * UNBOUNDED
                                    for k, v in hw.achievable_flops_per_s.items()})
    else:
        scaled = dataclasses.replace(
            hw, hbm_bandwidth_bytes_per_s=hw.hbm_bandwidth_bytes_per_s * UNBOUNDED)
    alone = speedup_table(dataclasses.replace(setup, hardware=scaled, engine=None),
                          table.batch, table.candidates)
    return alone.verify_s, alone.draft_s


def _adaptive(table: SpeedupTable, alphas: FloatArray, max_gamma: int, concentration: float,
              thresholds: Sequence[float]) -> list[StructureChoice]:
    h = np.array(sorted({*thresholds, 1.0}), dtype=np.float64)
    stop = stop_lengths(alphas[:max_gamma], h, concentration, every_cap=True)
    n = np.arange(max_gamma + 1, dtype=np.float64)
    mean = stop.mean_length
    verify = np.stack([np.interp(mean, n, row) for row in table.verify_s[:, :max_gamma + 1]])
    longest = stop.longest_probability(table.batch)  # (B, S, g + 1)
    draft = np.einsum("bsk,bk->bs", longest, table.draft_s[:, :max_gamma + 1])
    round_s = _round(table, verify, draft)
    return _pick("adaptive_stop", table, stop.tau, round_s, stop.caps,
                 np.ones(stop.caps.size), stop.thresholds, mean)

"""speedup(N, B): draft-and-verify rounds against plain decoding, per batch size and tree size.

A round verifies B requests x (N + 1) tokens in one target pass and drafts N nodes in `depth`
sequential levels (the article's "Verification bottlenecks"):

    round_time(B, N) = T(B (N + 1)) + T_draft(B, N) + round overhead
    speedup(N, B)    = tau(N) T(B) / round_time(B, N)

tokens per second per user = tau / round_time, throughput = B tau / round_time. Candidates are
chains of gamma tokens or best-first trees (depth-capped for drafters that pay one pass per
level); `best_per_batch` picks the candidate that maximizes speedup or throughput within memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.errors import SpecError, parameter_error
from specsim.forward.cost import PassCost, pass_cost
from specsim.forward.memory import DEFAULT_MEMORY_FRACTION, serving_memory
from specsim.forward.shapes import BoolArray, FloatArray, batch_mix_passes, uniform_passes
from specsim.specs.acceptance import AcceptanceProfile, marginal_acceptance, tau_prefixes
from specsim.specs.drafters import Drafter
from specsim.specs.dtypes import Precision
from specsim.specs.engines import Engine
from specsim.specs.hardware import Hardware
from specsim.specs.models import Model
from specsim.speculation import engine_time
from specsim.speculation.draft_cost import (
    draft_passes,
    draft_time_s,
    round_shape,
    verify_share,
)
from specsim.speculation.trees import (
    ORDERED_DP_MAX_NODES,
    best_first_tree,
    ordered_rank_table,
    tree_from_take,
)

# The ops of softmax attention over the KV cache (forward/ops.py), whose kernel an engine may
# run through a prefill-type kernel when a request brings several queries (verification).
SOFTMAX_ATTENTION_OPS = ("attention", "sliding_attention")

if TYPE_CHECKING:
    from specsim.speculation.structure_results import StructureComparison

IntArray = NDArray[np.int64]
# auto: trees when the profile has per-rank acceptance, else chains.
SHAPES = ("auto", "chain", "tree")
OBJECTIVES = ("speedup", "throughput")
# Depth caps tried for drafters that pay one pass per tree level (EAGLE-style trees are 4-10
# levels deep; a level costs a full drafter pass, so deeper caps rarely pay).
AUTOREGRESSIVE_DEPTHS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16)


def check_choice(parameter: str, value: str, allowed: tuple[str, ...]) -> str:
    """`value` if it is one of `allowed`; else the one error every command gives for it."""
    if value not in allowed:
        raise parameter_error(parameter, f"{parameter} {value!r} is not one of "
                              f"{', '.join(allowed)}")
    return value


def resolve_shape(shape: str, profile: AcceptanceProfile) -> str:
    """chain or tree: `auto` means trees when the profile has per-rank acceptance."""
    if check_choice("shape", shape, SHAPES) == "auto":
        return "tree" if profile.rank_acceptance else "chain"
    return shape


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidates:
    """Ways to speculate: K candidates, each N drafted nodes in `depth` levels, with its tau.

    shape: "chain" or "tree" per candidate ("chain" for N = 0, plain decoding);
    max_width: most children of one node (SGLang's topk), 1 for chains.
    """

    nodes: FloatArray
    depth: FloatArray
    tau: FloatArray
    max_width: FloatArray
    shape: tuple[str, ...]


def chain_candidates(profile: AcceptanceProfile, max_gamma: int) -> Candidates:
    """Chains of gamma = 0..max_gamma draft tokens."""
    gamma = np.arange(max_gamma + 1, dtype=np.float64)
    tau = tau_prefixes(marginal_acceptance(profile.alphas(max_gamma)))
    return Candidates(nodes=gamma, depth=gamma, tau=tau, max_width=np.minimum(gamma, 1.0),
                      shape=("chain",) * (max_gamma + 1))


def tree_candidates(rank_acceptance: ArrayLike, max_nodes: int,
                    depth_caps: tuple[int | None, ...] = (None,)) -> Candidates:
    """Best trees of N = 0..max_nodes nodes under the candidate-rank model, per depth cap.

    A node's children are its top ranks. Where a_j does not rise, the top-N nodes by path
    probability among those at most `cap` deep form the optimal tree for N nodes and that depth,
    so one best-first pass per cap gives every N at once; else one exact table per cap does.
    """
    a = np.asarray(rank_acceptance, dtype=np.float64)
    rising = bool(np.any(np.diff(a) > 0.0)) and max_nodes <= ORDERED_DP_MAX_NODES
    parts = []
    for cap in depth_caps:
        limit = max_nodes if cap is None else min(cap, max_nodes)
        parts.append(_ordered_part(a, max_nodes, limit) if rising
                     else _best_first_part(a, max_nodes, limit))
    nodes, depth, tau, width = (np.concatenate(p) for p in zip(*parts, strict=True))
    shape = tuple("chain" if w <= 1 else "tree" for w in width)
    return Candidates(nodes=nodes, depth=depth, tau=tau, max_width=width, shape=shape)


Part = tuple[FloatArray, FloatArray, FloatArray, FloatArray]


def _best_first_part(a: FloatArray, max_nodes: int, cap: int) -> Part:
    tree = best_first_tree(a, max_nodes, cap)
    count = tree.num_nodes
    gains = np.zeros(max_nodes)
    gains[:count] = tree.path_probability
    depth = np.zeros(max_nodes + 1)
    depth[1:count + 1] = np.maximum.accumulate(tree.depths)
    depth[count + 1:] = depth[count]
    width = np.zeros(max_nodes + 1)
    # Siblings are added best rank first, so a node of rank r means r + 1 children there.
    width[1:count + 1] = np.maximum.accumulate(tree.ranks + 1)
    width[count + 1:] = width[count]
    return np.arange(max_nodes + 1.0), depth, tau_prefixes(gains), width


def _ordered_part(a: FloatArray, max_nodes: int, cap: int) -> Part:
    value, take = ordered_rank_table(a, max_nodes, cap)
    depth = np.zeros(max_nodes + 1)
    width = np.zeros(max_nodes + 1)
    for n in range(1, max_nodes + 1):
        tree = tree_from_take(a, take, n, cap)
        depth[n], width[n] = tree.depth, int(tree.ranks.max(initial=-1)) + 1
    return np.arange(max_nodes + 1.0), depth, 1.0 + value[cap], width


def candidates_for(drafter: Drafter | None, profile: AcceptanceProfile, *, shape: str,
                   max_nodes: int, sequential: bool = False) -> Candidates:
    """Chains or trees a drafter can produce: its draft limit caps the depth.

    Drafters that pay one pass per level get trees under several depth caps; parallel ones
    (and, without a drafter, an idealized parallel drafter unless `sequential`) any depth.
    """
    shape = resolve_shape(shape, profile)
    limit = drafter.draft_limit if drafter is not None else 0
    if shape == "chain":
        return chain_candidates(profile, min(max_nodes, limit) if limit else max_nodes)
    if not profile.rank_acceptance:
        raise SpecError(f"{profile.source}: no per-rank acceptance, so no trees; use chains")
    ranks = profile.ranks(max(max_nodes, 1))
    parallel = drafter.kind.parallel if drafter is not None else not sequential
    if parallel:
        caps: tuple[int | None, ...] = (limit or None,)
    else:
        caps = tuple(d for d in AUTOREGRESSIVE_DEPTHS if not limit or d <= limit)
    return tree_candidates(ranks, max_nodes, caps)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedupTable:
    """Every candidate at every batch size; 2-D arrays are (batch, candidate), seconds."""

    batch: FloatArray
    candidates: Candidates
    baseline_s: FloatArray
    verify_s: FloatArray
    draft_s: FloatArray
    round_overhead_s: float | FloatArray  # host seconds per round: one value, or per batch
    fits: BoolArray
    context: float
    # Host seconds per round done while the GPU runs (an engine with spec_overlap): a round
    # takes the longer of its GPU part and this; one value, or per batch.
    round_host_overlap_s: float | FloatArray = 0.0
    # Attention seconds of each verification pass on the GPU's kernel model (a decoding
    # kernel's time for its KV; 0 where nothing is drafted): what the engine's
    # verify_attention_factor and a tree's slowdown scale. (batch, candidate).
    verify_attention_s: FloatArray | float = 0.0

    @property
    def round_s(self) -> FloatArray:
        speculating = self.candidates.nodes > 0
        overhead = np.reshape(self.round_overhead_s, (-1, 1))
        gpu = self.verify_s + self.draft_s + overhead * speculating
        hidden = np.reshape(self.round_host_overlap_s, (-1, 1))
        return np.asarray(np.maximum(gpu, hidden * speculating))

    @property
    def speedup(self) -> FloatArray:
        return self.candidates.tau * self.baseline_s[:, None] / self.round_s

    @property
    def tokens_per_s_per_user(self) -> FloatArray:
        return self.candidates.tau / self.round_s

    @property
    def throughput(self) -> FloatArray:
        return self.batch[:, None] * self.tokens_per_s_per_user

    def best(self, objective: str = "speedup", tolerance: float = 0.0) -> IntArray:
        """Index of the best candidate per batch size (plain decoding when nothing beats it);
        with a tolerance, the candidate of fewest nodes whose score is within that fraction of
        the best (candidates ascend in N)."""
        check_choice("objective", objective, OBJECTIVES)
        score = self.speedup if objective == "speedup" else self.throughput
        # Ties: fewer nodes first (argmax keeps the first maximum, candidates ascend in N).
        score = np.round(score, 12)
        if tolerance <= 0.0:
            return np.asarray(np.argmax(score, axis=1))
        near = score >= (1.0 - tolerance) * score.max(axis=1, keepdims=True)
        return np.asarray(np.argmax(near, axis=1))


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """The target, GPU, drafter and serving parameters a speedup table is computed for.

    draft_cost: a measured drafter cost relative to one decoding step at the same batch size,
    per sequential drafter pass; None derives it from the drafter's architecture. Without a
    drafter, a round takes one drafter pass (a parallel drafter, as in the article's tree
    figure), or one per level with `sequential_draft`. context: cached tokens per request, or a
    mix of contexts the batch's requests spread over evenly (the target's passes and memory
    see each; the drafter's passes see their mean). engine: the host and launch terms a
    serving engine adds around the kernels (None: the idealized GPU, no engine). ep: GPUs the
    target's routed experts are spread over (its passes and memory; the drafter's passes keep
    ep = 1).
    """

    target: Model
    hardware: Hardware
    drafter: Drafter | None = None
    context: float | tuple[float, ...] = 0.0
    tp: int = 1
    draft_cost: float | None = None
    sequential_draft: bool = False
    round_overhead_s: float = 0.0
    memory_fraction: float = DEFAULT_MEMORY_FRACTION
    precision: Precision = field(default_factory=Precision)
    engine: Engine | None = None
    ep: int = 1
    notes: tuple[str, ...] = ()  # what the setup accepted that its answer should say


def speedup_table(setup: Setup, batch: ArrayLike, candidates: Candidates) -> SpeedupTable:
    """Round time, speedup and throughput of every candidate at every batch size."""
    b = np.atleast_1d(np.asarray(batch, dtype=np.float64))
    if b.size == 0 or np.any(b < 1):
        raise parameter_error("batch", "batch sizes must be >= 1")
    if setup.drafter is None and setup.draft_cost is None:
        raise parameter_error("draft_cost", "give a drafter or a relative draft cost")
    grid_b = np.repeat(b, candidates.nodes.size)
    grid_n = np.tile(candidates.nodes, b.size)
    grid_d = np.tile(candidates.depth, b.size)
    grid_tau = np.tile(candidates.tau, b.size)
    t = setup.target
    hw = engine_time.timing_hardware(setup.engine, setup.hardware)
    contexts = np.atleast_1d(np.asarray(setup.context, dtype=np.float64))
    base_cost = pass_cost(t, hw, batch_mix_passes(1.0, b, contexts), tp=setup.tp,
                          precision=setup.precision, ep=setup.ep)
    baseline = _kernel_s(setup, hw, base_cost)
    # Verification depends on (B, N) only: time each distinct N once, then gather.
    nodes, index = np.unique(candidates.nodes, return_inverse=True)
    cost = pass_cost(
        t, hw,
        batch_mix_passes(np.tile(nodes + 1, b.size), np.repeat(b, nodes.size), contexts),
        tp=setup.tp, precision=setup.precision, ep=setup.ep)
    verify = _kernel_s(setup, hw, cost).reshape(b.size, nodes.size)[:, index.ravel()]
    by_op = cost.by_op()
    drafting = candidates.nodes > 0

    def per_candidate(names: Callable[[str], bool]) -> FloatArray:
        seconds = np.zeros(cost.tokens.shape) + sum(v for k, v in by_op.items() if names(k))
        return np.asarray(seconds.reshape(b.size, nodes.size)[:, index.ravel()] * drafting)

    slowdown = setup.hardware.efficiency.tree_attention_slowdown
    if slowdown != 1.0:  # tree masks fall off the fast causal attention kernels
        attention = per_candidate(lambda name: name.endswith("attention"))
        verify = verify + (slowdown - 1.0) * attention * (candidates.max_width > 1)
    # softmax attention over a GQA / MHA cache (not a linear-attention or Mamba state, nor MLA,
    # whose decode kernels put the heads in the query tile: several queries fill it as well)
    softmax = per_candidate(lambda name: t.mla is None and name in SOFTMAX_ATTENTION_OPS)
    if setup.engine is not None and setup.engine.verify_attention_factor != 1.0:
        # several queries per request through the engine's prefill-type attention kernel
        verify = verify + (setup.engine.verify_attention_factor - 1.0) * softmax
    if setup.drafter is not None:  # self-speculation keeps the drafted layers' work
        verify = verify * np.where(candidates.nodes > 0, verify_share(setup.drafter), 1.0)
        passes = draft_passes(setup.drafter, grid_d)
    else:
        passes = grid_d if setup.sequential_draft else np.minimum(grid_d, 1.0)
    if setup.draft_cost is not None:
        draft = setup.draft_cost * np.repeat(baseline, candidates.nodes.size) * passes
    else:
        assert setup.drafter is not None
        shape = round_shape(batch=grid_b, depth=grid_d, nodes=grid_n, accepted=grid_tau,
                            context=float(contexts.mean()))
        draft = draft_time_s(setup.drafter, hw, shape, tp=setup.tp,
                             precision=setup.precision)
    draft = np.where(grid_n > 0, draft, 0.0)
    k = candidates.nodes.size
    overhead: float | FloatArray = setup.round_overhead_s
    hidden: float | FloatArray = 0.0
    if setup.engine is not None:
        rt = _round_time(setup, setup.engine, b, baseline, verify,
                         draft.reshape(b.size, k), np.where(grid_n > 0, passes, 0.0))
        baseline, verify, draft = rt.step_s[:, 0], rt.verify_s, rt.draft_s
        overhead, hidden = overhead + rt.host_s[:, 0], rt.hidden_s[:, 0]
    return SpeedupTable(
        batch=b, candidates=candidates, baseline_s=baseline,
        verify_s=verify, draft_s=draft.reshape(b.size, k),
        round_overhead_s=overhead, fits=_fits(setup, b, contexts),
        context=float(contexts.mean()), round_host_overlap_s=hidden,
        verify_attention_s=softmax)


def speedup_sweep(setup: Setup, profile: AcceptanceProfile, batch: ArrayLike, nodes: ArrayLike,
                  *, shape: str = "tree") -> SpeedupTable:
    """The speedup table of every chain or tree the drafter can make, up to max(nodes) nodes."""
    n = np.atleast_1d(np.asarray(nodes))
    if n.size == 0:
        raise parameter_error("nodes", "need one or more node counts")
    cands = candidates_for(setup.drafter, profile, shape=shape, max_nodes=int(n.max()))
    return speedup_table(setup, batch, cands)


def chunk_share_s(setup: Setup, tokens_per_request: ArrayLike, prompt_per_request: ArrayLike,
                  batch: ArrayLike, context: float) -> FloatArray:
    """Achieved seconds that `prompt_per_request` prompt tokens per request add to a pass of
    `batch` requests scoring `tokens_per_request` tokens each (chunked prefill riding in a
    decoding or verification pass), (S,): the marginal roofline kernel time
    T(B (q + p)) - T(B q) at `context` cached tokens on the GPU's kernel model, without the
    engine's kernel terms (a decoding pass's; a prompt chunk adds none of them)."""
    q = np.asarray(tokens_per_request, dtype=np.float64)
    p = np.asarray(prompt_per_request, dtype=np.float64)

    def kernel(per_request: FloatArray) -> FloatArray:
        return engine_time.kernel_pass_s(
            setup.engine, setup.hardware, setup.target,
            batch_mix_passes(per_request, batch, np.array([context])), tp=setup.tp,
            precision=setup.precision, ep=setup.ep, engine_kernels=False)

    extra = kernel(q + p) - kernel(q + 0.0 * p)
    return np.asarray(np.maximum(extra, 0.0))


def prefill_pass_s(setup: Setup, prompt_tokens: float, prompts: ArrayLike) -> FloatArray:
    """Seconds of a prefill pass of its own, (S,): `prompts` prompts of `prompt_tokens` tokens
    each and no cached context, as an engine that does not mix prompts into decoding steps
    runs them (`Engine.prefill_mixed` false: the decoding requests wait for it). Priced as a
    plain pass is: the kernels with the engine's kernel terms on the GPU's kernel model, every
    kernel's graph cost and the per-pass and per-request host terms (`engine_time.round_time`'s
    step). Requires an engine."""
    assert setup.engine is not None
    n = np.atleast_1d(np.asarray(prompts, dtype=np.float64))
    shape = uniform_passes(float(prompt_tokens), n, 0.0)
    return engine_time.plain_step_s(setup.engine, setup.hardware, setup.target, shape, n,
                                    tp=setup.tp, precision=setup.precision, ep=setup.ep)


def prefill_stall_s(setup: Setup, prompt_tokens: float, arrivals: ArrayLike) -> FloatArray:
    """Seconds a decoding step (or round) waits, on average, for the prefill passes of the
    prompts arriving per step, (S,), on an engine that runs them apart (`prefill_pass_s`):
    below one arrival a step, that share of steps is preceded by one prompt's pass; from one
    on, every step by one pass holding all of them (the waiting prompts go out together)."""
    a = np.atleast_1d(np.asarray(arrivals, dtype=np.float64))
    per_pass = prefill_pass_s(setup, prompt_tokens, np.maximum(a, 1.0))
    return np.asarray(np.where(a > 0.0, np.minimum(a, 1.0) * per_pass, 0.0))


def _kernel_s(setup: Setup, hw: Hardware, cost: PassCost) -> FloatArray:
    """A pass's kernel seconds (`cost` on `hw`, the setup's timing profile): the roofline,
    plus the engine's kernel terms if it has one."""
    if setup.engine is None:
        return cost.time_s
    return engine_time.engine_kernel_s(setup.engine, hw, cost)


def _round_time(setup: Setup, engine: Engine, batch: FloatArray, baseline: FloatArray,
                verify: FloatArray, draft: FloatArray, passes: FloatArray
                ) -> engine_time.RoundTime:
    """Kernel times (baseline (B,), verify and draft (B, K)) turned into the engine's round
    (`engine_time.round_time`), every field (B, 1) or (B, K)."""
    if setup.drafter is None and setup.draft_cost == 0.0:
        passes = np.zeros_like(passes)  # free drafting (prompt lookup): no drafter pass
    return engine_time.round_time(
        engine, setup.target, setup.drafter, batch=batch[:, None],
        step_gpu_s=baseline[:, None], verify_gpu_s=verify, draft_gpu_s=draft,
        passes=passes.reshape(draft.shape), weight_dtype=setup.precision.weight_dtype)


def _fits(setup: Setup, batch: FloatArray, contexts: FloatArray) -> BoolArray:
    """Whether the target, the drafter and their caches fit, at the setup's precision."""
    plan = serving_memory(setup.target, setup.hardware, batch, tuple(contexts.tolist()),
                          drafter=setup.drafter, tp=setup.tp, ep=setup.ep,
                          memory_fraction=setup.memory_fraction, precision=setup.precision)
    return plan.fits


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """One candidate at one batch size, and what it gives (nodes 0 = do not speculate).

    shape: "chain", "tree" or "none"; max_width: most children of one node (SGLang's topk);
    round_s: seconds per round; throughput: tokens/s of the whole batch.
    """

    batch: int
    shape: str
    nodes: int
    depth: int
    max_width: int
    tau: float
    round_s: float
    speedup: float
    tokens_per_s_per_user: float
    throughput: float
    fits: bool

    @property
    def plain_tokens_per_s_per_user(self) -> float:
        """Plain decoding's tokens/s per user at the same batch size (the speculative rate
        over the speedup); NaN where the batch does not fit or the speedup is 0."""
        if self.fits and self.speedup:
            return self.tokens_per_s_per_user / self.speedup
        return float("nan")


def choice_at(table: SpeedupTable, i: int, k: int, round_s: FloatArray, speedup: FloatArray
              ) -> Choice:
    """The candidate k at batch index i of a table (round_s, speedup: the table's arrays,
    computed once by the caller)."""
    c = table.candidates
    per_user = float(c.tau[k] / round_s[i, k])
    return Choice(
        batch=int(table.batch[i]), shape="none" if c.nodes[k] == 0 else c.shape[k],
        nodes=int(c.nodes[k]), depth=int(c.depth[k]), max_width=int(c.max_width[k]),
        tau=float(c.tau[k]), round_s=float(round_s[i, k]), speedup=float(speedup[i, k]),
        tokens_per_s_per_user=per_user, throughput=float(table.batch[i]) * per_user,
        fits=bool(table.fits[i]))


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedupCurves:
    """Speedup against drafted nodes, one curve per batch size (the article's figure): at each
    distinct N of a table, its best candidate (depth cap, shape); `best`: the index into the
    table's candidates of each batch size's best (`SpeedupTable.best`)."""

    batch: FloatArray
    nodes: FloatArray  # the distinct N, ascending
    speedup: FloatArray  # (batch, N)
    fits: BoolArray  # per batch size
    best_nodes: FloatArray  # per batch size: N of the best candidate
    best_speedup: FloatArray  # per batch size: its speedup


def speedup_curves(table: SpeedupTable) -> SpeedupCurves:
    """The best speedup at each distinct N per batch size, and each batch size's best."""
    nodes, speedup = table.candidates.nodes, table.speedup
    distinct = np.unique(nodes)
    at_n = nodes[None, :] == distinct[:, None]  # (N, candidate)
    curves = np.where(at_n[None, :, :], speedup[:, None, :], -np.inf).max(axis=2)
    best = table.best("speedup")
    rows = np.arange(table.batch.size)
    return SpeedupCurves(
        batch=table.batch, nodes=distinct, speedup=curves,
        fits=np.broadcast_to(np.asarray(table.fits, dtype=bool), table.batch.shape),
        best_nodes=nodes[best], best_speedup=speedup[rows, best])


def best_per_nodes(table: SpeedupTable, nodes: ArrayLike) -> list[Choice]:
    """Per batch size and requested N: the candidate of N nodes with the highest speedup.

    A table holds one candidate per (N, depth cap); this keeps the best depth cap for each N.
    Requested N the table lacks are skipped. Ordered by batch, then N.
    """
    c = table.candidates
    wanted = sorted({int(n) for n in np.atleast_1d(np.asarray(nodes))})
    round_s, speedup = table.round_s, table.speedup
    points = []
    for i in range(table.batch.size):
        for n in wanted:
            index = np.flatnonzero(c.nodes == n)
            if index.size == 0:
                continue
            k = int(index[np.argmax(speedup[i, index])])
            points.append(choice_at(table, i, k, round_s, speedup))
    return points


@dataclass(frozen=True, slots=True, kw_only=True)
class Recommendation:
    """Per batch size: the best setting an engine runs, the best chain (what chain engines
    run: vLLM), the best of the EAGLE-tree engines (`engine_trees`: SGLang's tree or block,
    None where no such engine runs the drafter), the unconstrained tree bound, and notes on
    extrapolation. `engine_commands` turns it into commands. `structures`: the round
    structures beyond one round compared with the single round per batch size (None where
    none was asked for; `speculation.round_structures`)."""

    best: list[Choice]
    best_chain: list[Choice]
    objective: str
    engine_trees: list[Choice] | None = None
    bound: list[Choice] | None = None
    schedule_chain: list[Choice] = field(default_factory=list)
    notes: tuple[str, ...] = ()
    structures: StructureComparison | None = None

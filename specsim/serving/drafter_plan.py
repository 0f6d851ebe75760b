"""One drafter's part of the capacity plan: what `make_plan` computes per drafter.

`DrafterPlan` is a drafter's (or plain decoding's) serving tables at each layout, its speedup
table and curves, the recommendation and its engine commands. `engine_candidates` are the
chains and trees an engine builds (the candidates `specsim recommend` weighs: chains for vLLM,
SGLang's trees or block), so every setting the plan names has a command; the best tree of any
shape is kept as a bound only (`DrafterPlan.bound`). `make_drafter_plan` and
`plain_decoding_tables` run the serving model over the layouts tried; `deployable` and
`fastest_per_user` are what `specsim.serving.plan.make_plan` orders the drafters' parts by
before it picks the answer from them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specsim.engines import adapters, block_only, runs_chains, tree_engines
from specsim.errors import SpecError
from specsim.serving.capacity import BATCH_GRID, ServingTable, layout_text, serving_table
from specsim.serving.scenarios import Scenario
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.drafters import Drafter
from specsim.speculation.recommend import (
    EngineCommand,
    Recommendation,
    engine_commands,
    limit_depth,
    recommend,
    sglang_candidates,
)
from specsim.speculation.speedup import (
    AUTOREGRESSIVE_DEPTHS,
    Candidates,
    Setup,
    SpeedupCurves,
    SpeedupTable,
    chain_candidates,
    speedup_curves,
    speedup_sweep,
    speedup_table,
)

MAX_NODES = 64
# Batch sizes of the recommendation table and of the speedup figure (the same, so the figure's
# dots are the table's settings).
RECOMMEND_BATCH = (1, 4, 16, 64, 256)
# Largest tree of any shape drawn as the bound in the speedup figure, nodes.
BOUND_MAX_NODES = 256
Progress = Callable[[str], None]
Layout = tuple[int, int]  # (TP, EP): a replica's tensor- and expert-parallel degrees


@dataclass(frozen=True, slots=True, kw_only=True)
class DrafterPlan:
    """One drafter's part of the plan (name "none" for plain decoding only)."""

    name: str
    drafter: Drafter | None
    profile: AcceptanceProfile | None
    tables: list[ServingTable]
    speedup: SpeedupTable | None
    recommendation: Recommendation | None
    setup: Setup | None = None
    bound: SpeedupTable | None = None
    curves: SpeedupCurves | None = None  # of `speedup`: the figure's curve per batch size
    bound_curves: SpeedupCurves | None = None  # of `bound`
    # The recommend API's engine commands at `setup`, or why there are none (`no_commands`:
    # the SpecError the engines raised, where they raised one).
    commands: tuple[EngineCommand, ...] = ()
    no_commands: str = ""

    @property
    def uses_trees(self) -> bool:
        """Whether the engine candidates include trees (measured per-rank acceptance)."""
        return self.profile is not None and _trees_allowed(self.profile)


def _trees_allowed(profile: AcceptanceProfile) -> bool:
    """recommend's `auto` rule: trees only from measured per-rank acceptance."""
    return bool(profile.rank_acceptance) and not profile.ranks_from_chain


def _join(parts: list[Candidates]) -> Candidates:
    return Candidates(nodes=np.concatenate([p.nodes for p in parts]),
                      depth=np.concatenate([p.depth for p in parts]),
                      tau=np.concatenate([p.tau for p in parts]),
                      max_width=np.concatenate([p.max_width for p in parts]),
                      shape=tuple(s for p in parts for s in p.shape))


def engine_candidates(setup: Setup, profile: AcceptanceProfile,
                      max_nodes: int = MAX_NODES) -> Candidates:
    """The chains and trees `recommend` weighs for the engines: chains up to its depth limit
    (vLLM; SGLang with topk 1), SGLang's fixed block for block drafters, and SGLang's EAGLE
    trees when the per-rank acceptance is measured. A drafter no engine runs gets chains
    (specsim's model, as recommend does)."""
    depth = limit_depth(setup, profile, max_nodes, None, [])
    chains = chain_candidates(profile, depth)
    drafter = setup.drafter
    if block_only(drafter) and not runs_chains(drafter):
        keep = (chains.nodes == 0) | (chains.nodes == depth)
        return Candidates(nodes=chains.nodes[keep], depth=chains.depth[keep],
                          tau=chains.tau[keep], max_width=chains.max_width[keep],
                          shape=tuple(np.asarray(chains.shape)[keep].tolist()))
    if not tree_engines(drafter) or block_only(drafter) or not _trees_allowed(profile):
        return chains
    steps = min(depth, max(AUTOREGRESSIVE_DEPTHS))
    return _join([chains, sglang_candidates(profile, max_nodes, steps)])


def _bound(setup: Setup, profile: AcceptanceProfile) -> SpeedupTable | None:
    """Best trees of any shape (the unconstrained bound), None for chain-only profiles."""
    if not profile.rank_acceptance:
        return None
    nodes = np.arange(BOUND_MAX_NODES + 1)
    return speedup_sweep(setup, profile, RECOMMEND_BATCH, nodes, shape="tree")


def make_drafter_plan(base: Setup, scenario: Scenario, name: str, drafter: Drafter,
                      layouts: tuple[Layout, ...], progress: Progress) -> DrafterPlan:
    """A drafter's part: the serving tables of its engine candidates at each layout, and at
    the first layout its weights fit, the speedup table, recommendation, bound and commands."""
    profile = scenario.profile_for(drafter)
    setup = dataclasses.replace(base, drafter=drafter, context=scenario.decode_context_tokens)
    cands = engine_candidates(setup, profile)
    tables = []
    for tp, ep in layouts:
        progress(f"  {name}: serving model at {layout_text(tp, ep)} ({cands.nodes.size} "
                 f"candidates x {len(BATCH_GRID)} batch sizes)")
        tables.append(serving_table(dataclasses.replace(setup, ep=ep), scenario, cands, tp=tp))
    fit = next((t for t in tables if t.weights_fit), tables[0])
    one = dataclasses.replace(setup, tp=fit.tp, ep=fit.ep)
    sweep = speedup_table(one, RECOMMEND_BATCH, cands)
    rec = recommend(one, profile, RECOMMEND_BATCH, max_nodes=MAX_NODES, shape="auto")
    bound = _bound(one, profile)
    try:  # for `one`'s layout: one command per node where it spans several (engine_commands)
        commands, no_commands = tuple(engine_commands(rec, one)), ""
    except SpecError as err:
        commands, no_commands = (), str(err)
    return DrafterPlan(name=name, drafter=drafter, profile=profile, tables=tables,
                       speedup=sweep, recommendation=rec, setup=one, bound=bound,
                       curves=speedup_curves(sweep),
                       bound_curves=None if bound is None else speedup_curves(bound),
                       commands=commands, no_commands=no_commands)


def plain_decoding_tables(base: Setup, scenario: Scenario, layouts: tuple[Layout, ...]
                          ) -> list[ServingTable]:
    """Plain decoding's serving tables at each layout (no drafter, no draft cost)."""
    none = Candidates(nodes=np.zeros(1), depth=np.zeros(1), tau=np.ones(1),
                      max_width=np.zeros(1), shape=("chain",))
    setup = dataclasses.replace(base, drafter=None, draft_cost=0.0)
    return [serving_table(dataclasses.replace(setup, ep=ep), scenario, none, tp=tp)
            for tp, ep in layouts]


def deployable(part: DrafterPlan, vendor: str) -> bool:
    """Whether an engine that serves on `vendor`'s GPUs has a method for the drafter's family
    (a deployable answer)."""
    return part.drafter is not None and any(a.method(part.drafter) for a in adapters(vendor))


def fastest_per_user(tables: list[ServingTable]) -> float:
    """Highest tokens/s per user of any usable setting in the tables (0 if none): the arrays'
    maximum (a Setting would also simulate its latency, which the order does not need)."""
    return max((float(np.max(t.tokens_per_s_per_user[t.usable])) for t in tables
                if t.usable.any()), default=0.0)

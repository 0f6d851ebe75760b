"""The best chain or tree per batch size, and the engine commands that run it.

Candidates per engine are what that engine builds (engines/*.yaml record the rules and the
engine versions): vLLM 0.33.0 verifies chains only, with one chain length per batch-size range;
SGLang 0.5.23 verifies the tree its EAGLE expansion realizes for a (steps, topk, draft tokens)
triple (`trees.sglang_tree`), or a block chain for DFLASH and DSPARK. Chains are scored with the
per-position acceptance; trees with the candidate-rank model. The unconstrained best tree is
reported only as a bound. Every emitted setting is checked against the recorded rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from specsim.engines import (
    EngineCommand,
    adapter,
    adapters,
    block_only,
    render_command,
    runs_chains,
    target_id,
    tree_engines,
)
from specsim.engines.parallel import parallel_commands
from specsim.errors import SpecError, check_int, check_number, parameter_error
from specsim.forward.gemm import padded_tokens
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.defaults import MAX_TOKENS_PER_S_PER_USER, MAX_TREE_NODES
from specsim.specs.drafters import Drafter
from specsim.specs.engines import Engine, load_engine
from specsim.speculation import engine_time
from specsim.speculation.round_structures import (
    STRUCTURES,
    StructureOptions,
    compare_structures,
)
from specsim.speculation.speedup import (
    AUTOREGRESSIVE_DEPTHS,
    OBJECTIVES,
    SHAPES,
    Candidates,
    Choice,
    Recommendation,
    Setup,
    SpeedupTable,
    candidates_for,
    chain_candidates,
    check_choice,
    choice_at,
    speedup_table,
)
from specsim.speculation.trees import (
    Tree,
    best_first_tree,
    chain,
    sglang_pool_probabilities,
    sglang_tree,
)

__all__ = ["Choice", "EngineCommand", "Recommendation", "chosen_trees", "engine_builds_trees",
           "engine_cells", "engine_commands", "limit_depth", "optimum_tree", "recommend",
           "render_command", "serving_batch", "sglang_candidates", "target_id"]

# SGLang topk values tried for trees (topk 1 is a chain, scored per position).
SGLANG_TOPK = (2, 3, 4, 5, 6, 8)


# A per-batch schedule (vLLM's num_speculative_tokens_per_batch_size) takes the shortest chain
# within this fraction of the best at each batch: differences that small are far below the
# model's error (validate: 6.7% median on speedups), and without it near-ties flip the schedule
# back and forth between neighbouring lengths as the batch grows.
SCHEDULE_TOLERANCE = 0.005
# The schedule is chosen on the GPU's kernel model without its token-tile and wave terms
# (`_untiled`): those steps (powers of two to 64 tokens, then multiples of 128: Vidur's A100
# GEMM tables) are the library's per-shape tile choices, whose positions "differ shape to
# shape and do not carry over" (specsim/forward/gemm.py), and a schedule chosen on them chases
# them: EAGLE-3 on Llama-3.1-8B on an A100 went K = 6, 5, 4, 6, 5, 4, 3, 5, ... as the batch
# grew, each step keeping a verification pass inside a 64- or 128-token tile. The rows it
# emits are still timed on the full model.


def _choices(table: SpeedupTable, objective: str, tolerance: float = 0.0) -> list[Choice]:
    best = table.best(objective, tolerance)
    round_s, speedup = table.round_s, table.speedup  # each property computes a full table
    return [choice_at(table, i, k, round_s, speedup) for i, k in enumerate(best.tolist())]


def sglang_candidates(profile: AcceptanceProfile, max_nodes: int, max_steps: int) -> Candidates:
    """Trees SGLang realizes: per (steps, topk >= 2), the best n of its candidate pool."""
    ranks = profile.ranks(max(SGLANG_TOPK))
    parts: list[tuple[float, float, float, float]] = [(0.0, 0.0, 1.0, 0.0)]
    for steps in range(1, max_steps + 1):
        for topk in SGLANG_TOPK:
            pool = sglang_pool_probabilities(ranks, steps, topk)[:max_nodes]
            tau = 1.0 + np.cumsum(pool)
            parts += [(n + 1.0, float(steps), float(tau[n]), float(topk))
                      for n in range(pool.size)]
    nodes, depth, tau, width = (np.array(p) for p in zip(*parts, strict=True))
    shape = tuple("tree" if w > 1 else "chain" for w in width)
    return Candidates(nodes=nodes, depth=depth, tau=tau, max_width=width, shape=shape)


def recommend(setup: Setup, profile: AcceptanceProfile, batch: ArrayLike, *,
              max_nodes: int = 64, shape: str = "auto", objective: str = "speedup",
              max_depth: int | None = None, round_structures: Sequence[str] = (),
              structure_options: StructureOptions | None = None) -> Recommendation:
    """The best setting per batch size that an engine runs, with notes on extrapolation.

    shape: "chain", "tree", or "auto" (trees when the profile has per-rank acceptance that was
    not derived from chain data). max_depth: deepest chain or tree considered.
    round_structures: structures beyond one round to compare with the single round
    (`speculation.round_structures.STRUCTURES`; empty: none), each up to the same depth, with
    `structure_options` (defaults: the bounds named in `StructureOptions`).
    """
    check_choice("shape", shape, SHAPES)
    check_choice("objective", objective, OBJECTIVES)
    check_int(max_nodes, "max_nodes", low=1, high=MAX_TREE_NODES)
    check_int(max_depth, "max_depth", low=1, high=MAX_TREE_NODES)
    drafter = setup.drafter
    notes: list[str] = list(setup.notes)
    depth_limit = limit_depth(setup, profile, max_nodes, max_depth, notes)
    chains = chain_candidates(profile, depth_limit)
    batches = np.atleast_1d(np.asarray(batch, dtype=np.int64))
    chain_table = speedup_table(setup, batches, chains)
    best_chain = _choices(chain_table, objective)
    schedule_chain = _schedule_chains(setup, chains, batches, objective)
    use_trees = shape == "tree" or (shape == "auto" and bool(profile.rank_acceptance)
                                    and not profile.ranks_from_chain)
    if (shape == "auto" and profile.rank_acceptance and profile.ranks_from_chain
            and engine_builds_trees(drafter)):
        notes.append("trees left out: the per-rank acceptance would come from chain data "
                     "(a_j = alpha (1 - alpha)^j); give --ranks FILE or --shape tree")
    elif shape == "tree" and profile.ranks_from_chain:
        notes.append("trees use per-rank acceptance derived from chain data "
                     "(a_j = alpha (1 - alpha)^j of the first position), not measured ranks")
    sglang = _sglang_choices(setup, profile, batches, objective, best_chain, use_trees,
                             max_nodes, depth_limit)
    bound = None
    if use_trees:
        trees = candidates_for(drafter, profile, shape="tree", max_nodes=max_nodes)
        keep = (trees.max_width > 1) & (trees.depth <= depth_limit) | (trees.nodes == 0)
        shaped = _choices(speedup_table(setup, batches, _subset(trees, keep)), objective)
        bound = [max(t, c, key=lambda x: _score(x, objective))
                 for t, c in zip(shaped, best_chain, strict=True)]
    best = _best_runnable(drafter, best_chain, sglang, bound, objective)
    _extrapolation_notes(profile, best + best_chain, notes)
    _lengthening_note(setup, schedule_chain, notes, chain_table)
    _lengthening_note(setup, best_chain, notes, chain_table)
    structures = None
    if round_structures:
        o = structure_options or StructureOptions()
        wanted = ("single", *(s for s in round_structures if s != "single"))
        structures = dataclasses.replace(compare_structures(
            setup, profile, batches, max_gamma=depth_limit, structures=wanted,
            stage_acceptance=o.stage_acceptance, device=o.device,
            head_concentration=o.head_concentration), runs=structure_engines())
    return Recommendation(best=best, best_chain=best_chain, objective=objective,
                          engine_trees=sglang, bound=bound, schedule_chain=schedule_chain,
                          notes=tuple(notes), structures=structures)


def serving_batch(choices: list[Choice], min_tokens_per_s_per_user: float = 0.0
                  ) -> Choice | None:
    """The batch size to serve at: among those that fit in memory and keep every user at or
    above the floor (tokens/s), the one with the most throughput (ties: the smaller batch)."""
    check_number(min_tokens_per_s_per_user, "min_tokens_per_s_per_user", low=0.0,
                 high=MAX_TOKENS_PER_S_PER_USER)
    ok = [c for c in choices if c.fits and c.tokens_per_s_per_user >= min_tokens_per_s_per_user]
    return max(ok, key=lambda c: (c.throughput, -c.batch)) if ok else None


def engine_builds_trees(drafter: Drafter | None) -> bool:
    """Whether an engine could run this drafter as a tree (SGLang's tree algorithms; vLLM
    verifies chains only): otherwise leaving trees out needs no note."""
    engines = tree_engines(drafter)
    return not engines or any(a.tree_method(drafter) for a in engines)


def limit_depth(setup: Setup, profile: AcceptanceProfile, max_nodes: int,
                max_depth: int | None, notes: list[str]) -> int:
    """Deepest chain or tree considered: max_nodes, max_depth, the drafter's draft limit and
    the positions the acceptance was measured over (a note where that one cuts)."""
    limit = min(max_nodes, max_depth or max_nodes)
    drafter = setup.drafter
    if drafter is not None and drafter.draft_limit:
        limit = min(limit, drafter.draft_limit)
    measured = profile.measured_positions
    if measured is not None and limit > measured:
        notes.append(f"chains and trees stop at depth {measured}: the acceptance was measured "
                     f"over {measured} positions and deeper ones would only repeat the last "
                     "alpha (give --alpha to assume it holds deeper)")
        limit = measured
    return max(limit, 1)


def _subset(c: Candidates, keep: np.ndarray) -> Candidates:
    return Candidates(nodes=c.nodes[keep], depth=c.depth[keep], tau=c.tau[keep],
                      max_width=c.max_width[keep],
                      shape=tuple(s for s, k in zip(c.shape, keep.tolist(), strict=True) if k))


def _schedule_chains(setup: Setup, chains: Candidates, batches: np.ndarray, objective: str
                     ) -> list[Choice]:
    """The best chain at every batch size 1..largest requested one that fits, timed with the
    engine that runs the schedule (`schedule_setup`)."""
    every = np.arange(1, int(batches.max()) + 1)
    timed = schedule_setup(setup)
    table = speedup_table(timed, every, chains)
    decide = speedup_table(_untiled(timed), every, chains) if timed.engine else table
    round_s, speedup = table.round_s, table.speedup
    rows = [choice_at(table, i, k, round_s, speedup)
            for i, k in enumerate(decide.best(objective, SCHEDULE_TOLERANCE).tolist())]
    fitting = [c.batch for c in rows if c.fits]
    return rows[:max(fitting)] if fitting else []


def _untiled(setup: Setup) -> Setup:
    """`setup` on its GPU's kernel model without the token-tile and wave terms (the schedule
    is chosen on it: see the comment above SCHEDULE_TOLERANCE)."""
    profile = engine_time.timing_hardware(setup.engine, setup.hardware)
    gemm = dataclasses.replace(profile.efficiency.gemm, tile_fraction=0.0, wave_fraction=0.0)
    efficiency = dataclasses.replace(profile.efficiency, gemm=gemm)
    return dataclasses.replace(setup, hardware=dataclasses.replace(profile, efficiency=efficiency))


def schedule_setup(setup: Setup) -> Setup:
    """The setup a per-batch chain schedule is timed with: the schedule runs on an engine
    that builds chains, so with the first such engine's own terms (vLLM) where the setup has
    an engine that builds none (an SGLang-timed schedule for a vLLM command would carry
    SGLang's host work); as it is for the idealized GPU (no engine) or when its engine builds
    chains itself (vLLM, TensorRT-LLM)."""
    engine = setup.engine
    chain_engines = [a.slug for a in adapters() if a.builds == "chains"]
    if engine is None or not chain_engines or engine.base_slug in chain_engines:
        return setup
    return dataclasses.replace(setup, engine=load_engine(chain_engines[0]))


def _sglang_choices(setup: Setup, profile: AcceptanceProfile, batches: np.ndarray,
                    objective: str, best_chain: list[Choice], use_trees: bool,
                    max_nodes: int, depth_limit: int) -> list[Choice] | None:
    """What the EAGLE-tree engines (SGLang) run per batch: the best tree or chain, or for a
    block drafter (DFLASH, DSPARK) the best block chain up to the drafter's block, since its
    length is a start-up flag (sglang-0.5.23 `--speculative-dflash-block-size`, sized into the
    drafter by srt/models/dflash.py set_block_size) and each batch range gets its own server;
    None where none runs the drafter."""
    if not tree_engines(setup.drafter):
        return None
    if block_only(setup.drafter) or not use_trees:
        return best_chain
    steps = min(depth_limit, max(AUTOREGRESSIVE_DEPTHS))
    trees = _choices(speedup_table(setup, batches,
                                   sglang_candidates(profile, max_nodes, steps)), objective)
    return [t if _score(t, objective) > _score(c, objective) * (1 + 1e-9) else c
            for t, c in zip(trees, best_chain, strict=True)]


def _best_runnable(drafter: Drafter | None, best_chain: list[Choice],
                   sglang: list[Choice] | None, bound: list[Choice] | None, objective: str
                   ) -> list[Choice]:
    """Per batch, the best of what an engine runs; specsim's model where no engine runs it."""
    chains_run = runs_chains(drafter)
    options = [best_chain] if chains_run or sglang is None else []
    if sglang is not None:
        options.append(sglang)
    if drafter is None or (not chains_run and sglang is None):
        options = [best_chain] + ([bound] if bound else [])
    return [max(row, key=lambda c: (_score(c, objective), -c.nodes))
            for row in zip(*options, strict=True)]


# How `_lengthening_note`'s notes start (a plan's command block shows the first of them).
LENGTHENS = "the per-batch chain lengthens from batch"


def _lengthening_note(setup: Setup, schedule: list[Choice], notes: list[str],
                      table: SpeedupTable) -> None:
    """Say why, where the per-batch chain lengthens as the batch grows (a dense target at a
    short context has its longest chain at batch 1): the physical reason, named. `table`:
    the chains at the schedule's batch sizes, whose round parts say whether the round is
    host-bound there."""
    grows = [(a, b) for a, b in zip(schedule, schedule[1:], strict=False)
             if b.fits and b.nodes > a.nodes]
    if not grows:
        return
    at = grows[0][1].batch
    rows = np.flatnonzero(table.batch == at)
    cols = np.flatnonzero((table.candidates.nodes == grows[0][1].nodes)
                          & (table.candidates.depth == grows[0][1].depth))
    host = gpu = 0.0
    if rows.size and cols.size:
        i, k = int(rows[0]), int(cols[0])
        per_batch = np.broadcast_to(np.ravel(np.add(table.round_overhead_s,
                                                    table.round_host_overlap_s)),
                                    table.batch.shape)
        host, gpu = float(per_batch[i]), float(table.verify_s[i, k] + table.draft_s[i, k])
    engine = setup.engine.slug if setup.engine is not None else "the engine"
    if host > 0.0 and host >= gpu:
        why = (f"the round is host-bound there: {engine}'s host work per round "
               f"({host * 1e3:.2f} ms: its round term and per-request round term times the "
               f"batch, engines/{engine}.yaml) is at least the GPU's verification and "
               f"drafting ({gpu * 1e3:.2f} ms), and a longer chain spreads that fixed host "
               "time over more accepted tokens")
    elif (tile := _tile_crossing(setup, grows[0][0], grows[0][1], table)) is not None:
        shorter, tokens = tile
        why = (f"GEMM tile quantization, not a trend: at batch {at} a chain of {shorter} "
               f"already verifies more tokens than one {tokens}-token GEMM tile holds (the "
               "kernel model's token tiles: powers of two to 64 tokens, then multiples of "
               "128, Vidur's A100 GEMM tables), so the longer chain fills the same tiles for "
               "little more; the chain shortens again as the batch grows")
    elif setup.target.moe is not None:
        why = ("the target is a mixture of experts: a larger batch already reads most experts "
               "each step, so verifying more drafted tokens adds few expert weights")
    elif (setup.engine is not None and setup.engine.verify_attention_factor > 1.0
          and setup.target.mla is None):
        why = (f"{engine} verifies through a prefill-type attention kernel, "
               f"{setup.engine.verify_attention_factor:g}x a decoding kernel's time for the "
               f"same KV cache (verify_attention_factor, engines/{engine}.yaml): a cost per "
               "round that grows with the batch and the context whatever the draft length, "
               "so longer drafts spread it over more accepted tokens")
    else:
        why = ("each step reads every request's KV cache, which a round reads once for all its "
               "drafted tokens; at this context that read grows with the batch, and longer "
               "drafts spread it over more tokens")
    note = f"{LENGTHENS} {at}: {why}"
    if note not in notes:
        notes.append(note)


def _tile_crossing(setup: Setup, before: Choice, after: Choice, table: SpeedupTable
                   ) -> tuple[int, int] | None:
    """(the shorter chain's nodes, the token tile it filled) where a chain lengthens from
    `before` to `after` because of the GEMM token tiles: the shorter chain's verification
    tokens cross a tile at `after`'s batch while the longer chain's fall in the same one, and
    on the kernel model without its tiles (`_untiled`) the best chain does not lengthen
    between the two batches (`table`'s candidates); None otherwise."""
    if setup.engine is None:
        return None
    gemm = engine_time.timing_hardware(setup.engine, setup.hardware).efficiency.gemm
    if gemm.tile_fraction <= 0.0:
        return None
    tiles = padded_tokens(np.array([before.batch * (before.nodes + 1.0),
                                    after.batch * (before.nodes + 1.0),
                                    after.batch * (after.nodes + 1.0)]), gemm.tile_rows)
    if not (tiles[1] > tiles[0] and tiles[2] == tiles[1]):
        return None
    untiled = speedup_table(_untiled(setup), np.array([float(before.batch), float(after.batch)]),
                            table.candidates)
    k_before, k_after = table.candidates.nodes[untiled.best("speedup", SCHEDULE_TOLERANCE)]
    if k_after > k_before:
        return None  # the chain lengthens without the tiles too: another reason
    return before.nodes, int(tiles[0])


def _extrapolation_notes(profile: AcceptanceProfile, choices: list[Choice],
                         notes: list[str]) -> None:
    if profile.measured_on == "tree":
        notes.append("the acceptance is a tree's tokens per round read as a chain's: chain "
                     "speedups are optimistic")
    elif profile.measured_on == "proxy":
        notes.append("the acceptance is a proxy (another drafter's or pair's number, see "
                     "the source): measure this pair with `specsim acceptance fit`")


def _score(choice: Choice, objective: str) -> float:
    return choice.speedup if objective == "speedup" else choice.throughput


def chosen_trees(rec: Recommendation, profile: AcceptanceProfile, drafter: Drafter | None
                 ) -> list[Tree | None]:
    """Per batch size of `rec.best`, the tree it runs node by node: a chain, SGLang's tree
    where an EAGLE-tree engine runs the drafter, else the best-first tree of that size and
    depth; None where the batch does not speculate."""
    return [None if c.nodes == 0 else _realized(c, profile, drafter) for c in rec.best]


def _realized(choice: Choice, profile: AcceptanceProfile, drafter: Drafter | None) -> Tree:
    if choice.max_width <= 1:
        return chain(profile.alphas(choice.nodes))
    if tree_engines(drafter):
        return sglang_tree(profile.ranks(choice.max_width), choice.depth, choice.max_width,
                           choice.nodes + 1)
    return best_first_tree(profile.ranks(choice.nodes), choice.nodes, choice.depth)


def optimum_tree(profile: AcceptanceProfile, max_nodes: int, max_depth: int) -> Tree | None:
    """The best tree of `max_nodes` nodes at most `max_depth` deep whose nodes' children are
    their top ranks (Sequoia's optimum, a bound no engine builds); None without measured
    per-rank acceptance."""
    if not profile.rank_acceptance:
        return None
    return best_first_tree(profile.ranks(max_nodes), max_nodes, max_depth)


def engine_cells(rec: Recommendation, drafter: Drafter | None, vendor: str | None = None
                 ) -> dict[str, list[object]]:
    """Per registered engine adapter that serves on `vendor`'s GPUs (None: every one), its
    column of the recommend table: one cell per batch size of `rec.best` (`vllm_k`: the chain
    length vLLM's schedule runs; `sglang`: its flags)."""
    return {a.column: a.cells(rec, drafter) for a in adapters(vendor)}


def engine_commands(rec: Recommendation, setup: Setup) -> list[EngineCommand]:
    """Per engine adapter, the commands that start a server with the recommended setting, or
    the reason there is none; every emitted setting satisfies engines/*.yaml (else SpecError).
    An engine that switches its setting per batch size inside one server (vLLM's schedule)
    gets one command; one that fixes it at start-up (SGLang) gets one per range of
    consecutive batch sizes sharing a setting (`EngineCommand.batch_range`, `batch_label`).
    Each command carries the engine's cap on concurrent requests at the largest batch it was
    computed for (`--max-num-seqs`, `--max-running-requests`), after the flags that capture
    CUDA graphs up to it (`EngineAdapter.cap_args`): without it vLLM admits up to
    its default 1,024 sequences, and SGLang resets its cap to 48 whenever speculation is on
    (sglang-0.5.23 srt/arg_groups/speculative_hook.py), so a command for batch 64 would never
    reach it. A setup past one TP group or node (its `ep`, or more GPUs than a node holds) gets
    the layout's flags and one command per node, as the plan's do (`engines.parallel`); an
    engine on a GPU of a vendor it does not serve gets the line saying so."""
    hw = setup.hardware
    out: list[EngineCommand] = []
    for a in adapters():
        if not a.runs_on(hw.vendor):
            out.append(a.not_on(hw.vendor))
            continue
        for c in a.commands(rec, setup):
            if not (c.argv and c.batches):
                out.append(c)
                continue
            cap = a.cap_args(max(c.batches), c.step_tokens)
            # the setup's layout (data / expert parallelism, a replica over several nodes):
            # the plan's commands for it, one per node (`engines.parallel`)
            out += parallel_commands(a, dataclasses.replace(c, argv=(*c.argv, *cap)),
                                     tp=setup.tp, ep=setup.ep,
                                     gpus_per_node=hw.gpus_per_node, tail=cap)
    return out


def structure_engines() -> dict[str, str]:
    """Per structure, the serving engines that run it (label and version, comma-separated;
    "" where none does), from the `round_structures` of each engine's speculative block
    (engines/*.yaml, read from the released wheels)."""
    runs: dict[str, list[str]] = {s: [] for s in STRUCTURES}
    for a in adapters():
        for s in structures_run(a.slug):
            runs.setdefault(s, []).append(a.label)
    return {s: ", ".join(v) for s, v in runs.items()}


def structures_run(slug: str) -> tuple[str, ...]:
    """The round structures the engine `slug` runs (its YAML's speculative.round_structures;
    single rounds only where the block records none)."""
    args = adapter(slug).args
    listed = args.rules.get("round_structures", ["single"])
    if not isinstance(listed, list) or not listed or any(s not in STRUCTURES for s in listed):
        raise SpecError(f"{args.path}: field 'speculative.round_structures' = {listed!r}: needs "
                        f"a list of round structures ({', '.join(STRUCTURES)})")
    return tuple(listed)


def check_runs(structure: str, engine: Engine | None) -> None:
    """Refuse a structure the chosen serving engine does not run (one line naming the option);
    the roofline and timing-only profiles (no speculative block) run specsim's model of any."""
    if structure not in STRUCTURES:
        raise parameter_error("round_structure", f"{structure!r} is not one of "
                              f"{', '.join(STRUCTURES)}")
    if engine is None:
        return
    slug = engine.base_slug
    if slug not in {a.slug for a in adapters()}:
        return
    runs = structures_run(slug)
    if structure not in runs:
        a = adapter(slug)
        raise parameter_error(
            "round_structure",
            f"{structure} is not a round structure {a.label} runs ({a.args.path.name} "
            f"speculative.round_structures: {', '.join(runs)}); leave the option out to see "
            "it compared as specsim's model, or give --engine roofline")


def requested_structures(option: str, engine: Engine | None) -> tuple[str, ...]:
    """The structures `recommend --round-structure` compares: "all" every one (each said to
    run or not), "single" none beyond the single round, a named one (dashes or underscores)
    only where the chosen engine runs it (`check_runs`)."""
    name = option.replace("-", "_")
    if name == "all":
        return STRUCTURES
    if name not in STRUCTURES:
        names = ", ".join(["all", *(s.replace("_", "-") for s in STRUCTURES)])
        raise parameter_error("round_structure", f"{option!r} is not one of {names}")
    check_runs(name, engine)
    return () if name == "single" else ("single", name)

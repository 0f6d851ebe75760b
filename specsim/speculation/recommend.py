"""The best chain or tree per batch size, and the engine commands that run it.

Candidates per engine are what that engine builds (engines/*.yaml record the rules and the
engine versions): vLLM 0.33.0 verifies chains only, with one chain length per batch-size range;
SGLang 0.5.23 verifies the tree its EAGLE expansion realizes for a (steps, topk, draft tokens)
triple (`trees.sglang_tree`), or a block chain for DFLASH and DSPARK. Chains are scored with the
per-position acceptance; trees with the candidate-rank model. The unconstrained best tree is
reported only as a bound. Every emitted setting is checked against the recorded rules.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError, check_int, check_number
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.defaults import MAX_TOKENS_PER_S_PER_USER, MAX_TREE_NODES
from specsim.specs.drafters import Drafter
from specsim.specs.engine_args import engine_args, sglang_problems, vllm_problems
from specsim.specs.names import one_line
from specsim.speculation.speedup import (
    AUTOREGRESSIVE_DEPTHS,
    OBJECTIVES,
    SHAPES,
    Candidates,
    Choice,
    Setup,
    SpeedupTable,
    candidates_for,
    chain_candidates,
    check_choice,
    choice_at,
    speedup_table,
)
from specsim.speculation.trees import sglang_pool_probabilities

__all__ = ["Choice", "EngineCommand", "Recommendation", "engine_commands", "recommend",
           "render_command", "serving_batch", "sglang_algorithm", "vllm_args", "vllm_flag"]

# SGLang topk values tried for trees (topk 1 is a chain, scored per position).
SGLANG_TOPK = (2, 3, 4, 5, 6, 8)


def _choices(table: SpeedupTable, objective: str) -> list[Choice]:
    best = table.best(objective)
    round_s, speedup = table.round_s, table.speedup  # each property computes a full table
    return [choice_at(table, i, k, round_s, speedup) for i, k in enumerate(best.tolist())]


def render_command(argv: Sequence[str]) -> str:
    """An argument vector as one line a POSIX shell runs as exactly that vector: every word
    that needs it is single-quoted (a `'` inside written as '"'"'), none is left to expand."""
    return shlex.join(argv)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineCommand:
    """A command that starts a server with the recommended setting, or why there is none.

    argv: the command, one argument per item (empty where there is none); `command` is it
    rendered for a shell. batches: the batch sizes the command is the best setting for (all,
    for vLLM's schedule).
    """

    engine: str
    version: str
    argv: tuple[str, ...] = ()
    reason: str = ""
    batches: tuple[int, ...] = ()

    @property
    def command(self) -> str | None:
        """The command as one line to paste into a POSIX shell, None where there is none."""
        return render_command(self.argv) if self.argv else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Recommendation:
    """Per batch size: the best setting an engine runs, the best chain (vLLM), SGLang's best,
    the unconstrained tree bound, and the engine commands with notes on extrapolation."""

    best: list[Choice]
    best_chain: list[Choice]
    objective: str
    sglang: list[Choice] | None = None
    bound: list[Choice] | None = None
    schedule_chain: list[Choice] = field(default_factory=list)
    notes: tuple[str, ...] = ()

    def vllm_config(self, drafter: Drafter | None) -> dict[str, object] | None:
        """vLLM `--speculative-config`: the longest useful chain and a per-batch schedule from
        batch 1 up to the largest batch that fits (`schedule_chain`, one entry per batch)."""
        method = drafter.kind.vllm_method if drafter else None
        if drafter is None or method is None:
            return None
        rules = engine_args("vllm").rules["methods"].get(method)
        if rules is None or (rules["requires_model"] and not drafter.checkpoint):
            return None
        chains = [c for c in (self.schedule_chain or self.best_chain) if c.fits]
        ks = [c.nodes for c in chains]
        if not ks or max(ks) == 0:
            return None
        config: dict[str, object] = {"method": method}
        if drafter.checkpoint and not rules.get("target_is_draft", False):
            config["model"] = drafter.checkpoint
        config["num_speculative_tokens"] = max(ks)
        if drafter.kind.vllm_parallel_drafting:
            config["parallel_drafting"] = True
        schedule = _schedule(chains)
        if len({k for _, _, k in schedule}) > 1:
            config["num_speculative_tokens_per_batch_size"] = schedule
        return config

    def sglang_flags(self, drafter: Drafter | None) -> list[str]:
        """SGLang flags per batch size (of `sglang`, else `best`), "(no speculation)" or
        "(SGLang cannot run it)"."""
        rows = self.sglang if self.sglang is not None else self.best
        if sglang_algorithm(drafter) is None:
            return ["(SGLang cannot run it)" if c.nodes else c.sglang_flags for c in rows]
        return [" ".join(f"{k} {v}" for k, v in _sglang_args(drafter, c).items())
                if c.nodes else c.sglang_flags for c in rows]


def sglang_algorithm(drafter: Drafter | None) -> str | None:
    """SGLang's `--speculative-algorithm` for the drafter, None where SGLang has none."""
    return drafter.kind.sglang_algorithm if drafter is not None else None


def _sglang_args(drafter: Drafter | None, choice: Choice) -> dict[str, object]:
    """The speculative flags of one SGLang setting, flag -> value (no draft path)."""
    algorithm = sglang_algorithm(drafter)
    if drafter is None or algorithm is None:
        return {}
    spec = engine_args("sglang").rules["algorithms"][algorithm]
    args: dict[str, object] = {"--speculative-algorithm": algorithm}
    if spec["tree"]:
        args["--speculative-num-steps"] = choice.depth
        args["--speculative-eagle-topk"] = max(choice.max_width, 1)
        args["--speculative-num-draft-tokens"] = choice.nodes + 1
    elif spec["draft_tokens"] == "block":
        args[spec["block_flag"]] = choice.nodes + 1  # DFLASH: the block, anchor included
    else:
        args[spec["block_flag"]] = choice.nodes  # DSPARK: gamma draft tokens
    return args


def _schedule(choices: list[Choice]) -> list[list[int]]:
    """[[lo, hi, k], ...]: each sampled batch size covers the sizes down to the previous one."""
    ranges: list[list[int]] = []
    lo = 1
    for c in sorted(choices, key=lambda c: c.batch):
        if ranges and ranges[-1][2] == c.nodes:
            ranges[-1][1] = c.batch
        else:
            ranges.append([lo, c.batch, c.nodes])
        lo = c.batch + 1
    return ranges


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
              max_depth: int | None = None) -> Recommendation:
    """The best setting per batch size that an engine runs, with notes on extrapolation.

    shape: "chain", "tree", or "auto" (trees when the profile has per-rank acceptance that was
    not derived from chain data). max_depth: deepest chain or tree considered.
    """
    check_choice("shape", shape, SHAPES)
    check_choice("objective", objective, OBJECTIVES)
    check_int(max_nodes, "max_nodes", low=1, high=MAX_TREE_NODES)
    check_int(max_depth, "max_depth", low=1, high=MAX_TREE_NODES)
    drafter = setup.drafter
    notes: list[str] = []
    depth_limit = _depth_limit(setup, profile, max_nodes, max_depth, notes)
    chains = chain_candidates(profile, depth_limit)
    batches = np.atleast_1d(np.asarray(batch, dtype=np.int64))
    best_chain = _choices(speedup_table(setup, batches, chains), objective)
    schedule_chain = _schedule_chains(setup, chains, batches, objective)
    use_trees = shape == "tree" or (shape == "auto" and bool(profile.rank_acceptance)
                                    and not profile.ranks_from_chain)
    if (shape == "auto" and profile.rank_acceptance and profile.ranks_from_chain
            and _engine_builds_trees(drafter)):
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
    return Recommendation(best=best, best_chain=best_chain, objective=objective, sglang=sglang,
                          bound=bound, schedule_chain=schedule_chain, notes=tuple(notes))


def serving_batch(choices: list[Choice], min_tokens_per_s_per_user: float = 0.0
                  ) -> Choice | None:
    """The batch size to serve at: among those that fit in memory and keep every user at or
    above the floor (tokens/s), the one with the most throughput (ties: the smaller batch)."""
    check_number(min_tokens_per_s_per_user, "min_tokens_per_s_per_user", low=0.0,
                 high=MAX_TOKENS_PER_S_PER_USER)
    ok = [c for c in choices if c.fits and c.tokens_per_s_per_user >= min_tokens_per_s_per_user]
    return max(ok, key=lambda c: (c.throughput, -c.batch)) if ok else None


def _engine_builds_trees(drafter: Drafter | None) -> bool:
    """Whether an engine could run this drafter as a tree (SGLang's tree algorithms; vLLM
    verifies chains only): otherwise leaving trees out needs no note."""
    algorithm = sglang_algorithm(drafter)
    return algorithm is None or bool(engine_args("sglang").rules["algorithms"][algorithm]["tree"])


def _depth_limit(setup: Setup, profile: AcceptanceProfile, max_nodes: int,
                 max_depth: int | None, notes: list[str]) -> int:
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
    """The best chain at every batch size 1..largest requested one that fits."""
    every = np.arange(1, int(batches.max()) + 1)
    rows = _choices(speedup_table(setup, every, chains), objective)
    fitting = [c.batch for c in rows if c.fits]
    return rows[:max(fitting)] if fitting else []


def _sglang_choices(setup: Setup, profile: AcceptanceProfile, batches: np.ndarray,
                    objective: str, best_chain: list[Choice], use_trees: bool,
                    max_nodes: int, depth_limit: int) -> list[Choice] | None:
    """What SGLang runs per batch: its best tree or chain, or its fixed block chain."""
    algorithm = sglang_algorithm(setup.drafter)
    if algorithm is None:
        return None
    spec = engine_args("sglang").rules["algorithms"][algorithm]
    if not spec["tree"]:
        block = chain_candidates(profile, depth_limit)
        fixed = _subset(block, (block.nodes == 0) | (block.nodes == depth_limit))
        return _choices(speedup_table(setup, batches, fixed), objective)
    if not use_trees:
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
    runs_vllm = drafter is not None and drafter.kind.vllm_method is not None
    options = [best_chain] if runs_vllm or sglang is None else []
    if sglang is not None:
        options.append(sglang)
    if drafter is None or (not runs_vllm and sglang is None):
        options = [best_chain] + ([bound] if bound else [])
    return [max(row, key=lambda c: (_score(c, objective), -c.nodes))
            for row in zip(*options, strict=True)]


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


def vllm_args(config: dict[str, object]) -> list[str]:
    """vLLM's `--speculative-config` flag and its JSON value, as two arguments."""
    return ["--speculative-config", json.dumps(config, separators=(",", ":"))]


def vllm_flag(config: dict[str, object] | None) -> str:
    """The `--speculative-config` argument as a shell-pasteable string."""
    if config is None:
        return "(vLLM has no method for this drafter, or speculation does not pay)"
    return render_command(vllm_args(config))


def engine_commands(rec: Recommendation, setup: Setup) -> list[EngineCommand]:
    """Per engine, a command that starts a server with the recommended setting, or the reason
    there is none; every emitted setting satisfies engines/*.yaml (else SpecError)."""
    return [_vllm_command(rec, setup), *_sglang_commands(rec, setup)]


def target_id(setup: Setup) -> str:
    """The target's Hugging Face id: the drafter's trained-for id where it is the drafter's
    own target, else the model spec's hf_id."""
    drafter = setup.drafter
    if drafter is not None and drafter.trained_for and drafter.target.slug == setup.target.slug:
        return drafter.trained_for
    if not setup.target.hf_id:
        raise SpecError(f"{setup.target.path or setup.target.name}: field 'hf_id' (the Hugging "
                        "Face id) is needed to print an engine command")
    return setup.target.hf_id


def _tp(flag: str, tp: int) -> list[str]:
    return [flag, str(tp)] if tp > 1 else []


def _vllm_command(rec: Recommendation, setup: Setup) -> EngineCommand:
    args = engine_args("vllm")
    drafter = setup.drafter
    family = drafter.family if drafter else "(no drafter)"
    method = drafter.kind.vllm_method if drafter else None
    if drafter is None or method is None or method not in args.rules["methods"]:
        return EngineCommand(engine="vllm", version=args.version,
                             reason=f"vLLM {args.version} cannot run the {family} family")
    if args.rules["methods"][method]["requires_model"] and not drafter.checkpoint:
        return EngineCommand(engine="vllm", version=args.version,
                             reason=f"{one_line(drafter.slug)} has no published checkpoint for "
                             f"vLLM's 'model' (method {method})")
    config = rec.vllm_config(drafter)
    if config is None:
        return EngineCommand(engine="vllm", version=args.version,
                             reason="speculation does not pay at any batch size that fits")
    problems = vllm_problems(config)
    if problems:
        raise SpecError(f"internal: emitted vLLM setting breaks engines/vllm.yaml: {problems}")
    argv = [*args.launch_argv(target_id(setup)), *vllm_args(config),
            *_tp(args.tp_flag, setup.tp)]
    return EngineCommand(engine="vllm", version=args.version, argv=tuple(argv),
                         batches=tuple(c.batch for c in rec.schedule_chain))


def _sglang_commands(rec: Recommendation, setup: Setup) -> list[EngineCommand]:
    args = engine_args("sglang")
    drafter = setup.drafter
    algorithm = sglang_algorithm(drafter)
    if drafter is None or algorithm is None or rec.sglang is None:
        family = drafter.family if drafter else "(no drafter)"
        return [EngineCommand(engine="sglang", version=args.version,
                              reason=f"SGLang {args.version} cannot run the {family} family")]
    rules = args.rules
    builtin = algorithm == "EAGLE" and setup.target.architecture in rules["mtp_builtin_targets"]
    if not drafter.checkpoint and not builtin:
        return [EngineCommand(engine="sglang", version=args.version,
                              reason=f"{one_line(drafter.slug)} has no published checkpoint for "
                              f"{rules['draft_flag']}")]
    by_setting: dict[tuple[str, ...], list[int]] = {}
    for c in rec.sglang:
        if c.nodes and c.fits:
            flags = _sglang_args(drafter, c)
            if not builtin or drafter.checkpoint != target_id(setup):
                flags[rules["draft_flag"]] = drafter.checkpoint
            problems = sglang_problems(flags, target_architecture=setup.target.architecture)
            if problems:
                raise SpecError(f"internal: emitted SGLang setting breaks "
                                f"engines/sglang.yaml: {problems}")
            words = tuple(word for k, v in flags.items() for word in (k, str(v)))
            by_setting.setdefault(words, []).append(c.batch)
    if not by_setting:
        return [EngineCommand(engine="sglang", version=args.version,
                              reason="speculation does not pay at any batch size that fits")]
    head = [*args.launch_argv(target_id(setup)), *_tp(args.tp_flag, setup.tp)]
    engine = setup.engine
    if engine is not None and engine.base_slug == "sglang" and not engine.spec_overlap:
        head.append(rules["sync_flag"])  # what was timed: rounds without the overlap
    return [EngineCommand(engine="sglang", version=args.version, argv=(*head, *words),
                          batches=tuple(b)) for words, b in by_setting.items()]

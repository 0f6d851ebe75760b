"""SGLang: the tree its EAGLE expansion realizes for (steps, topk, draft tokens), or a block
chain for DFLASH and DSPARK; one command per range of batch sizes with one setting.

SGLang 0.5.23 fixes every speculative setting when the server starts (the triple, the DFLASH
block, the DSPARK gamma; srt/arg_groups/speculative_hook.py) and has no per-batch schedule: its
adaptive mode (`--speculative-adaptive`, EAGLE with topk 1 only) steers the steps by the
acceptance it observes, not by a setting given per batch size.

Rules, and the algorithm each drafter family runs with, from engines/sglang.yaml `speculative:`
(SGLang 0.5.23's flags); every emitted setting is checked against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from specsim.engines.base import (
    EngineAdapter,
    EngineCommand,
    batch_ranges,
    register,
    target_id,
    tp_args,
)
from specsim.errors import SpecError
from specsim.specs.drafter_import import checkpoint_hint
from specsim.specs.names import one_line

if TYPE_CHECKING:
    from specsim.specs.drafters import Drafter
    from specsim.speculation.speedup import Choice, Recommendation, Setup

# The EAGLE loop's triple, all three or none.
TRIPLE = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")


def pool(steps: int, topk: int) -> int:
    """Candidates SGLang's EAGLE expansion offers: topk + (steps - 1) topk^2."""
    return topk + (steps - 1) * topk * topk


def problems(engine: EngineAdapter, flags: Mapping[str, Any], target_architecture: str = ""
             ) -> list[str]:
    """Rules of SGLang's speculative flags that `flags` (flag -> value) break."""
    rules = engine.args.rules
    algorithm = str(flags.get(rules["algorithm_flag"], "")).upper()
    spec = rules["algorithms"].get(algorithm)
    if spec is None:
        return [f"algorithm {algorithm!r} is not one of {sorted(rules['algorithms'])}"]
    found = []
    if spec["draft_path"] == "required" and not flags.get(rules["draft_flag"]) \
            and not _builtin_draft(rules, algorithm, target_architecture):
        found.append(f"{algorithm} needs {rules['draft_flag']}")
    if spec["draft_path"] == "none" and flags.get(rules["draft_flag"]):
        found.append(f"{algorithm} drafts without a model; do not pass {rules['draft_flag']}")
    found += [f"{algorithm} needs {flag} {value}" for flag, value
              in spec.get("fixed_flags", {}).items() if flags.get(flag) != value]
    given = [flags.get(f) for f in TRIPLE if f != spec.get("block_flag")]
    if not spec["tree"]:
        block = flags.get(spec["block_flag"])
        if not isinstance(block, int) or block < 1:
            found.append(f"{algorithm} needs {spec['block_flag']} >= 1")
        if any(v is not None for v in given):
            found.append(f"{algorithm} forces steps and topk to 1; do not pass the triple")
        return found
    if any(v is None for v in given):
        return found + ["pass all three of steps / topk / draft tokens"]
    steps, topk, tokens = (int(v) for v in given)  # type: ignore[arg-type]
    tree = rules["tree"]
    if steps < tree["min_steps"] or topk < tree["min_topk"]:
        found.append("steps and topk must be >= 1")
    elif topk == 1 and tokens != steps + 1:
        found.append(f"topk 1: SGLang sets draft tokens to steps + 1 = {steps + 1}")
    elif tokens - 1 > pool(steps, topk) or tokens < 2:
        found.append(f"draft tokens {tokens}: need 2 <= draft tokens <= 1 + "
                     f"{pool(steps, topk)} (topk + (steps - 1) topk^2)")
    return found


def _builtin_draft(rules: Mapping[str, Any], algorithm: str, target_architecture: str) -> bool:
    """SGLang fills a missing draft path with the target's own MTP layers."""
    return algorithm == "EAGLE" and target_architecture in rules["mtp_builtin_targets"]


def speculative_args(drafter: Drafter | None, choice: Choice) -> dict[str, object]:
    """The speculative flags of one SGLang setting, flag -> value (no draft path)."""
    algorithm = SGLANG.method(drafter)
    if drafter is None or algorithm is None:
        return {}
    rules = SGLANG.args.rules
    spec = rules["algorithms"][algorithm]
    args: dict[str, object] = {rules["algorithm_flag"]: algorithm}
    if spec["tree"]:
        steps, topk, tokens = TRIPLE
        args[steps] = choice.depth
        args[topk] = max(choice.max_width, 1)
        args[tokens] = choice.nodes + 1
    elif spec["draft_tokens"] == "block":
        args[spec["block_flag"]] = choice.nodes + 1  # DFLASH, NGRAM: the anchor included
    else:
        args[spec["block_flag"]] = choice.nodes  # DSPARK: gamma draft tokens
    args.update(spec.get("fixed_flags", {}))
    return args


def flags_per_row(rec: Recommendation, drafter: Drafter | None) -> list[str]:
    """SGLang flags per batch size (of `rec.engine_trees`, else `rec.best`), "(no speculation)" or
    "(SGLang cannot run it)"."""
    rows = rec.engine_trees if rec.engine_trees is not None else rec.best
    if SGLANG.method(drafter) is None:
        return ["(SGLang cannot run it)" if c.nodes else "(no speculation)" for c in rows]
    return [" ".join(f"{k} {v}" for k, v in speculative_args(drafter, c).items())
            if c.nodes else "(no speculation)" for c in rows]


def commands(engine: EngineAdapter, rec: Recommendation, setup: Setup) -> list[EngineCommand]:
    """One `sglang.launch_server` command per range of consecutive batch sizes that share a
    setting (a range where speculation does not pay gets the plain server), each for the
    batch sizes of its range; or one saying why there is none."""
    args = engine.args
    drafter = setup.drafter
    algorithm = engine.method(drafter)
    if drafter is None or algorithm is None or rec.engine_trees is None:
        return [engine.unable(drafter)]
    rules = args.rules
    builtin = _builtin_draft(rules, algorithm, setup.target.architecture)
    modelless = rules["algorithms"][algorithm]["draft_path"] == "none"
    if not drafter.checkpoint and not builtin and not modelless:
        return [engine.refuse(f"{one_line(drafter.slug)} has no published checkpoint for "
                              f"{rules['draft_flag']}: {checkpoint_hint(drafter)}")]
    rows = [c for c in rec.engine_trees if c.fits]
    if not any(c.nodes for c in rows):
        return [engine.refuse("speculation does not pay at any batch size that fits")]
    plain = [*engine.serve_argv(setup), *tp_args(args.tp_flag, setup.tp)]
    head = list(plain)
    timing = setup.engine
    if timing is not None and timing.base_slug == engine.slug and not timing.spec_overlap:
        head.append(rules["sync_flag"])  # what was timed: rounds without the overlap
    words = [_words(engine, drafter, c, setup, builtin, modelless) for c in rows]
    return [EngineCommand(engine=engine.slug, version=args.version,
                          argv=(*(head if r.setting else plain), *r.setting),
                          batches=r.batches, batch_range=(r.first, r.last))
            for r in batch_ranges([c.batch for c in rows], words)]


def _words(engine: EngineAdapter, drafter: Drafter, choice: Choice, setup: Setup,
           builtin: bool, modelless: bool = False) -> tuple[str, ...]:
    """The speculative flags of one batch's setting as argument words (none: no speculation),
    checked against engines/sglang.yaml; `modelless`: the algorithm takes no draft model."""
    if not choice.nodes:
        return ()
    flags = speculative_args(drafter, choice)
    draft_flag = engine.args.rules["draft_flag"]
    if not modelless and (not builtin or drafter.checkpoint != target_id(setup)):
        flags[draft_flag] = drafter.checkpoint
    found = engine.problems(flags, setup.target.architecture)
    if found:
        raise SpecError(f"internal: emitted SGLang setting breaks engines/sglang.yaml: {found}")
    return tuple(word for k, v in flags.items() for word in (k, str(v)))


def cells(engine: EngineAdapter, rec: Recommendation, drafter: Drafter | None) -> list[object]:
    """The recommend table's `sglang` column: the flags per batch size."""
    del engine
    flags = flags_per_row(rec, drafter)
    return [f if c.fits else "(does not fit in memory)"
            for c, f in zip(rec.best, flags, strict=True)]


# Requests SGLang 0.5.23 captures decode CUDA graphs up to by default on the smallest GPUs
# that hold a model at all: 8 below 20 GB, 32-48 below 60 GB, 160 with TP >= 4 there, 256 (TP
# < 4) or 512 on 60-160 GB (sglang/srt/arg_groups/memory_hook.py); a larger batch runs eager.
DEFAULT_GRAPH_BATCH = 8


def graph_flags(batch: int, tokens_per_step: int) -> tuple[str, ...]:
    """`--cuda-graph-max-bs-decode` (requests, sglang/srt/arg_groups/fields/exec_.py) for any
    batch above the smallest default: the default depends on the GPU's memory and TP, so the
    command states the batch it was computed for."""
    del tokens_per_step
    if batch <= DEFAULT_GRAPH_BATCH:
        return ()
    return ("--cuda-graph-max-bs-decode", str(batch))


SGLANG = register(EngineAdapter(
    slug="sglang", name="SGLang", builds="eagle_trees",
    batch_flag="--max-running-requests", per_batch_schedule=False, column="sglang",
    table_cells=cells, find_problems=problems, build_commands=commands,
    graph_flags=graph_flags))

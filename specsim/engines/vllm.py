"""vLLM: chains only, one `--speculative-config` with a per-batch-size schedule of chain lengths.

Rules, and the method each drafter family runs with, from engines/vllm.yaml `speculative:`
(vLLM 0.33.0's SpeculativeConfig); every emitted config is checked against them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from specsim.engines.base import (
    EngineAdapter,
    EngineCommand,
    batch_ranges,
    register,
    render_command,
    tp_args,
)
from specsim.errors import SpecError
from specsim.specs.drafter_import import checkpoint_hint
from specsim.specs.names import one_line

if TYPE_CHECKING:
    from specsim.specs.drafters import Drafter
    from specsim.speculation.speedup import Choice, Recommendation, Setup

def problems(engine: EngineAdapter, config: Mapping[str, Any], target_architecture: str = ""
             ) -> list[str]:
    """Rules of vLLM's `--speculative-config` that `config` breaks (empty: it starts)."""
    del target_architecture  # vLLM's rules do not depend on the target
    rules = engine.args.rules
    found = [f"key {k!r} is not a SpeculativeConfig field we emit (extra='forbid')"
             for k in config if k not in rules["allowed_keys"]]
    method = config.get("method")
    spec = rules["methods"].get(method)
    if spec is None:
        return found + [f"method {method!r} is not one of {sorted(rules['methods'])}"]
    k = config.get("num_speculative_tokens")
    if not isinstance(k, int) or k < rules["min_speculative_tokens"]:
        found.append(f"num_speculative_tokens must be an int >= 1, got {k!r}")
        k = 0
    if spec["requires_model"] and not config.get("model"):
        found.append(f"method {method} needs 'model' (the draft checkpoint)")
    schedule = config.get(rules["schedule"]["key"])
    if schedule is not None:
        if not spec["per_batch_size"]:
            found.append(f"method {method} ignores a per-batch schedule")
        found += _schedule_problems(schedule, k, rules["schedule"])
    json.dumps(dict(config))  # must be JSON
    return found


def _schedule_problems(schedule: Any, k_max: int, rule: dict[str, Any]) -> list[str]:
    if not isinstance(schedule, list) or not schedule:
        return ["the per-batch schedule must be a non-empty list"]
    found = []
    previous_end = rule["first_start"] - 1
    for entry in sorted(schedule, key=lambda e: e[0] if isinstance(e, list) and e else 0):
        if not (isinstance(entry, list) and len(entry) == 3
                and all(isinstance(v, int) for v in entry)):
            return [f"schedule entry {entry!r} must be [start, end, k]"]
        start, end, k = entry
        if start < 1 or start > end or k < rule["min_k"] or k > k_max:
            found.append(f"schedule entry {entry}: need 1 <= start <= end, "
                         f"0 <= k <= num_speculative_tokens")
        if start <= previous_end:
            found.append(f"schedule entry {entry} overlaps the previous range")
        if start != previous_end + 1:
            found.append(f"schedule entry {entry} leaves a gap (vLLM reuses the previous k)")
        previous_end = end
    return found


def speculative_config(rec: Recommendation, drafter: Drafter | None
                       ) -> dict[str, object] | None:
    """vLLM `--speculative-config`: the longest useful chain and a per-batch schedule from
    batch 1 up to the largest batch that fits (`schedule_chain`, one entry per batch)."""
    method = VLLM.method(drafter)
    if drafter is None or method is None:
        return None
    rules = VLLM.args.rules["methods"].get(method)
    if rules is None or (rules["requires_model"] and not drafter.checkpoint):
        return None
    chains = [c for c in (VLLM.rows(rec) or []) if c.fits]
    ks = [c.nodes for c in chains]
    if not ks or max(ks) == 0:
        return None
    config: dict[str, object] = {"method": method}
    if drafter.checkpoint and not rules.get("target_is_draft", False):
        config["model"] = drafter.checkpoint
    config["num_speculative_tokens"] = max(ks)
    if drafter.family in VLLM.args.rules["parallel_drafting_families"]:
        config["parallel_drafting"] = True
    schedule = _schedule(chains)
    if len({k for _, _, k in schedule}) > 1:
        config["num_speculative_tokens_per_batch_size"] = schedule
    return config


def _schedule(choices: list[Choice]) -> list[list[int]]:
    """[[lo, hi, k], ...]: each sampled batch size covers the sizes down to the previous one."""
    return [[r.first, r.last, r.setting]
            for r in batch_ranges([c.batch for c in choices], [c.nodes for c in choices])]


def config_args(config: dict[str, object]) -> list[str]:
    """vLLM's `--speculative-config` flag and its JSON value, as two arguments."""
    return [VLLM.args.rules["flag"], json.dumps(config, separators=(",", ":"))]


def config_flag(config: dict[str, object] | None) -> str:
    """The `--speculative-config` argument as a shell-pasteable string."""
    if config is None:
        return "(vLLM has no method for this drafter, or speculation does not pay)"
    return render_command(config_args(config))


def commands(engine: EngineAdapter, rec: Recommendation, setup: Setup) -> list[EngineCommand]:
    """One `vllm serve` command whose schedule covers every batch size (vLLM 0.33.0 switches
    the chain length per batch size inside one server, so it needs no command per range), or
    why there is none."""
    args = engine.args
    drafter = setup.drafter
    method = engine.method(drafter)
    if drafter is None or method is None or method not in args.rules["methods"]:
        return [engine.unable(drafter)]
    if args.rules["methods"][method]["requires_model"] and not drafter.checkpoint:
        return [engine.refuse(f"{one_line(drafter.slug)} has no published checkpoint for "
                              f"vLLM's 'model' (method {method}): {checkpoint_hint(drafter)}")]
    config = speculative_config(rec, drafter)
    if config is None:
        return [engine.refuse("speculation does not pay at any batch size that fits")]
    found = engine.problems(config, setup.target.architecture)
    if found:
        raise SpecError(f"internal: emitted vLLM setting breaks engines/vllm.yaml: {found}")
    argv = [*engine.serve_argv(setup), *config_args(config),
            *tp_args(args.tp_flag, setup.tp)]
    batches = tuple(c.batch for c in rec.schedule_chain)
    # the largest step: each range's top batch scoring 1 + its chain length per request
    step = max((r[1] * (1 + r[2]) for r in _schedule(rec.schedule_chain)), default=0)
    return [EngineCommand(engine=engine.slug, version=args.version, argv=tuple(argv),
                          batches=batches, batch_range=(1, max(batches)) if batches else None,
                          step_tokens=step)]


def cells(engine: EngineAdapter, rec: Recommendation, drafter: Drafter | None) -> list[object]:
    """The recommend table's `vllm_k`: the chain length the schedule runs at each batch."""
    del engine, drafter
    k = {c.batch: c.nodes for c in rec.schedule_chain}
    return [k.get(c.batch, 0) if c.fits else None for c in rec.best]


# Tokens vLLM 0.33.0 captures CUDA graphs up to by default: min(max_num_seqs x tokens per
# request x 2, 512), 1,024 on data-center Blackwell (vllm/config/vllm.py _set_cudagraph_sizes);
# a step of more tokens runs without the full graph.
DEFAULT_GRAPH_TOKENS = 512


def graph_flags(batch: int, tokens_per_step: int) -> tuple[str, ...]:
    """`--max-cudagraph-capture-size` (tokens, vllm/engine/arg_utils.py) where a full step of
    the command's batch scores more tokens than vLLM captures by default."""
    del batch
    if tokens_per_step <= DEFAULT_GRAPH_TOKENS:
        return ()
    return ("--max-cudagraph-capture-size", str(tokens_per_step))


VLLM = register(EngineAdapter(
    slug="vllm", name="vLLM", builds="chains", batch_flag="--max-num-seqs",
    per_batch_schedule=True, column="vllm_k", table_cells=cells,
    find_problems=problems, build_commands=commands, graph_flags=graph_flags))

"""TensorRT-LLM: chains, run by `trtllm-serve` with an extra-options YAML beside it.

The PyTorch backend takes its speculative setting from the `speculative_config` of the YAML
that `--extra_llm_api_options` names (TorchLlmArgs, extra="forbid"): a decoding type (Eagle3,
MTP, NGram, SA, Draft_Target; EAGLE-3 written as `Eagle`, the name released versions take),
`max_draft_len`, and a per-batch schedule of draft lengths
(`draft_len_schedule`, {batch threshold: draft length}, its smallest key holding
max_draft_len) or a cut-off above which it stops speculating (`max_concurrency`), where the
mode supports a dynamic draft length. One server covers every batch size where the schedule
can say what the recommendation does; where it cannot (a chain that lengthens with batch, a
mode without a dynamic draft length) each range of batch sizes sharing a length gets its own
server. Every YAML also sets `cuda_graph_config` (graphs captured up to the command's batch
cap, padded) and, for rounds timed without the overlap scheduler, `disable_overlap_scheduler`.

Rules, flags and field types from engines/trtllm.yaml `speculative:` (read from the
TensorRT-LLM source); every emitted command and YAML is checked against them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from specsim.engines.base import (
    BatchRange,
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
from specsim.specs.outputs import file_slug

if TYPE_CHECKING:
    from specsim.specs.drafters import Drafter
    from specsim.speculation.speedup import Choice, Recommendation, Setup


# ------------------------------------------------------------------ the YAML's rules


def _value_problems(where: str, value: Any, spec: Mapping[str, Any]) -> list[str]:
    """What is wrong with one field's value against its recorded type and bounds."""
    if value is None:
        return [] if spec.get("nullable") else [f"{where} must not be null"]
    kind = spec["type"]
    checks = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "mapping": isinstance(value, dict),
        "int_list": isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value),
        "int_map": isinstance(value, dict) and all(
            isinstance(k, int) and isinstance(v, int) and not isinstance(k, bool)
            and not isinstance(v, bool) for k, v in value.items()),
        "choice": value in spec.get("choices", ()),
    }
    if not checks.get(kind, False):
        return [f"{where} = {value!r} is not a {kind}"
                + (f" in {spec['choices']}" if kind == "choice" else "")]
    found = []
    if "ge" in spec and value < spec["ge"]:
        found.append(f"{where} = {value!r} must be >= {spec['ge']}")
    if "gt" in spec and value <= spec["gt"]:
        found.append(f"{where} = {value!r} must be > {spec['gt']}")
    if "le" in spec and value > spec["le"]:
        found.append(f"{where} = {value!r} must be <= {spec['le']}")
    return found


def _block_problems(where: str, block: Any, fields: Mapping[str, Any]) -> list[str]:
    """Every key of `block` a field of `fields` (extra="forbid"), each of its type."""
    if not isinstance(block, dict):
        return [f"{where} must be a mapping"]
    found = [f"{where}.{k} is not a field (extra='forbid')" for k in block if k not in fields]
    for key, value in block.items():
        if key in fields and isinstance(fields[key], dict):
            found += _value_problems(f"{where}.{key}", value, fields[key])
    return found


def problems(engine: EngineAdapter, options: Mapping[str, Any], target_architecture: str = ""
             ) -> list[str]:
    """Rules of TensorRT-LLM's extra-options YAML (as a mapping) that `options` break: the
    keys specsim writes, their types, and the speculative_config's decoding type, draft
    length, draft model and schedule (empty: the server starts with it)."""
    del target_architecture  # MTP takes the target's own layers whatever its architecture
    rules = engine.args.rules["llm_args"]
    found = _block_problems("options", dict(options), rules["top_level"])
    graphs = options.get("cuda_graph_config")
    if isinstance(graphs, dict):
        fields = {k: v for k, v in rules["cuda_graph_config"].items() if isinstance(v, dict)}
        found += _block_problems("cuda_graph_config", graphs, fields)
        sizes, top = graphs.get("batch_sizes"), graphs.get("max_batch_size")
        if isinstance(sizes, list) and sizes and top and top != max(sizes):
            found.append("cuda_graph_config.max_batch_size must equal max(batch_sizes)")
    if isinstance(options.get("kv_cache_config"), dict):
        found += _block_problems("kv_cache_config", options["kv_cache_config"],
                                 rules["kv_cache_config"])
    spec = options.get("speculative_config")
    if isinstance(spec, dict):
        found += _speculative_problems(engine, spec)
    return found


def _speculative_problems(engine: EngineAdapter, spec: Mapping[str, Any]) -> list[str]:
    rules = engine.args.rules
    llm_args = rules["llm_args"]
    kind = spec.get("decoding_type")
    algorithm = llm_args["algorithms"].get(kind)
    if algorithm is None:
        absent = " (absent from TensorRT-LLM's PyTorch backend)" \
            if kind in rules["absent_algorithms"] else ""
        return [f"decoding_type {kind!r}{absent} is not one of "
                f"{sorted(llm_args['algorithms'])}"]
    fields = {**llm_args["decoding_base"], **algorithm["fields"]}
    found = _block_problems("speculative_config", dict(spec), fields)
    k = spec.get("max_draft_len")
    if not isinstance(k, int) or k < algorithm["min_draft_len"]:
        found.append(f"max_draft_len must be > 0 for {kind}, got {k!r}")
        k = None
    models = [k for k in ("speculative_model", "speculative_model_dir") if spec.get(k)]
    if len(models) > 1:
        found.append("give speculative_model or speculative_model_dir, not both")
    if algorithm["requires_model"] and not models:
        found.append(f"{kind} needs speculative_model (the draft checkpoint)")
    schedule_rule = llm_args["schedule"]
    schedule = spec.get(schedule_rule["key"])
    cutoff = spec.get(schedule_rule["cutoff_key"])
    if schedule is not None and cutoff is not None:
        found.append("max_concurrency and draft_len_schedule are mutually exclusive")
    if (schedule is not None or cutoff is not None) and not algorithm["per_batch_size"]:
        found.append(f"{kind} has no dynamic draft length: a schedule or cut-off is ignored")
    if isinstance(schedule, dict) and schedule and k is not None:
        found += _schedule_problems(schedule, k, schedule_rule)
    return found


def _schedule_problems(schedule: Mapping[Any, Any], k_max: int, rule: Mapping[str, Any]
                       ) -> list[str]:
    """DecodingBaseConfig.validate_draft_len_schedule_and_sort's rules."""
    found = [f"draft_len_schedule: batch size threshold must be >= {rule['min_key']}, got {b}"
             for b in schedule if b < rule["min_key"]]
    found += [f"draft_len_schedule: draft length must be in {rule['min_value']}..{k_max} "
              f"(max_draft_len), got {v} at {b}" for b, v in schedule.items()
              if not rule["min_value"] <= v <= k_max]
    first = schedule[min(schedule)]
    if rule["first_equals_max_draft_len"] and first != k_max:
        found.append(f"draft_len_schedule[{min(schedule)}] = {first} must equal max_draft_len "
                     f"= {k_max} (the smallest batch-size key)")
    return found


# ------------------------------------------------------------------ commands


def _server_groups(ranges: list[BatchRange[int]], per_batch_size: bool
                   ) -> list[list[BatchRange[int]]]:
    """The ranges each server covers: all of them where one server's schedule can say what
    they run (the mode has a dynamic draft length and the first range runs the longest
    chain, which the schedule's smallest key must hold), else one server per range."""
    if per_batch_size and ranges[0].setting == max(r.setting for r in ranges):
        return [ranges]
    return [[r] for r in ranges]


def _speculative_config(engine: EngineAdapter, method: str, drafter: Drafter, setup: Setup,
                        group: list[BatchRange[int]]) -> dict[str, object]:
    """The speculative_config of one server covering `group` (its first range's chain is the
    longest): a fixed length, a cut-off above which speculation stops, or a schedule."""
    rules = engine.args.rules
    algorithm = rules["llm_args"]["algorithms"][method]
    k = group[0].setting
    config: dict[str, object] = {"decoding_type": method, "max_draft_len": k}
    if rules["mtp_layers_key"] in algorithm["fields"]:  # MTP: where releases read the length
        config[rules["mtp_layers_key"]] = k
    if drafter.checkpoint and (algorithm["requires_model"]
                               or drafter.checkpoint != target_id(setup)):
        config[rules["written_aliases"]["speculative_model"]] = drafter.checkpoint
    if len(group) == 1:
        return config
    speculating = [r for r in group if r.setting]
    if all(r.setting == k for r in speculating) and speculating == group[:len(speculating)]:
        config["max_concurrency"] = speculating[-1].last  # k up to here, then none
    else:
        config["draft_len_schedule"] = {r.last: r.setting for r in group}
    return config


def _file_name(drafter: Drafter | None, first: int, last: int, text: str) -> str:
    """The extra-options file of one server: drafter ("plain" without one), batch range and
    the first hex digits of the text's SHA-256 (two servers' files never share a name unless
    they are the same file), in lower-case characters a shell and a file system take as they
    are."""
    slug = "plain" if drafter is None else Path(drafter.slug).name.removesuffix(".yaml")
    stem = file_slug(slug)[:60].rstrip("-._")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    return f"trtllm-{stem}-batches-{first}-{last}-{digest}.yaml"


def _options(engine: EngineAdapter, setup: Setup, group: list[BatchRange[int]],
             speculative: dict[str, object] | None) -> dict[str, object]:
    """The extra-options YAML of one server, as a mapping."""
    rules = engine.args.rules["llm_args"]
    cap = group[-1].last
    options: dict[str, object] = {}
    if speculative is not None:
        options["speculative_config"] = speculative
    options["cuda_graph_config"] = {"enable_padding": True, "max_batch_size": cap}
    kv = engine.kv_cache_value(setup)
    if kv is not None:  # the cache as timed: TorchLlmArgs.kv_cache_config.dtype
        options["kv_cache_config"] = {"dtype": kv}
    step = max(r.last * (1 + r.setting) for r in group)
    if step > rules["top_level"]["max_num_tokens"]["default"]:
        options["max_num_tokens"] = step
    timing = setup.engine
    if speculative is not None and timing is not None and timing.base_slug == engine.slug \
            and not timing.spec_overlap:
        # what was timed: speculative rounds without the overlap (a plain server keeps it)
        options["disable_overlap_scheduler"] = True
    return options


def _serve(engine: EngineAdapter, setup: Setup, drafter: Drafter | None,
           group: list[BatchRange[int]], options: dict[str, object]) -> EngineCommand:
    """The `trtllm-serve` command of one server with its extra-options file."""
    args = engine.args
    rules = args.rules
    found = engine.problems(options, setup.target.architecture)
    if found:
        raise SpecError(f"internal: emitted TensorRT-LLM options break engines/trtllm.yaml: "
                        f"{found}")
    first, last = group[0].first, group[-1].last
    text = yaml.safe_dump(options, sort_keys=False, default_flow_style=False)
    name = _file_name(drafter, first, last, text)
    ep = [rules["ep_flag"], str(setup.ep)] if setup.ep > 1 else []
    argv = (*args.launch_argv(target_id(setup)), *tp_args(args.tp_flag, setup.tp), *ep,
            rules["extra_options_flag"], name)
    return EngineCommand(engine=engine.slug, version=args.version, argv=argv,
                         batches=tuple(b for r in group for b in r.batches),
                         batch_range=(first, last), files=((name, text),),
                         step_tokens=max(r.last * (1 + r.setting) for r in group))


def plain_command(engine: EngineAdapter, setup: Setup, batch: int) -> EngineCommand:
    """`trtllm-serve` without speculation, capped at `batch` requests, with CUDA graphs
    captured up to it (TensorRT-LLM's default stops at 128, unpadded)."""
    group = [BatchRange(first=1, last=batch, batches=(batch,), setting=0)]
    command = _serve(engine, setup, None, group, _options(engine, setup, group, None))
    return replace(command, argv=(*command.argv, *engine.cap_args(batch)))


def _command(engine: EngineAdapter, setup: Setup, drafter: Drafter, method: str,
             group: list[BatchRange[int]]) -> EngineCommand:
    """One `trtllm-serve` command for the ranges of `group`, with its extra-options file."""
    speculative = _speculative_config(engine, method, drafter, setup, group) \
        if group[0].setting else None
    return _serve(engine, setup, drafter, group, _options(engine, setup, group, speculative))


def commands(engine: EngineAdapter, rec: Recommendation, setup: Setup) -> list[EngineCommand]:
    """`trtllm-serve` commands that run the recommendation's chains, each with its
    extra-options YAML (`EngineCommand.files`), or one saying why there is none."""
    drafter = setup.drafter
    method = engine.method(drafter)
    algorithms = engine.args.rules["llm_args"]["algorithms"]
    if drafter is None or method is None or method not in algorithms:
        return [engine.unable(drafter)]
    if algorithms[method]["requires_model"] and not drafter.checkpoint:
        return [engine.refuse(f"{one_line(drafter.slug)} has no published checkpoint for "
                              f"TensorRT-LLM's speculative_model ({method}): "
                              f"{checkpoint_hint(drafter)}")]
    chains = [c for c in engine.rows(rec) or [] if c.fits]
    if not any(c.nodes for c in chains):
        return [engine.refuse("speculation does not pay at any batch size that fits")]
    ranges = batch_ranges([c.batch for c in chains], [c.nodes for c in chains])
    groups = _server_groups(ranges, bool(algorithms[method]["per_batch_size"]))
    return [_command(engine, setup, drafter, method, g) for g in groups]


def cells(engine: EngineAdapter, rec: Recommendation, drafter: Drafter | None) -> list[object]:
    """The recommend table's `trtllm_k`: the chain length TensorRT-LLM runs at each batch."""
    runs = engine.method(drafter) is not None
    rows: list[Choice] = engine.rows(rec) or []
    k = {c.batch: c.nodes for c in rows}
    return [k.get(c.batch, 0) if c.fits and runs else None for c in rec.best]


TRTLLM = register(EngineAdapter(
    slug="trtllm", name="TensorRT-LLM", builds="chains", batch_flag="--max_batch_size",
    per_batch_schedule=False, column="trtllm_k", table_cells=cells,
    find_problems=problems, build_commands=commands, refuses_unrunnable=True,
    build_plain=plain_command))

"""The engine adapter: everything one serving engine's command line knows, behind one record.

An adapter says which drafter families the engine runs and under which method name, what it
builds from a recommendation (one chain length per batch range, or SGLang-style EAGLE trees and
block chains), its cap on concurrent requests, the rules an emitted setting must keep (read from
the `speculative:` block of engines/<slug>.yaml) and the command that starts a server. The
engine's timing terms are not here: they live in `specsim.specs.engines`. `batch_ranges` groups
the batch sizes that share a setting, for an engine that fixes it when its server starts.

Adding an engine is one module with one module-level `EngineAdapter` passed to `register`, and
one YAML; nothing else names an engine.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_args

from specsim.errors import SpecError
from specsim.specs.drafters import FAMILIES
from specsim.specs.dtypes import SIXTEEN_BIT
from specsim.specs.engine_args import EngineArgs, engine_args
from specsim.specs.names import one_line

if TYPE_CHECKING:
    from specsim.specs.drafters import Drafter
    from specsim.speculation.speedup import Choice, Recommendation, Setup

# What an engine builds from a recommendation. "chains": one chain length per batch-size range
# (the recommendation's per-batch schedule of chains). "eagle_trees": the tree an EAGLE
# expansion realizes for (steps, topk, draft tokens), or a block chain for a block method.
Builds = Literal["chains", "eagle_trees"]

Setting = TypeVar("Setting")


def render_command(argv: Sequence[str]) -> str:
    """An argument vector as one line a POSIX shell runs as exactly that vector: every word
    that needs it is single-quoted (a `'` inside written as '"'"'), none is left to expand."""
    return shlex.join(argv)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineCommand:
    """A command that starts a server with the recommended setting, or why there is none.

    argv: the command, one argument per item (empty where there is none); `command` is it
    rendered for a shell. batches: the batch sizes the command is the best setting for (all,
    for vLLM's schedule). batch_range: (first, last), the concurrent requests the command
    serves: last is its batch cap, first one past the previous command's last (1 for the
    first); None where there is no command.
    """

    engine: str
    version: str
    argv: tuple[str, ...] = ()
    reason: str = ""
    batches: tuple[int, ...] = ()
    batch_range: tuple[int, int] | None = None
    # The most tokens a step of this command scores at its batch cap (the CUDA-graph size an
    # engine that counts graphs in tokens must capture); 0: one per request.
    step_tokens: int = 0
    # Files the command reads, as (file name, text): TensorRT-LLM's extra-options YAML, which
    # `recommend` prints beside the command and `plan` writes into its report folder.
    files: tuple[tuple[str, str], ...] = ()
    # (rank, nodes) of one node's command where a replica spans several nodes, each running
    # its own (`engines.parallel`); None: the command starts the whole replica.
    node: tuple[int, int] | None = None

    @property
    def node_label(self) -> str:
        """"node 1 of 2" (ranks counted from 0 in the flags, from 1 here), or ""."""
        return "" if self.node is None else f"node {self.node[0] + 1} of {self.node[1]}"

    @property
    def command(self) -> str | None:
        """The command as one line to paste into a POSIX shell, None where there is none."""
        return render_command(self.argv) if self.argv else None

    @property
    def batch_label(self) -> str:
        """The range as printed beside the command: "batches 1-8", "batch 64", or ""."""
        if self.batch_range is None:
            return ""
        first, last = self.batch_range
        return f"batch {first}" if first == last else f"batches {first}-{last}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchRange(Generic[Setting]):
    """Consecutive batch sizes that share one engine setting.

    first, last: the concurrent requests the range covers (first: one past the previous
    range's last, 1 for the first range; last: its largest sampled batch, the command's cap).
    batches: the sampled batch sizes in it, ascending. setting: what they share.
    """

    first: int
    last: int
    batches: tuple[int, ...]
    setting: Setting


def batch_ranges(batches: Sequence[int], settings: Sequence[Setting]
                 ) -> list[BatchRange[Setting]]:
    """Group consecutive batch sizes (sorted ascending; ties keep their order) whose settings
    are equal into ranges that together cover 1 .. the largest batch: a setting that returns
    after another is a new range, because a server with it capped above the other range would
    run it there too."""
    ranges: list[BatchRange[Setting]] = []
    for batch, setting in sorted(zip(batches, settings, strict=True), key=lambda p: p[0]):
        if ranges and ranges[-1].setting == setting:
            last = ranges[-1]
            ranges[-1] = BatchRange(first=last.first, last=batch,
                                    batches=(*last.batches, batch), setting=setting)
        else:
            first = ranges[-1].last + 1 if ranges else 1
            ranges.append(BatchRange(first=first, last=batch, batches=(batch,),
                                     setting=setting))
    return ranges


Commands = Callable[["EngineAdapter", "Recommendation", "Setup"], list["EngineCommand"]]
Problems = Callable[["EngineAdapter", Mapping[str, Any], str], list[str]]
Cells = Callable[["EngineAdapter", "Recommendation", "Drafter | None"], list[object]]


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineAdapter:
    """One serving engine's command vocabulary and rules.

    slug: the engine's name in engines/<slug>.yaml and in `EngineCommand.engine`; name: as
    printed ("vLLM"). builds: see `Builds`. batch_flag: the flag capping concurrent
    requests per replica. per_batch_schedule: one command covers every batch size (a schedule
    inside the setting) rather than one command per range of batch sizes with one setting.
    column: the recommend table's column for this engine, and table_cells: its value per row
    of `Recommendation.best`. graph_flags(batch, tokens_per_step): the flags that make the
    engine capture CUDA graphs up to that batch (empty where its default already does).
    find_problems(adapter, setting, target_architecture): every rule of engines/<slug>.yaml
    the setting breaks (empty: the engine starts with it). build_commands(adapter, rec,
    setup): the commands that run a recommendation, or one saying why there is none.
    spec_path: the YAML (None: the built-in engines/<slug>.yaml). Call the three through the
    methods `cells`, `problems` and `commands`.
    """

    slug: str
    name: str
    builds: Builds
    batch_flag: str
    per_batch_schedule: bool
    column: str
    table_cells: Cells
    find_problems: Problems
    build_commands: Commands
    graph_flags: Callable[[int, int], tuple[str, ...]] = lambda batch, tokens: ()
    spec_path: Path | None = None
    # Timing a drafter this engine has no method for is refused (one line, exit 2) rather than
    # answered with a reason beside the commands.
    refuses_unrunnable: bool = False
    # The plain-decoding command, where the engine's needs more than launch, TP and cap flags
    # (TensorRT-LLM's graph capture is set in an extra-options file); None: `plain_command`'s.
    build_plain: Callable[[EngineAdapter, Setup, int], EngineCommand] | None = None

    def __post_init__(self) -> None:
        if self.builds not in get_args(Builds):
            raise SpecError(f"engine adapter {self.slug}: builds {self.builds!r} is not one of "
                            f"{get_args(Builds)}")

    def problems(self, setting: Mapping[str, Any], target_architecture: str = "") -> list[str]:
        """Every rule of the engine's YAML that `setting` breaks (empty: it starts)."""
        return self.find_problems(self, setting, target_architecture)

    def commands(self, rec: Recommendation, setup: Setup) -> list[EngineCommand]:
        """The commands that run `rec` on this engine, or one saying why there is none."""
        problem = self.precision_problem(setup)
        if problem:
            return [self.refuse(problem)]
        return self.build_commands(self, rec, setup)

    def _rule(self, name: str) -> dict[str, Any]:
        """A block of the engine's `speculative:` rules ({} where the YAML has none)."""
        block = self.args.rules.get(name)
        return block if isinstance(block, dict) else {}

    @property
    def kv_cache_names(self) -> dict[str, str]:
        """specsim's KV dtypes the engine stores besides 16-bit, with the engine's name for
        each (engines/<slug>.yaml `speculative.kv_cache_dtype.values`; none without it)."""
        return dict(self._rule("kv_cache_dtype").get("values", {}))

    def kv_cache_value(self, setup: Setup) -> str | None:
        """The engine's name for the setup's KV-cache dtype (engines/<slug>.yaml
        `speculative.kv_cache_dtype.values`); None for a 16-bit cache, which the engine's
        default ('auto': the model's dtype) stores. A dtype the engine has no name for is
        `kv_cache_problem`'s."""
        kv = setup.precision.kv_dtype
        if kv in SIXTEEN_BIT:
            return None
        value = self.kv_cache_names.get(kv)
        return None if value is None else str(value)

    def kv_cache_problem(self, setup: Setup) -> str:
        """Why the engine cannot store the setup's KV cache as timed ("": it can)."""
        kv = setup.precision.kv_dtype
        if kv in SIXTEEN_BIT or self.kv_cache_value(setup) is not None:
            return ""
        names = list(self.kv_cache_names)
        return (f"stores no {kv} KV cache (besides the model's 16-bit dtype: "
                f"{', '.join(names) or 'none'}); give --kv-dtype "
                + " or ".join([*names[:1], "bf16"]))

    def kv_cache_args(self, setup: Setup) -> tuple[str, ...]:
        """The flag and value storing the setup's KV cache in its dtype (none for a 16-bit
        cache, or an engine that sets it in a file instead: `kv_cache_dtype.flag` null)."""
        value, flag = self.kv_cache_value(setup), self._rule("kv_cache_dtype").get("flag")
        return (flag, value) if value is not None and flag else ()

    def weight_value(self, setup: Setup) -> str | None:
        """The engine's method quantizing the 16-bit checkpoint to the setup's weight dtype
        when it loads it (engines/<slug>.yaml `speculative.weight_quantization`); None where
        the checkpoint is served as stored, or the engine cannot (`weight_problem`)."""
        served, own = setup.precision.weight_dtype, setup.target.weight_dtype
        if _as_stored(served, own) or own not in SIXTEEN_BIT:
            return None
        value = self.weight_names.get(served)
        return None if value is None else str(value)

    @property
    def weight_names(self) -> dict[str, str]:
        """specsim's weight dtypes the engine quantizes a 16-bit checkpoint to when it loads
        it, with the engine's method name for each (none without the block)."""
        return dict(self._rule("weight_quantization").get("values", {}))

    def weight_problem(self, setup: Setup) -> str:
        """Why the engine cannot serve the target's weights in the setup's dtype ("": it
        can: the checkpoint as stored, or quantized to it at load)."""
        served, own = setup.precision.weight_dtype, setup.target.weight_dtype
        if _as_stored(served, own) or self.weight_value(setup):
            return ""
        online = ", ".join(self.weight_names) if own in SIXTEEN_BIT else ""
        return (f"serves {target_id(setup)} as stored ({own} weights)"
                + (f" or quantized at load to {online}" if online else "")
                + f"; {served} weights need a checkpoint stored in {served} (a model spec "
                "whose hf_id is one, with its weight_dtype)")

    def precision_problem(self, setup: Setup) -> str:
        """Why the engine cannot start the setup's weights and KV cache as timed ("": it
        can)."""
        return self.weight_problem(setup) or self.kv_cache_problem(setup)

    def serve_argv(self, setup: Setup) -> tuple[str, ...]:
        """The launch command for the setup's target with its weights and KV cache as timed
        (no TP, no speculation, no cap)."""
        quant, flag = self.weight_value(setup), self._rule("weight_quantization").get("flag")
        return (*self.args.launch_argv(target_id(setup)),
                *((flag, quant) if quant is not None and flag else ()),
                *self.kv_cache_args(setup))

    def cells(self, rec: Recommendation, drafter: Drafter | None) -> list[object]:
        """The recommend table's column for this engine, one value per row of `rec.best`."""
        return self.table_cells(self, rec, drafter)

    @property
    def args(self) -> EngineArgs:
        """The `speculative:` block of the engine's YAML (version, launch, rules)."""
        return engine_args(self.slug, self.spec_path)

    @property
    def methods(self) -> Mapping[str, str]:
        """Drafter family -> the engine's method (vLLM's `--speculative-config` method,
        SGLang's `--speculative-algorithm`), as the YAML's `speculative.families` records it;
        a family not listed is one the engine cannot run."""
        args = self.args
        families = args.rules.get("families")
        if not isinstance(families, dict) or not all(
                isinstance(v, str) and v for v in families.values()):
            raise SpecError(f"{args.path}: field 'speculative.families' = {families!r}: needs "
                            "a mapping drafter family -> method name")
        unknown = sorted(set(families) - set(FAMILIES))
        if unknown:
            raise SpecError(f"{args.path}: field 'speculative.families' names {unknown}, not "
                            f"drafter families; known: {', '.join(FAMILIES)}")
        return families

    @property
    def version(self) -> str:
        return self.args.version

    @property
    def label(self) -> str:
        """Name and version as printed, e.g. "vLLM 0.33.0"."""
        return f"{self.name} {self.version}"

    def method(self, drafter: Drafter | None) -> str | None:
        """The engine's method for the drafter's family, None where the engine has none."""
        return self.methods.get(drafter.family) if drafter is not None else None

    def tree_method(self, drafter: Drafter | None) -> bool:
        """Whether the engine runs this drafter as EAGLE trees (not a block chain)."""
        method = self.method(drafter)
        return (self.builds == "eagle_trees" and method is not None
                and bool(self.args.rules["algorithms"][method]["tree"]))

    def block_only(self, drafter: Drafter | None) -> bool:
        """Whether the engine runs this drafter as a block chain (DFLASH, DSPARK): one block
        length per server, set at start-up, no tree."""
        return (self.builds == "eagle_trees" and self.method(drafter) is not None
                and not self.tree_method(drafter))

    def builds_setting(self, drafter: Drafter | None, choice: Choice, block: int) -> bool:
        """Whether the engine runs this setting (block: the most draft tokens the drafter's
        block holds). A block method runs any chain up to it: SGLang 0.5.23 takes the block
        length as a start-up flag and sizes the drafter to it (srt/models/dflash.py
        set_block_size; a length other than the checkpoint's only logs a warning)."""
        if choice.nodes == 0 or self.method(drafter) is None:
            return False
        if self.builds == "chains":
            return choice.shape == "chain"
        return not self.block_only(drafter) or (choice.shape == "chain"
                                                  and choice.nodes <= block)

    def rows(self, rec: Recommendation) -> list[Choice] | None:
        """The recommendation's rows this engine runs (None: none)."""
        if self.builds == "chains":
            return rec.schedule_chain or rec.best_chain
        return rec.engine_trees

    def cap_args(self, batch: int, step_tokens: int = 0) -> tuple[str, ...]:
        """The flags that let a server reach `batch` concurrent requests and no more: CUDA
        graphs captured up to it and to `step_tokens` tokens a step (`graph_flags`; 0: one
        per request), then the cap on concurrent requests (last, so that every command ends
        with it)."""
        return (*self.graph_flags(batch, step_tokens or batch), self.batch_flag, str(batch))

    def plain_command(self, setup: Setup, batch: int) -> EngineCommand:
        """The command that serves the setup's target without speculation at its TP degree,
        capped at `batch` concurrent requests."""
        problem = self.precision_problem(setup)
        if problem:
            return self.refuse(problem)
        if self.build_plain is not None:
            return self.build_plain(self, setup, batch)
        args = self.args
        argv = (*self.serve_argv(setup), *tp_args(args.tp_flag, setup.tp),
                *self.cap_args(batch))
        return EngineCommand(engine=self.slug, version=self.version, argv=argv,
                             batches=(batch,))

    def unable(self, drafter: Drafter | None) -> EngineCommand:
        """The answer where the engine has no method for the drafter's family."""
        family = drafter.family if drafter else "(no drafter)"
        return self.refuse(f"{self.label} cannot run the {family} family")

    def refuse(self, reason: str) -> EngineCommand:
        return EngineCommand(engine=self.slug, version=self.version, reason=reason)

    @property
    def vendors(self) -> tuple[str, ...]:
        """The GPU vendors the engine serves on (`speculative.vendors` of its YAML, read from
        the engine's source: vLLM and SGLang NVIDIA and AMD, TensorRT-LLM NVIDIA)."""
        args = self.args
        listed = args.rules.get("vendors")
        if not isinstance(listed, list) or not listed or not all(
                isinstance(v, str) and v for v in listed):
            raise SpecError(f"{args.path}: field 'speculative.vendors' = {listed!r}: needs a "
                            "list of the GPU vendors the engine serves on (NVIDIA, AMD)")
        return tuple(listed)

    def runs_on(self, vendor: str) -> bool:
        """Whether the engine serves on GPUs of `vendor` (a hardware profile's `vendor`)."""
        return vendor in self.vendors

    @property
    def vendors_text(self) -> str:
        """"runs on NVIDIA and AMD GPUs in specsim", for the lines that refuse another's."""
        return f"{self.label} runs on {' and '.join(self.vendors)} GPUs in specsim"

    @property
    def vendors_rule(self) -> str:
        """Where the vendors are recorded: "engines/<slug>.yaml: speculative.vendors"."""
        return f"{self.spec_path or f'engines/{self.slug}.yaml'}: speculative.vendors"

    def not_on(self, vendor: str) -> EngineCommand:
        """The answer on a GPU of a vendor the engine does not serve on."""
        return self.refuse(f"{self.vendors_text}, not {vendor}'s ({self.vendors_rule})")

    def check_runs(self, drafter: Drafter | None) -> None:
        """Refuse (SpecError) timing `drafter` on this engine where it has no method for the
        drafter's family and `refuses_unrunnable` is set; the YAML's `absent_algorithms` say
        which of its methods the engine lacks."""
        if not self.refuses_unrunnable or drafter is None or self.method(drafter) is not None:
            return
        absent = self.args.rules.get("absent_algorithms") or []
        raise SpecError(f"engine {self.slug}: {self.label} cannot run the {drafter.family} "
                        f"family of drafter {one_line(drafter.slug)} (it runs "
                        f"{', '.join(sorted(self.methods))}; absent: {', '.join(absent)}; "
                        f"{self.args.path})")


_REGISTRY: dict[str, EngineAdapter] = {}


def register(engine: EngineAdapter) -> EngineAdapter:
    """Add an adapter to the registry (the order of registration is the order printed)."""
    if engine.slug in _REGISTRY and _REGISTRY[engine.slug] is not engine:
        raise SpecError(f"engine adapter {engine.slug!r} is registered twice")
    _REGISTRY[engine.slug] = engine
    return engine


def unregister(slug: str) -> None:
    """Remove an adapter (for tests that register one of their own)."""
    _REGISTRY.pop(slug, None)


def adapters(vendor: str | None = None) -> tuple[EngineAdapter, ...]:
    """Every registered engine adapter, in registration order; with `vendor`, those that serve
    on that vendor's GPUs (`EngineAdapter.runs_on`)."""
    return tuple(a for a in _REGISTRY.values() if vendor is None or a.runs_on(vendor))


def adapter(slug: str) -> EngineAdapter:
    """The adapter of one engine by its slug."""
    if slug not in _REGISTRY:
        raise SpecError(f"engine '{slug}' has no command adapter; known: {', '.join(_REGISTRY)}")
    return _REGISTRY[slug]


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


def check_engine_runs(engine_slug: str, drafter: Drafter | None) -> None:
    """Refuse timing `drafter` on the engine `engine_slug` where that engine's adapter has no
    method for it and refuses to time one (`EngineAdapter.refuses_unrunnable`); engines
    without an adapter (the roofline, hf-eager) time any drafter."""
    if engine_slug in _REGISTRY:
        _REGISTRY[engine_slug].check_runs(drafter)


def check_engine_serves(engine_slug: str, vendor: str, gpu: str) -> None:
    """Refuse timing on the engine `engine_slug` a GPU (`gpu`, of `vendor`) it does not run on
    in specsim (`EngineAdapter.vendors`): its terms are that engine's on its own GPUs, and its
    commands would not start (engines without an adapter, the roofline and hf-eager, time any
    GPU)."""
    engine = _REGISTRY.get(engine_slug)
    if engine is not None and not engine.runs_on(vendor):
        others = " or ".join(a.slug for a in adapters(vendor))
        raise SpecError(f"engine {engine_slug}: {engine.vendors_text}, and {one_line(gpu)} "
                        f"is {one_line(vendor)}'s ({engine.vendors_rule}); "
                        + (f"on it: --engine {others}" if others else
                           "no engine runs on it: --engine roofline prices the GPU alone"))


def precision_cautions(setup: Setup) -> tuple[str, ...]:
    """What the engines that serve on the setup's GPU do with its cache that specsim does not
    price, one note per engine (engines/<slug>.yaml `speculative.kv_cache_dtype.mla_caution`,
    for a quantized cache of an MLA model); none otherwise."""
    if setup.target.mla is None or setup.precision.kv_dtype in SIXTEEN_BIT:
        return ()
    return tuple(f"{a.label}: {text}" for a in adapters(setup.hardware.vendor)
                 if (text := a._rule("kv_cache_dtype").get("mla_caution")))


def _as_stored(served: str, own: str) -> bool:
    """Whether weights served in `served` ("": the checkpoint's) are the checkpoint's `own`
    as stored (16-bit either way: the same bytes and time)."""
    return not served or served == own or {served, own} <= set(SIXTEEN_BIT)


def tp_args(flag: str, tp: int) -> list[str]:
    """The tensor-parallel flag and degree, nothing at TP 1."""
    return [flag, str(tp)] if tp > 1 else []


def runs_chains(drafter: Drafter | None) -> bool:
    """Whether an engine that builds chains runs this drafter."""
    return any(a.builds == "chains" and a.method(drafter) is not None for a in adapters())


def tree_engines(drafter: Drafter | None) -> list[EngineAdapter]:
    """The engines that run this drafter as EAGLE trees or a block chain."""
    return [a for a in adapters() if a.builds == "eagle_trees" and a.method(drafter) is not None]


def block_only(drafter: Drafter | None) -> bool:
    """Whether an engine runs this drafter as a block chain only (DFLASH, DSPARK)."""
    return any(a.block_only(drafter) for a in tree_engines(drafter))

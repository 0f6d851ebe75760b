"""Inference engines as data: the host and launch costs a server adds around the kernels.

An engine spec (engines/*.yaml) holds, each with a source or the rows it was fitted on:

    launch                 "eager" (each op issued from Python, no CUDA graphs) or "graphs"
                           (a pass replays a captured CUDA graph)
    op_host_s              host seconds per eager op (nn.Module call, Python, dispatcher, launch)
    kernels_per_layer      eager ops per decoder layer; kernels_per_pass: per model pass
    moe_extra_kernels_per_layer  extra eager ops of an MoE layer over a dense MLP
    drafter_ops            eager ops a drafter family adds, per family: `pass` per sequential
                           drafter pass beyond its own layers, `head` per Medusa-style head,
                           `round` per speculative round (tree building, acceptance, KV
                           bookkeeping), `loop` 1 where the family runs a research loop of
                           its own around the model (it then pays round_s; 0: inside
                           transformers' generate()); family `none` is drafting without a
                           model (prompt lookup)
    per_pass_s             host seconds per target forward pass (schedule, prepare, sample)
    per_request_s          host seconds per request per pass
    drafter_pass_s         host seconds per sequential drafter pass (graph engines)
    round_s                host seconds per speculative round (eager: per round of a research
                           loop, see drafter_ops `loop`)
    round_request_s        host seconds per request per speculative round that the engine does
                           not overlap with the GPU (accepting tokens, finish checks, output)
    bandwidth_efficiency   achieved fraction of datasheet bandwidth used for datasheet GPUs
    flops_efficiency       achieved fraction of datasheet peak flops for datasheet GPUs (the
                           compute-bound part of a kernel; default: bandwidth_efficiency)
    weight_dtype_efficiency  per weight dtype (fp8, int4, mxfp4): the rate its GEMMs stream
                           weights at few tokens, as a fraction of the bf16 GEMM rate
    moe_weight_dtype_efficiency  the same for the fused-MoE expert GEMMs, where they differ
                           (a dtype absent here takes weight_dtype_efficiency's value)
    moe_layer_s            seconds the fused-MoE kernels of one MoE layer take on top of
                           streaming the touched experts' weights (top-k, sorting tokens by
                           expert, activation, weighted sum, the GEMMs' fixed latency)
    moe_expert_floor_s     least seconds the fused-MoE kernel spends per touched expert and
                           MoE layer (both expert GEMMs), however few tokens the expert got
    spec_overlap           true where the engine does a speculative round's host work (round_s,
                           round_request_s) while the GPU runs the next round (SGLang's spec
                           v2 overlap scheduler): a round then takes the longer of the two.
                           `name:sync` / `name:overlap` load an engine with it off / on.

`roofline` is the engine with no terms: the idealized GPU of the article.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from specsim.errors import SpecError
from specsim.specs.io import Fields, check_keys, read_spec_file, resolve_path
from specsim.specs.names import read_display_name

LAUNCH_MODES = ("eager", "graphs", "none")
# Terms validate fits (leave one source out) per launch mode; the rest come from sources only.
FITTABLE = {"eager": ("op_host_s", "round_s"),
            "graphs": ("per_pass_s", "round_request_s", "round_s")}
# Physical range of each fitted term, seconds. op_host_s: a raw CUDA launch costs 4-6 us
# (lower end); plain HF decoding of Llama-7B on an A10G, 43.2 ms per token over ~1600 ops,
# bounds the cost of one HF op from above (27 us) even if the step were all host time.
# round_s: non-negative and below one 7B decoding step on an A100 (20 ms). per_pass_s:
# non-negative and below the smallest gap between a measured CUDA-graph decode step and its
# weight-reading time (tpot_points: 1.84 ms, SGLang docs H100).
# round_request_s: non-negative and below the host work a whole batch-1 EAGLE round of
# SGLang exposes (1.1 ms, SGLang PR #11398), which includes that of its one request.
FIT_BOUNDS = {"op_host_s": (4e-6, 27e-6), "round_s": (0.0, 0.02),
              "per_pass_s": (0.0, 1.84e-3),
              "round_request_s": (0.0, 1.1e-3)}
# A CUDA-graph engine's round_s (host work per synchronous round): at least what SGLang PR
# #11398's overlap hides of an EAGLE round of Llama-3.1-8B (12.11 ms without, 11.01 ms with: 1.1
# ms, a lower bound, as overlap can leave some exposed), at most that round's measured time
# less its kernel time at the transferred efficiency (12.11 - 6.47 = 5.64 ms: every other host
# term zero).
LAUNCH_FIT_BOUNDS = {"graphs": {"round_s": (1.1e-3, 5.64e-3)}}


def fit_bounds(launch: str, term: str) -> tuple[float, float]:
    """The physical range a fitted term is held to for engines of this launch mode."""
    return LAUNCH_FIT_BOUNDS.get(launch, {}).get(term, FIT_BOUNDS[term])


TERMS = ("op_host_s", "kernels_per_layer", "kernels_per_pass", "moe_extra_kernels_per_layer",
         "per_pass_s", "per_request_s", "drafter_pass_s", "round_s", "moe_layer_s",
         "moe_expert_floor_s", "round_request_s")
WEIGHT_DTYPES = ("fp8", "int4", "mxfp4")
OP_KINDS = ("pass", "head", "round", "loop")
# Every key an engine YAML may hold, per block; any other key is an error naming the closest
# one. A new field is one line here (and its reader). `speculative` is the block of accepted
# speculative settings, read whole by specsim.specs.engine_args.
ENGINE_KEYS = ("name", "version", "source", "launch", "bandwidth_efficiency", "flops_efficiency",
               "weight_dtype_efficiency", "moe_weight_dtype_efficiency", "drafter_ops", "fit",
               "spec_overlap", "speculative", *TERMS)
FIT_KEYS = ("rows", "source", *sorted({k for terms in FITTABLE.values() for k in terms}))
DRAFTER_OPS_KEYS = ("source", *OP_KINDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    """Engine terms, SI units (seconds; op counts); see the module docstring."""

    slug: str
    name: str
    version: str
    launch: str
    op_host_s: float = 0.0
    kernels_per_layer: float = 0.0
    kernels_per_pass: float = 0.0
    moe_extra_kernels_per_layer: float = 0.0
    drafter_ops: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    per_pass_s: float = 0.0
    per_request_s: float = 0.0
    drafter_pass_s: float = 0.0
    round_s: float = 0.0
    bandwidth_efficiency: float = 1.0
    flops_efficiency: float = 1.0
    weight_dtype_efficiency: dict[str, float] = dataclasses.field(default_factory=dict)
    moe_weight_dtype_efficiency: dict[str, float] = dataclasses.field(default_factory=dict)
    moe_layer_s: float = 0.0
    moe_expert_floor_s: float = 0.0
    round_request_s: float = 0.0
    spec_overlap: bool = False
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    fitted_on: tuple[str, ...] = ()
    fitted: tuple[str, ...] = ()  # terms its `fit` block holds
    path: str = ""

    def __post_init__(self) -> None:
        if self.launch not in LAUNCH_MODES:
            raise SpecError(f"{self.path}: field 'launch' must be one of "
                            f"{', '.join(LAUNCH_MODES)}; got {self.launch!r}")
        for name in TERMS:
            if getattr(self, name) < 0:
                raise SpecError(f"{self.path}: field '{name}' must be >= 0, "
                                f"got {getattr(self, name)!r}")
        for block in ("weight_dtype_efficiency", "moe_weight_dtype_efficiency"):
            for dtype, f in getattr(self, block).items():
                if not 0 < f <= 1:
                    raise SpecError(f"{self.path}: field '{block}.{dtype}' must be "
                                    f"in (0, 1], got {f!r}")
        for name in ("bandwidth_efficiency", "flops_efficiency"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise SpecError(f"{self.path}: field '{name}' must be in (0, 1], got {value!r}")

    @property
    def eager(self) -> bool:
        return self.launch == "eager"

    @property
    def fittable(self) -> tuple[str, ...]:
        """The terms validate refits for this engine (held out by source): those its YAML
        ships as fitted; sourced terms are never refitted."""
        return tuple(k for k in FITTABLE.get(self.launch, ()) if k in self.fitted)

    def ops(self, family: str, kind: str) -> float:
        """Eager ops of one `kind` ('pass', 'head', 'round') that drafter family adds."""
        return self.drafter_ops.get(family, {}).get(kind, 0.0)

    def with_terms(self, **terms: float) -> Engine:
        """The same engine with some terms replaced (a fit)."""
        return dataclasses.replace(self, **terms)  # type: ignore[arg-type]

    @property
    def base_slug(self) -> str:
        """The engine's file slug without a `:sync` / `:overlap` mode."""
        return self.slug.split(":")[0]

    def with_spec_overlap(self, on: bool) -> Engine:
        """The same engine with its speculative rounds' host work overlapped or not."""
        if on == self.spec_overlap:
            return self
        return dataclasses.replace(self, spec_overlap=on,
                                   slug=f"{self.base_slug}:{OVERLAP_MODES[on]}")


# `--engine NAME:MODE` suffixes: speculative rounds' host work synchronous or overlapped.
OVERLAP_MODES = {False: "sync", True: "overlap"}


ROOFLINE = Engine(slug="roofline", name="no engine (idealized GPU roofline)", version="-",
                  launch="none")


def engine_or_none(engine: Engine) -> Engine | None:
    """The engine a Setup carries: None for the roofline (no terms to add)."""
    return None if engine.launch == "none" else engine


def load_engine(name: str) -> Engine:
    """Load an engine by slug or path; `roofline` is the engine with no terms. A `:sync` or
    `:overlap` suffix sets whether its speculative rounds overlap their host work."""
    base, _, mode = name.rpartition(":")
    if base and mode in OVERLAP_MODES.values():
        engine = load_engine(base)
        if engine.launch == "none":
            raise SpecError(f"engine '{name}': the roofline has no host work to overlap")
        if engine.eager and mode == OVERLAP_MODES[True]:
            raise SpecError(f"engine '{name}': {base} issues every op of a round from Python, "
                            "so its rounds cannot overlap their host work; use "
                            f"'{base}' or '{base}:sync'")
        return engine.with_spec_overlap(mode == OVERLAP_MODES[True])
    if name == ROOFLINE.slug:
        return ROOFLINE
    path = resolve_path("engines", name)
    spec = read_spec_file(path)
    _check_engine_keys(spec.data, spec.path)
    f = Fields(spec.data, spec.path)
    numbers = {key: f.number(key, 0.0, minimum=0.0) for key in TERMS}
    fitted = _fitted_terms(f)
    numbers.update(fitted)
    fitted_on = tuple(str(r) for r in (spec.data.get("fit") or {}).get("rows", []) or [])
    bandwidth = f.number("bandwidth_efficiency", 1.0, positive=True)
    return Engine(slug=path.stem, name=read_display_name(f),
                  version=read_display_name(f, "version"),
                  launch=f.choice("launch", LAUNCH_MODES), drafter_ops=_drafter_ops(f),
                  bandwidth_efficiency=bandwidth,
                  flops_efficiency=f.number("flops_efficiency", bandwidth, positive=True),
                  weight_dtype_efficiency=_dtype_efficiency(f, "weight_dtype_efficiency"),
                  moe_weight_dtype_efficiency=_dtype_efficiency(f, "moe_weight_dtype_efficiency"),
                  spec_overlap=f.boolean("spec_overlap", False),
                  sources=spec.sources, fitted_on=fitted_on, fitted=tuple(fitted),
                  path=spec.path, **numbers)


def _check_engine_keys(data: dict[str, object], path: str) -> None:
    """Every key in ENGINE_KEYS, FIT_KEYS and DRAFTER_OPS_KEYS (one line naming the closest)."""
    check_keys(data, ENGINE_KEYS, path)
    fit = data.get("fit")
    if isinstance(fit, dict):
        check_keys(fit, FIT_KEYS, f"{path}: block 'fit'")
    for name in ("weight_dtype_efficiency", "moe_weight_dtype_efficiency"):
        dtypes = data.get(name)
        if isinstance(dtypes, dict):
            check_keys(dtypes, ("source", *WEIGHT_DTYPES), f"{path}: block '{name}'")
    ops = data.get("drafter_ops")
    if isinstance(ops, dict):
        for family, value in ops.items():
            if isinstance(value, dict):
                check_keys(value, DRAFTER_OPS_KEYS, f"{path}: block 'drafter_ops.{family}'")


def _drafter_ops(f: Fields) -> dict[str, dict[str, float]]:
    """The `drafter_ops` block: per family, eager ops per pass, per head and per round."""
    block = f.sub("drafter_ops", required=False)
    if block is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for family in block.keys():
        sub = block.sub(family)
        assert sub is not None
        out[family] = {k: sub.number(k, 0.0, minimum=0.0) for k in OP_KINDS}
    return out


def _dtype_efficiency(f: Fields, name: str) -> dict[str, float]:
    """A `weight_dtype_efficiency` block: per weight dtype, a fraction of the bf16 rate."""
    block = f.sub(name, required=False)
    if block is None:
        return {}
    return {d: block.number(d, positive=True) for d in WEIGHT_DTYPES if block.has(d)}


def _fitted_terms(f: Fields) -> dict[str, float]:
    """The `fit` block: terms fitted on published rows (validate refits them held out)."""
    fit = f.sub("fit", required=False)
    if fit is None:
        return {}
    keys = {k for terms in FITTABLE.values() for k in terms}
    return {key: fit.number(key, minimum=0.0) for key in sorted(keys) if fit.has(key)}

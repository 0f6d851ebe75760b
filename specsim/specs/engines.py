"""Inference engines as data: the host and launch costs a server adds around the kernels.

An engine spec (engines/*.yaml) keeps its sourced values and its fitted values apart:

    priors:   each term with its value and source (measured, counted or derived); used as it is
              unless `fitted:` holds the same term
    fitted:   the terms `specsim validate` fits on published rows (held out by source), each with
              the value used, its physical `range: [lo, hi]` and the reason (`range_source`), and
              `held_out` (its lowest and highest value refitted without each source); the block
              has the `rows` it was fitted on and `held_out_error_pct` (the engine's median
              absolute held-out error). A fitted value outside its range is refused.

The terms (under `priors:`, SI units):

    op_host_s              host seconds per eager op (nn.Module call, Python, dispatcher, launch)
    kernels_per_layer      eager ops (graphs: kernels) per decoder layer; kernels_per_pass: per
                           model pass beyond its layers (embedding, final norm, LM head, sampling)
    mlp_kernels_per_layer  kernels of a dense MLP (graphs: counted apart from kernels_per_layer,
                           as an MoE layer replaces them with its fused-MoE kernels)
    moe_extra_kernels_per_layer  extra eager ops (graphs: kernels) of an MoE layer over a dense
                           MLP (graphs: those outside the fused-MoE kernels moe_layer_s times)
    mla_extra_kernels_per_layer  extra kernels of an MLA attention block (absorbed decode) over
                           a GQA one; qk_norm_kernels_per_layer: of a model's q/k RMSNorms;
                           shared_expert_kernels_per_layer: of an MoE layer's shared experts
    mamba_kernels_per_layer  kernels of a Mamba-2 token mixer (in and out projections, the
                           convolution and state updates, the gated norm), in place of an
                           attention block's in a hybrid model's Mamba layers
    quant_kernels_per_gemm  kernels that quantize a dense GEMM's activations to the weights'
                           dtype (fp8 / int8 weights) before it, per such GEMM and layer, where
                           the engine does not fuse them into the preceding kernel
    kernel_s               GPU seconds each kernel of a CUDA-graph pass costs beyond its
                           roofline work (the graph's launch of the node, the kernel's ramp-up
                           and tail), so a pass's fixed time grows with its layers and kernels
    per_pass_s             host seconds per target forward pass (schedule, prepare, sample)
    per_request_s          host seconds per request per pass
    drafter_pass_s         host seconds per sequential drafter pass (graph engines)
    drafter_request_s      host seconds per request per sequential drafter pass (an engine
                           that plans each pass's attention over its requests on the host)
    round_s                host seconds per speculative round (eager: per round of a research
                           loop, see drafter_ops `loop`)
    round_request_s        host seconds per request per speculative round that the engine does
                           not overlap with the GPU (accepting tokens, finish checks, output)
    moe_layer_s            seconds the fused-MoE kernels of one MoE layer take on top of
                           streaming the touched experts' weights (top-k, sorting tokens by
                           expert, activation, weighted sum, the GEMMs' fixed latency)
    moe_expert_floor_s     least seconds the fused-MoE kernel spends per touched expert and
                           MoE layer (both expert GEMMs), however few tokens the expert got
    verify_attention_factor  time of a verification pass's attention over the same KV read
                           by a decoding step's attention kernel (>= 1): engines that run
                           several queries per request through a prefill-type kernel waste
                           most of its query tile; 1 where a decode kernel takes them

and at the top level (sourced, never fitted):

    launch                 "eager" (each op issued from Python, no CUDA graphs) or "graphs"
                           (a pass replays a captured CUDA graph)
    drafter_ops            eager ops a drafter family adds, per family: `pass` per sequential
                           drafter pass beyond its own layers, `head` per Medusa-style head,
                           `round` per speculative round (tree building, acceptance, KV
                           bookkeeping), `loop` 1 where the family runs a research loop of
                           its own around the model (it then pays round_s; 0: inside
                           transformers' generate()); family `none` is drafting without a
                           model (prompt lookup)
    weight_dtype_efficiency  per weight dtype (fp8, int4, mxfp4): the rate its GEMMs stream
                           weights at few tokens, as a fraction of the bf16 GEMM rate
    moe_weight_dtype_efficiency  the same for the fused-MoE expert GEMMs, where they differ
                           (a dtype absent here takes weight_dtype_efficiency's value)
    kv_quant_kernels_per_layer  kernels an attention layer adds over a quantized KV cache
                           (casting the query, K and V to the cache dtype where the engine
                           does not fuse it into its cache write and attention)
    kv_dtype_efficiency    per quantized KV-cache dtype (fp8) and head width (keys hd64,
                           hd128, ...): the rate its decode attention kernel streams the cache
                           at, as a fraction of the bf16 kernel's rate (a head width between
                           two listed ones takes the nearer; the widths below the first and
                           above the last, the first's and the last's)
    spec_overlap           true where the engine does a speculative round's host work (round_s,
                           round_request_s) while the GPU runs the next round (SGLang's spec
                           v2 overlap scheduler): a round then takes the longer of the two.
                           `name:sync` / `name:overlap` load an engine with it off / on.
    prefill_mixed          true where a prompt's prefill chunk rides in a decoding step (vLLM
                           V1's chunked prefill); false where the engine runs arriving prompts
                           as a prefill pass of their own before the next decoding step, which
                           waits (SGLang without --enable-mixed-chunk)
    spec_max_running       requests the engine runs at once with speculation when the launch
                           sets no cap (SGLang: 48, --max-running-requests); more clients wait
                           in its queue. Absent: speculation runs as many as plain decoding

Kernel efficiency is the GPU's (`specsim.specs.hardware.kernel_profile`), not the engine's.
`roofline` is the engine with no terms: the idealized GPU of the article.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from specsim.errors import SpecError
from specsim.specs.fields import Fields, check_keys, show
from specsim.specs.io import read_spec_file
from specsim.specs.names import read_display_name
from specsim.specs.paths import builtin_dir, builtin_names, probe, resolve_path

LAUNCH_MODES = ("eager", "graphs", "none")
# Terms validate may fit (leave one source out) per launch mode; an engine fits those its
# `fitted:` block holds, each within the range stated there.
FITTABLE = {"eager": ("op_host_s", "round_s"),
            "graphs": ("kernel_s", "per_pass_s", "per_request_s", "drafter_pass_s",
                       "round_request_s", "round_s", "verify_attention_factor")}
# Terms that scale a kernel time rather than add seconds: 1 is none, and a value below 1 is
# refused. Not in TERMS (whose default and floor are 0 s).
FACTORS = ("verify_attention_factor",)


# Bounds no engine term comes near (refused past them, naming the file and field): a second
# of host work per op, pass, request or round (the built-in engines' are 2 us to 5 ms), ten
# thousand kernels or eager ops per layer, pass or round (they count tens), and a verification
# attention 100 times a decoding kernel's (FlashInfer issue #3420 measured about 10x).
MAX_HOST_TERM_S = 1.0
MAX_OP_COUNT = 10_000.0
MAX_FACTOR = 100.0


def term_maximum(name: str) -> float:
    """The most a term may be: MAX_HOST_TERM_S for seconds (`*_s`), MAX_OP_COUNT for counts,
    MAX_FACTOR for a factor."""
    if name in FACTORS:
        return MAX_FACTOR
    return MAX_HOST_TERM_S if name.endswith("_s") else MAX_OP_COUNT


TERMS = ("op_host_s", "kernels_per_layer", "kernels_per_pass", "moe_extra_kernels_per_layer",
         "mlp_kernels_per_layer", "mla_extra_kernels_per_layer", "qk_norm_kernels_per_layer",
         "shared_expert_kernels_per_layer", "mamba_kernels_per_layer",
         "quant_kernels_per_gemm", "kv_quant_kernels_per_layer", "kernel_s", "per_pass_s",
         "per_request_s",
         "drafter_pass_s", "drafter_request_s", "round_s", "moe_layer_s", "moe_expert_floor_s",
         "round_request_s")
WEIGHT_DTYPES = ("fp8", "int4", "mxfp4")
KV_QUANT_DTYPES = ("fp8", "int8")  # KV dtypes a kv_dtype_efficiency block may name
MAX_HEAD_DIM = 1024  # widest head a kv_dtype_efficiency entry may name
OP_KINDS = ("pass", "head", "round", "loop")
# Every key an engine YAML may hold, per block; any other key is an error naming the closest
# one. A new field is one line here (and its reader). `speculative` is the block of accepted
# speculative settings, read whole by specsim.specs.engine_args.
ENGINE_KEYS = ("name", "version", "source", "engine", "launch", "priors",
               "weight_dtype_efficiency", "moe_weight_dtype_efficiency", "kv_dtype_efficiency",
               "drafter_ops", "fitted", "spec_overlap", "prefill_mixed", "spec_max_running",
               "speculative")
FITTED_KEYS = ("rows", "source", "held_out_error_pct",
               *sorted({k for terms in FITTABLE.values() for k in terms}))
FITTED_TERM_KEYS = ("value", "range", "range_source", "held_out")
DRAFTER_OPS_KEYS = ("source", *OP_KINDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedTerm:
    """One entry of an engine's `fitted:` block: the value used, seconds; the physical range
    it must stay in and why; its lowest and highest value refitted without each source."""

    value: float
    range: tuple[float, float]
    range_source: str
    held_out: tuple[float, float] | None = None

    def bound_status(self) -> str:
        """Where the value and its held-out refits sit in the range: 'inside its range', or
        which bound the value or a refit reaches (within 0.1% of the range): a fit pressed to
        a bound wants to leave it, a term the model lacks."""
        low, high = self.range
        tol = 1e-3 * (high - low)

        def at(x: float) -> str:
            return "lower" if x <= low + tol else "upper" if x >= high - tol else ""

        if at(self.value):
            return f"at its {at(self.value)} bound: the fit wants to leave its range"
        reached = sorted({at(x) for x in self.held_out or ()} - {""})
        if reached:
            return (f"inside its range; refitted without one source it reaches its "
                    f"{' and '.join(reached)} bound")
        return "inside its range"


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    """Engine terms, SI units (seconds; op counts); see the module docstring."""

    slug: str
    name: str
    version: str
    launch: str
    base: str = ""  # the built-in engine a calibrated profile measured ("": its own slug)
    op_host_s: float = 0.0
    kernels_per_layer: float = 0.0
    kernels_per_pass: float = 0.0
    moe_extra_kernels_per_layer: float = 0.0
    mlp_kernels_per_layer: float = 0.0
    mla_extra_kernels_per_layer: float = 0.0
    qk_norm_kernels_per_layer: float = 0.0
    shared_expert_kernels_per_layer: float = 0.0
    mamba_kernels_per_layer: float = 0.0
    quant_kernels_per_gemm: float = 0.0
    kv_quant_kernels_per_layer: float = 0.0
    kernel_s: float = 0.0
    drafter_ops: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    per_pass_s: float = 0.0
    per_request_s: float = 0.0
    drafter_pass_s: float = 0.0
    drafter_request_s: float = 0.0
    round_s: float = 0.0
    weight_dtype_efficiency: dict[str, float] = dataclasses.field(default_factory=dict)
    moe_weight_dtype_efficiency: dict[str, float] = dataclasses.field(default_factory=dict)
    # per KV dtype, (head width, fraction of the bf16 attention kernel's cache rate) ascending
    kv_dtype_efficiency: dict[str, tuple[tuple[float, float], ...]] = dataclasses.field(
        default_factory=dict)
    moe_layer_s: float = 0.0
    moe_expert_floor_s: float = 0.0
    round_request_s: float = 0.0
    verify_attention_factor: float = 1.0
    spec_overlap: bool = False
    prefill_mixed: bool = True
    spec_max_running: int | None = None  # running-request cap with speculation (None: none)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    fitted_on: tuple[str, ...] = ()
    fits: dict[str, FittedTerm] = dataclasses.field(default_factory=dict)  # `fitted:` block
    priors: dict[str, float] = dataclasses.field(default_factory=dict)  # `priors:` values
    held_out_error_pct: float | None = None
    path: str = ""

    def __post_init__(self) -> None:
        if self.launch not in LAUNCH_MODES:
            raise SpecError(f"{self.path}: field 'launch' must be one of "
                            f"{', '.join(LAUNCH_MODES)}; got {self.launch!r}")
        for name in TERMS:
            value = getattr(self, name)
            if value < 0:
                raise SpecError(f"{self.path}: field '{name}' must be >= 0, got {value!r}")
            if value > term_maximum(name):  # the loader names the block; a replace() not
                raise SpecError(f"{self.path}: field '{name}' must be <= "
                                f"{term_maximum(name):g}, got {value!r}")
        for name in FACTORS:
            if not 1.0 <= getattr(self, name) <= MAX_FACTOR:
                raise SpecError(f"{self.path}: field '{name}' must be in [1, {MAX_FACTOR:g}], "
                                f"got {getattr(self, name)!r}")
        for block in ("weight_dtype_efficiency", "moe_weight_dtype_efficiency"):
            for dtype, f in getattr(self, block).items():
                if not 0 < f <= 1:
                    raise SpecError(f"{self.path}: field '{block}.{dtype}' must be "
                                    f"in (0, 1], got {f!r}")
        for dtype, points in self.kv_dtype_efficiency.items():
            for width, f in points:
                if not 0 < f <= 1:
                    raise SpecError(f"{self.path}: field 'kv_dtype_efficiency.{dtype}."
                                    f"hd{width:g}' must be in (0, 1], got {f!r}")

    def kv_efficiency(self, kv_dtype: str, head_dim: float) -> float:
        """The rate this engine's attention kernel streams a `kv_dtype` cache of heads
        `head_dim` wide at, as a fraction of its bf16 kernel's (1.0: no entry): the entry of
        the nearest listed width (by ratio)."""
        points = self.kv_dtype_efficiency.get(kv_dtype)
        if not points:
            return 1.0
        width, f = min(points, key=lambda p: abs(math.log(p[0] / max(head_dim, 1e-9))))
        return f

    @property
    def eager(self) -> bool:
        return self.launch == "eager"

    @property
    def fitted(self) -> tuple[str, ...]:
        """The terms whose value comes from the `fitted:` block."""
        return tuple(self.fits)

    @property
    def fittable(self) -> tuple[str, ...]:
        """The terms validate refits for this engine (held out by source): those its YAML
        ships as fitted; sourced terms are never refitted."""
        return tuple(k for k in FITTABLE.get(self.launch, ()) if k in self.fits)

    def fit_range(self, term: str) -> tuple[float, float]:
        """The physical range (seconds) a fitted term is held to, as its YAML states it."""
        return self.fits[term].range

    def ops(self, family: str, kind: str) -> float:
        """Eager ops of one `kind` ('pass', 'head', 'round') that drafter family adds."""
        return self.drafter_ops.get(family, {}).get(kind, 0.0)

    def with_terms(self, **terms: float) -> Engine:
        """The same engine with some terms replaced (a fit)."""
        return dataclasses.replace(self, **terms)  # type: ignore[arg-type]

    @property
    def base_slug(self) -> str:
        """The serving engine this profile times: its YAML's `engine` (a profile calibrated on
        the user's GPU names the engine it measured), else its file slug without a `:sync` /
        `:overlap` mode."""
        return self.base or self.slug.split(":")[0]

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
        engine_name, _, other = base.rpartition(":")
        if other in OVERLAP_MODES.values():  # sglang:sync:overlap
            raise SpecError(f"engine '{name}': give one mode, {engine_name}:sync "
                            f"or {engine_name}:overlap")
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
    pf = f.sub("priors", required=False) or Fields({}, spec.path, "priors.")
    priors = {key: pf.number(key, 0.0, minimum=0.0, maximum=term_maximum(key)) for key in TERMS}
    priors |= {key: pf.number(key, 1.0, minimum=1.0, maximum=MAX_FACTOR) for key in FACTORS}
    launch = f.choice("launch", LAUNCH_MODES)
    fits = _fitted_terms(f, launch)
    numbers = {**priors, **{k: t.value for k, t in fits.items()}}
    held = f.sub("fitted", required=False)
    fitted_on = _fitted_rows(held)
    error = held.number("held_out_error_pct", minimum=0.0) \
        if held is not None and held.has("held_out_error_pct") else None
    base = f.string("engine") if f.has("engine") else ""
    if base and base not in builtin_names("engines"):
        raise f.error("engine", f"= {show(base)} is not a built-in engine "
                      f"({', '.join(builtin_names('engines'))})")
    _check_speculative_block(spec.data, path, base or path.stem)
    return Engine(slug=path.stem, name=read_display_name(f), base=base,
                  version=read_display_name(f, "version"),
                  launch=launch, drafter_ops=_drafter_ops(f),
                  weight_dtype_efficiency=_dtype_efficiency(f, "weight_dtype_efficiency"),
                  moe_weight_dtype_efficiency=_dtype_efficiency(f, "moe_weight_dtype_efficiency"),
                  kv_dtype_efficiency=_kv_efficiency(f),
                  spec_overlap=f.boolean("spec_overlap", False),
                  prefill_mixed=f.boolean("prefill_mixed", True),
                  spec_max_running=f.integer("spec_max_running", minimum=1)
                  if f.has("spec_max_running") else None,
                  sources={k.removeprefix("priors."): v for k, v in spec.sources.items()},
                  fitted_on=fitted_on, fits=fits, priors=priors, held_out_error_pct=error,
                  path=spec.path, **numbers)


def _check_speculative_block(data: dict[str, object], path: Path, base: str) -> None:
    """A user engine file's `speculative:` block: the commands, flags and rules a setting must
    keep are read from the built-in engines/<engine>.yaml only (the adapters of
    `specsim.engines`), never from a user file, so a block that differs from the built-in one
    would be silently ignored and is refused, naming its first differing field. A verbatim
    copy (what `bench fit` writes, or a built-in file copied to edit its terms) is accepted:
    nothing in it is ignored. `base`: the built-in engine the file names (`engine:`), else its
    file name's stem."""
    block = data.get("speculative")
    folder = builtin_dir("engines")
    if block is None or (probe(folder, "is_dir")
                         and path.resolve().parent == folder.resolve()):
        return
    builtins = {name: read_spec_file(folder / f"{name}.yaml").data.get("speculative")
                for name in builtin_names("engines")}
    if base in builtins and builtins[base] is not None:
        if block == builtins[base]:
            return
        field = _first_difference(block, builtins[base], "speculative")
        raise SpecError(f"{path}: field '{field}' differs from the built-in engines/{base}.yaml:"
                        f" a user engine file sets timing terms only; {base}'s commands, flags "
                        "and rules are read from the built-in file, so this block would be "
                        "ignored (remove it, or keep it as shipped)")
    if any(block == other for other in builtins.values() if other is not None):
        return
    named = ", ".join(name for name, other in builtins.items() if other is not None)
    raise SpecError(f"{path}: field 'speculative' is not read from a user engine file: the "
                    f"commands, flags and rules of {named} come from their built-in "
                    "engines/*.yaml, so this block would be ignored (remove it; set "
                    "'engine: <name>' to time one of those engines with this file's terms)")


def _first_difference(mine: object, theirs: object, where: str) -> str:
    """The dotted path of the first place two parsed YAML values differ (`where` if they
    differ as a whole: another type, length or scalar)."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in [*mine, *(k for k in theirs if k not in mine)]:
            if key not in mine or key not in theirs:
                return f"{where}.{key}"
            if mine[key] != theirs[key]:
                return _first_difference(mine[key], theirs[key], f"{where}.{key}")
    return where


def _check_engine_keys(data: dict[str, object], path: str) -> None:
    """Every key in ENGINE_KEYS, FIT_KEYS and DRAFTER_OPS_KEYS (one line naming the closest)."""
    for key in data:
        if key in TERMS or key in FACTORS:
            raise SpecError(f"{path}: field '{key}' belongs under 'priors:' (value and source) "
                            "or 'fitted:' (value, range, range_source)")
    check_keys(data, ENGINE_KEYS, path)
    priors = data.get("priors")
    if isinstance(priors, dict):
        check_keys(priors, (*TERMS, *FACTORS), f"{path}: block 'priors'")
    fitted = data.get("fitted")
    if isinstance(fitted, dict):
        check_keys(fitted, FITTED_KEYS, f"{path}: block 'fitted'")
        for term, entry in fitted.items():
            if (term in TERMS or term in FACTORS) and isinstance(entry, dict):
                check_keys(entry, FITTED_TERM_KEYS, f"{path}: block 'fitted.{term}'")
    for name in ("weight_dtype_efficiency", "moe_weight_dtype_efficiency"):
        dtypes = data.get(name)
        if isinstance(dtypes, dict):
            check_keys(dtypes, ("source", *WEIGHT_DTYPES), f"{path}: block '{name}'")
    kv = data.get("kv_dtype_efficiency")
    if isinstance(kv, dict):
        check_keys(kv, ("source", *KV_QUANT_DTYPES), f"{path}: block 'kv_dtype_efficiency'")
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
        out[family] = {k: sub.number(k, 0.0, minimum=0.0,
                                     maximum=1.0 if k == "loop" else MAX_OP_COUNT)
                       for k in OP_KINDS}
    return out


def _dtype_efficiency(f: Fields, name: str) -> dict[str, float]:
    """A `weight_dtype_efficiency` block: per weight dtype, a fraction of the bf16 rate."""
    block = f.sub(name, required=False)
    if block is None:
        return {}
    return {d: block.number(d, positive=True) for d in WEIGHT_DTYPES if block.has(d)}


def _kv_efficiency(f: Fields) -> dict[str, tuple[tuple[float, float], ...]]:
    """The `kv_dtype_efficiency` block: per quantized KV dtype, keys hd<N> (head width N)
    with a fraction of the bf16 attention kernel's cache rate each."""
    block = f.sub("kv_dtype_efficiency", required=False)
    if block is None:
        return {}
    out: dict[str, tuple[tuple[float, float], ...]] = {}
    for dtype in KV_QUANT_DTYPES:
        widths = block.sub(dtype, required=False)
        if widths is None:
            continue
        points = []
        for key in widths.keys():
            width = widths.numbered_key(key, "hd", 1, MAX_HEAD_DIM, "must be hd<N>, N the head "
                                        f"width (1 to {MAX_HEAD_DIM}, e.g. hd128)")
            points.append((float(width), widths.number(key, positive=True, maximum=1.0)))
        if not points:
            raise block.error(dtype, "must list at least one head width (e.g. hd128: 0.9)")
        out[dtype] = tuple(sorted(points))
    return out


def _fitted_terms(f: Fields, launch: str) -> dict[str, FittedTerm]:
    """The `fitted:` block: terms fitted on published rows (validate refits them held out),
    each refused unless its value lies in its stated range."""
    fit = f.sub("fitted", required=False)
    if fit is None:
        return {}
    out: dict[str, FittedTerm] = {}
    for key in FITTABLE.get(launch, ()):
        entry = fit.sub(key, required=False)
        if entry is None:
            continue
        value = entry.number("value", minimum=0.0, maximum=term_maximum(key))
        low, high = _range(entry)
        if not low <= value <= high:
            raise entry.error("value", f"= {value:g} is outside its range [{low:g}, {high:g}] "
                                       f"({entry.string('range_source')})")
        held = None if entry.value("held_out") is None else _range(entry, "held_out")
        if held is not None and not low <= held[0] <= held[1] <= high:
            raise entry.error("held_out", f"= [{held[0]:g}, {held[1]:g}] is outside its range "
                                          f"[{low:g}, {high:g}]: each refit stays in the range")
        out[key] = FittedTerm(value=value, range=(low, high),
                              range_source=entry.string("range_source"), held_out=held)
    for key in fit.keys():
        if (key in TERMS or key in FACTORS) and key not in out:
            raise fit.error(key, f"is not fitted for a '{launch}' engine (fittable: "
                                 f"{', '.join(FITTABLE.get(launch, ())) or 'none'})")
    return out


def _fitted_rows(fit: Fields | None) -> tuple[str, ...]:
    """`fitted.rows`: the ids of the published rows the terms were fitted on (a list of
    names; an integer was a TypeError, a mapping or a string was read key by key)."""
    rows = None if fit is None else fit.value("rows")
    if rows is None:
        return ()
    if not isinstance(rows, list) or not all(isinstance(r, str) and r.strip() for r in rows):
        assert fit is not None
        raise fit.error("rows", f"must list the ids of published rows, got {show(rows)}")
    return tuple(rows)


def _range(entry: Fields, key: str = "range") -> tuple[float, float]:
    """A `[lo, hi]` pair of non-negative numbers, lo <= hi."""
    value = entry.value(key)
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            or not 0 <= value[0] <= value[1]):
        raise entry.error(key, f"must be [lo, hi] with 0 <= lo <= hi, got {value!r}")
    return float(value[0]), float(value[1])

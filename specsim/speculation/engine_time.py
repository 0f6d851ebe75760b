"""Round time as an engine runs it: kernel time plus the engine's host and launch terms.

    pass_s   = max(kernel_s, ops x op_host_s) + kernels x kernel_s
               + per_pass_s + per_request_s B
    draft_s  = max(draft_kernel_s, passes x drafter_ops x op_host_s)
               + passes x (drafter kernels x kernel_s + drafter_pass_s
                           + drafter_request_s B)
    round_s  = verify pass_s + draft_s + round_ops x op_host_s + host
    host     = loop x round_s (engine) + round_request_s B

An engine with `spec_overlap` (SGLang's spec v2) does a round's host work while the GPU runs
the next round, so a round takes max(GPU part, host) instead of their sum.

The verification pass's kernel seconds come in with the engine's `verify_attention_factor`
already on its GQA / MHA attention (`speedup.speedup_table`; validate adds it from each row's
attention seconds when it fits the factor): a kernel-time term, not host work.

An eager engine issues every op from Python; the host runs ahead of the GPU, so a pass takes
the longer of the two. Its op counts are the target's layers x kernels_per_layer plus the
model's own ops, a drafter pass's layers x kernels_per_layer plus what its family adds per
pass (and per Medusa head), and a round the family's round ops (engines/hf-eager.yaml counts
them from each method's code). kernel_s is the achieved time of the kernels on the GPU's one
kernel model (`specs.hardware.kernel_profile`: a calibrated profile's fit, or the transferred
efficiency of a datasheet GPU).

A CUDA-graph engine has no host cost per op, but every kernel of a replayed graph still costs
the GPU a few microseconds beyond its roofline work (the node's launch, the ramp-up of its
first wave and the drain of its last): `kernel_s` per kernel, times the kernels a pass runs,
counted per layer from the engine's model code (a layer's attention block and norms, a dense
MLP's kernels, or an MoE layer's router and shared experts beside the fused-MoE kernels that
moe_layer_s times; what MLA attention and q/k norms add; the all-reduces of tensor parallelism are
collectives with their own measured latency in the roofline) plus those of the pass (embedding,
final norm, LM head, sampling). So the fixed time of a step grows with layers and MoE
experts, which one constant per pass, fitted on 32-layer models, cannot.

Four kernel terms an engine's kernels add on top of the roofline (`engine_kernel_s`):

    quantized GEMM  = max(roofline time, weight bytes / (bandwidth x dtype efficiency))
    quantized KV    = cache bytes / (bandwidth x KV dtype efficiency), memory-bound attention
    MoE layer       = touched experts' GEMM time + moe_layer_s
    MoE experts     = max(expert GEMM time, touched experts x layers x expert floor)

A weight-only or FP8 GEMM at few tokens streams its narrower weights at a lower rate than a
bf16 GEMM (activation quantization, scale epilogue, dequantization in the main loop). A
fused-MoE layer runs several small kernels around its two expert GEMMs (top-k, sorting the
tokens by expert, the activation, the weighted sum) and its GEMMs have a fixed latency: a time
per MoE layer however many experts are touched (published kernel benchmarks put it at 21-65 us
on A100 to B200, ~31 us on an H100; engines/sglang.yaml). A per-expert floor, where an engine
has one, holds each touched expert to a least time however few tokens it got.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.forward.cost import PassCost, pass_cost
from specsim.forward.ops import pass_work
from specsim.forward.shapes import FloatArray, PassShape, uniform_passes
from specsim.specs.drafters import Drafter
from specsim.specs.dtypes import Precision, is_quantized
from specsim.specs.engines import Engine
from specsim.specs.hardware import Hardware, kernel_profile
from specsim.specs.models import Model

NO_DRAFTER = "none"  # the drafter_ops family of drafting without a model (prompt lookup)


# Weight dtypes whose GEMMs take activations quantized to the same dtype (W8A8): the engine
# runs a quantization kernel before each unless it fuses it (quant_kernels_per_gemm). Weight-
# only formats (int4 Marlin, mxfp4) dequantize inside the GEMM.
ACTIVATION_QUANT_DTYPES = ("fp8", "int8")
# GEMMs an FP8 checkpoint keeps in the activation dtype (the router gate, the LM head) or
# whose quantization is inside the fused-MoE kernels moe_layer_s times (the experts).
UNQUANTIZED_GEMMS = ("router", "lm_head", "experts_up", "experts_down")


def quantized_gemms(model: Model, weight_dtype: str = "") -> float:
    """Dense weight-GEMM kernels of one pass of `model` whose activations are quantized first
    (fp8 / int8 weights; `weight_dtype` "" = the model's own): every such GEMM op's layers.
    A dense GEMM stores the served dtype or the model's (experts aside, which never count), so
    any other dtype has none without building the pass: this runs on every round time."""
    if (weight_dtype or model.weight_dtype) not in ACTIVATION_QUANT_DTYPES:
        return 0.0
    ops = pass_work(model, uniform_passes(np.array(1.0), np.array([1.0]), 1.0),
                    precision=Precision(weight_dtype=weight_dtype))
    return float(sum(op.layers for op in ops if op.op_class == "gemm"
                     and op.name not in UNQUANTIZED_GEMMS
                     and op.weight_dtype in ACTIVATION_QUANT_DTYPES))


# The two fused add+RMSNorm kernels a decoder layer's `kernels_per_layer` holds (before its
# attention and before its MLP); a hybrid block with one mixer and no MLP (Nemotron-H) runs one.
NORM_KERNELS = 2
# A low-rank query (Step-3) adds a norm and the up-projection GEMM after the replicated
# q/k/v projection (sglang-0.5.23 srt/models/step3_vl.py Step3TextAttention: inter_norm, wq).
LOW_RANK_QUERY_KERNELS = 2


def model_kernels(engine: Engine, model: Model, weight_dtype: str = "") -> float:
    """Eager ops (a CUDA-graph engine: kernels) one forward pass of `model` issues (with its
    weights in `weight_dtype`; "" = the model's own), counted per layer: its norms, its token
    mixer (an attention block: `kernels_per_layer` less its norms, plus MLA's and q/k norms';
    a Mamba-2 block: `mamba_kernels_per_layer`; an MLP-only block: none) and its channel mixer
    (a dense MLP, an MoE layer's router and shared experts beside the fused-MoE stack, or
    none), plus the pass's own."""
    quant = (engine.quant_kernels_per_gemm * quantized_gemms(model, weight_dtype)
             if engine.quant_kernels_per_gemm else 0.0)
    mixers = model.layer_types or ("full_attention",) * model.num_layers
    mlps = model.mlp_kinds
    attention = sum(k not in ("mamba", "mlp_only") for k in mixers)
    norms = sum(1 if k == "mlp_only" or m == "none" else NORM_KERNELS
                for k, m in zip(mixers, mlps, strict=True))
    moe = model.moe
    shared = model.num_moe_layers if moe is not None and moe.num_shared_experts else 0
    return (norms + attention * (engine.kernels_per_layer - NORM_KERNELS)
            + mixers.count("mamba") * engine.mamba_kernels_per_layer
            + mlps.count("dense") * engine.mlp_kernels_per_layer
            + model.num_moe_layers * engine.moe_extra_kernels_per_layer
            + shared * engine.shared_expert_kernels_per_layer
            + (attention if model.mla is not None else 0) * engine.mla_extra_kernels_per_layer
            + (attention if model.qk_norm else 0) * engine.qk_norm_kernels_per_layer
            + (attention if model.q_lora_rank else 0) * LOW_RANK_QUERY_KERNELS
            + engine.kernels_per_pass + quant)


def drafter_kernels(engine: Engine, drafter: Drafter | None) -> float:
    """Eager ops of one sequential drafter pass: its layers (a separate model's whole pass),
    its heads, and what its family adds per pass (LM head, top-k, tree updates)."""
    if drafter is None:
        return 0.0
    own = drafter.layers * (engine.kernels_per_layer + engine.mlp_kernels_per_layer)
    if drafter.model is not None:
        own += engine.kernels_per_pass
    return (own + drafter.medusa_heads * engine.ops(drafter.family, "head")
            + engine.ops(drafter.family, "pass"))


def round_kernels(engine: Engine, drafter: Drafter | None) -> float:
    """Eager ops per round outside the passes: tree building, acceptance, KV bookkeeping."""
    return engine.ops(NO_DRAFTER if drafter is None else drafter.family, "round")


def timing_hardware(engine: Engine | None, hw: Hardware) -> Hardware:
    """The profile an engine's kernel times are computed on: the GPU's one kernel model
    (`specs.hardware.kernel_profile`); with no engine, the idealized GPU as it is."""
    return hw if engine is None else kernel_profile(hw)


def kernel_pass_s(engine: Engine | None, hw: Hardware, target: Model, shape: PassShape, *,
                  tp: int = 1, precision: Precision | None = None, ep: int = 1,
                  engine_kernels: bool = True) -> FloatArray:
    """Kernel seconds of S passes of `target`, (S,): the pass cost on the timing profile
    (`timing_hardware`), with the engine's kernel terms (`engine_kernel_s`; left out with
    engine_kernels=False); the idealized roofline with no engine."""
    profile = timing_hardware(engine, hw)
    cost = pass_cost(target, profile, shape, tp=tp, precision=precision, ep=ep)
    if engine is None or not engine_kernels:
        return cost.time_s
    return engine_kernel_s(engine, profile, cost)


def plain_step_s(engine: Engine, hw: Hardware, target: Model, shape: PassShape,
                 requests: ArrayLike, *, tp: int = 1, precision: Precision | None = None,
                 ep: int = 1) -> FloatArray:
    """Seconds of S plain passes as the engine runs them, (S,): the kernel time
    (`kernel_pass_s`) plus the engine's launch and host terms per pass and per request (the
    step of `round_time`), for `requests` requests a pass. What `roofline` prints as engine_ms,
    the plan's T(n), and a prefill pass of its own (`speedup.prefill_pass_s`)."""
    gpu = kernel_pass_s(engine, hw, target, shape, tp=tp, precision=precision, ep=ep)
    weight_dtype = precision.weight_dtype if precision is not None else ""
    return np.asarray(round_time(engine, target, None, batch=requests, step_gpu_s=gpu,
                                 verify_gpu_s=gpu, draft_gpu_s=0.0, passes=0.0,
                                 weight_dtype=weight_dtype).step_s, dtype=np.float64)


def expected_kernel_s(hw: Hardware, target: Model, shape: PassShape, *, tp: int = 1,
                      precision: Precision | None = None, ep: int = 1) -> FloatArray:
    """Expected real kernel seconds of S passes on `hw`, (S,): the pass on the GPU's one kernel
    model (`specs.hardware.kernel_profile`), as every engine prices kernels before its own
    kernel terms."""
    cost = pass_cost(target, kernel_profile(hw), shape, tp=tp, precision=precision, ep=ep)
    return np.asarray(cost.time_s)


def pass_s(engine: Engine, kernel_s: ArrayLike, kernels: float, batch: ArrayLike
           ) -> FloatArray:
    """Seconds of one target pass of `kernels` eager ops taking `kernel_s` on the GPU."""
    return _pass_s(engine, np.asarray(kernel_s, dtype=np.float64), kernels, batch)


def _pass_s(engine: Engine, gpu: FloatArray, kernels: float | FloatArray, batch: ArrayLike
            ) -> FloatArray:
    """Seconds of one target pass whose kernels take `gpu` achieved seconds."""
    host = kernels * engine.op_host_s if engine.eager else 0.0
    b = np.asarray(batch, dtype=np.float64)
    return np.asarray(np.maximum(gpu, host) + kernels * graph_kernel_s(engine)
                      + engine.per_pass_s + engine.per_request_s * b)


def graph_kernel_s(engine: Engine) -> float:
    """GPU seconds per kernel of a replayed CUDA graph beyond its roofline work (0 for an eager
    engine, whose host-issued ops already pace the GPU: `op_host_s`)."""
    return 0.0 if engine.eager else engine.kernel_s


def _draft_s(engine: Engine, gpu: FloatArray, passes: ArrayLike,
             kernels_per_pass: float | FloatArray, batch: ArrayLike) -> FloatArray:
    """Seconds of `passes` sequential drafter passes over `batch` requests whose kernels take
    `gpu` achieved seconds."""
    p = np.asarray(passes, dtype=np.float64)
    host = p * kernels_per_pass * engine.op_host_s if engine.eager else 0.0
    fixed = p * (kernels_per_pass * graph_kernel_s(engine) + engine.drafter_pass_s
                 + engine.drafter_request_s * np.asarray(batch, dtype=np.float64))
    return np.asarray(np.where(p > 0, np.maximum(gpu, host) + fixed, gpu))


def round_host_s(engine: Engine, drafter: Drafter | None) -> float:
    """Host seconds per round outside the passes: counted ops plus the engine's round term."""
    return float(_round_host_s(engine, round_kernels(engine, drafter),
                               loop_share(engine, drafter)))


def _round_host_s(engine: Engine, round_ops: float | FloatArray, loop: float | FloatArray
                  ) -> float | FloatArray:
    """`round_host_s` of a round with these counted ops and share of the engine's round_s."""
    if not engine.eager:
        return engine.round_s
    return round_ops * engine.op_host_s + loop * engine.round_s


def round_request_s(engine: Engine, batch: ArrayLike) -> FloatArray:
    """Host seconds per round that grow with the batch: each request's accepted tokens are
    appended, checked for a finish and streamed, and a speculative round does this outside
    the GPU's time (plain decoding overlaps it with the next step)."""
    return np.asarray(engine.round_request_s * np.asarray(batch, dtype=np.float64))


def round_host_parts(engine: Engine, drafter: Drafter | None, batch: ArrayLike
                     ) -> tuple[FloatArray, FloatArray]:
    """(added to a round, overlapped with its GPU part) host seconds per round, per batch:
    the round's host work goes to one or the other by the engine's `spec_overlap`."""
    return _round_host_parts(engine, round_host_s(engine, drafter), batch)


def _round_host_parts(engine: Engine, round_host: float | FloatArray, batch: ArrayLike
                      ) -> tuple[FloatArray, FloatArray]:
    """`round_host_parts` of a round whose host seconds outside the passes are round_host."""
    host = np.asarray(round_host + round_request_s(engine, batch))
    zero = np.zeros_like(host)
    return (zero, host) if engine.spec_overlap else (host, zero)


def loop_share(engine: Engine, drafter: Drafter | None) -> float:
    """How much of the engine's round_s a round of this drafter pays (eager: its family's
    `loop` flag; CUDA-graph engines: all of it)."""
    if not engine.eager:
        return 1.0
    return engine.ops(NO_DRAFTER if drafter is None else drafter.family, "loop")


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundTime:
    """A speculative round as an engine runs it, seconds; every field broadcasts over the round
    shapes it was computed for (e.g. (B, 1) per batch, (B, K) per batch and candidate)."""

    step_s: FloatArray  # one plain decoding step of the same batch
    verify_s: FloatArray  # the target's verification pass
    draft_s: FloatArray  # the round's sequential drafter passes
    host_s: FloatArray  # host work added to the round (round_s, round ops, round_request_s B)
    hidden_s: FloatArray  # host work done while the GPU runs (an engine with spec_overlap)

    @property
    def round_s(self) -> FloatArray:
        """Seconds of the round: its GPU part plus the added host work, or the hidden host
        work where that is longer."""
        return np.asarray(np.maximum(self.verify_s + self.draft_s + self.host_s, self.hidden_s))


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCounts:
    """What the round-time formula counts of a target and drafter on an engine (none of it a
    term validate fits): floats for one setting, or arrays over many settings on one engine
    (validate times every row of a fit in one call, element by element the same numbers)."""

    target: float | FloatArray  # ops (kernels) of one target pass: `model_kernels`
    drafter: float | FloatArray  # of one sequential drafter pass: `drafter_kernels`
    round: float | FloatArray  # per round outside the passes: `round_kernels`
    loop: float | FloatArray  # share of the engine's round_s a round pays: `loop_share`


def op_counts(engine: Engine, target: Model, drafter: Drafter | None,
              weight_dtype: str = "") -> OpCounts:
    """The `OpCounts` of a target (weights in `weight_dtype`, "" its own) and drafter on an
    engine."""
    return OpCounts(target=model_kernels(engine, target, weight_dtype),
                    drafter=drafter_kernels(engine, drafter),
                    round=round_kernels(engine, drafter), loop=loop_share(engine, drafter))


def round_time(engine: Engine, target: Model, drafter: Drafter | None, *, batch: ArrayLike,
               step_gpu_s: ArrayLike, verify_gpu_s: ArrayLike, draft_gpu_s: ArrayLike,
               passes: ArrayLike, weight_dtype: str = "") -> RoundTime:
    """The one round-time formula (module docstring): the engine's host and launch terms
    around a round's kernel seconds (on the GPU's kernel model: `timing_hardware`).

    batch: requests per round; step_gpu_s, verify_gpu_s, draft_gpu_s: achieved seconds of a
    plain decoding step's kernels, of the verification pass's and of all the round's drafter
    passes'; passes: sequential drafter passes per round (0: no drafting). All broadcast.
    weight_dtype: the target's weights as served ("" = its own), for the kernels that
    quantize activations before its W8A8 GEMMs.
    """
    return counted_round_time(engine, op_counts(engine, target, drafter, weight_dtype),
                              batch=batch,
                              step_gpu_s=step_gpu_s, verify_gpu_s=verify_gpu_s,
                              draft_gpu_s=draft_gpu_s, passes=passes)


def counted_round_time(engine: Engine, counts: OpCounts, *, batch: ArrayLike,
                       step_gpu_s: ArrayLike, verify_gpu_s: ArrayLike, draft_gpu_s: ArrayLike,
                       passes: ArrayLike) -> RoundTime:
    """`round_time` with the target's and drafter's op counts given (`op_counts`), which may
    be arrays that broadcast with the other arguments: many settings on one engine at once."""
    b = np.asarray(batch, dtype=np.float64)
    added, hidden = _round_host_parts(engine, _round_host_s(engine, counts.round, counts.loop),
                                      b)
    return RoundTime(
        step_s=_pass_s(engine, np.asarray(step_gpu_s, dtype=np.float64), counts.target, b),
        verify_s=_pass_s(engine, np.asarray(verify_gpu_s, dtype=np.float64), counts.target, b),
        draft_s=_draft_s(engine, np.asarray(draft_gpu_s, dtype=np.float64), passes,
                         counts.drafter, b),
        host_s=added, hidden_s=hidden)


EXPERT_OPS = ("experts_up", "experts_down")


def quantized_extra_s(engine: Engine, hw: Hardware, cost: PassCost) -> FloatArray:
    """Kernel seconds a pass's quantized weight GEMMs take beyond the roofline: each
    streams its weights at the engine's dtype efficiency times the bf16 GEMM rate (the expert
    GEMMs at the fused-MoE kernel's, where the engine has one for the dtype), (S,)."""
    extra = np.zeros(cost.tokens.shape)
    if not (engine.weight_dtype_efficiency or engine.moe_weight_dtype_efficiency):
        return extra
    rate = hw.hbm_bandwidth_bytes_per_s * hw.efficiency.gemm.bandwidth
    for c in cost.ops:
        dtype = c.op.weight_dtype
        f = engine.weight_dtype_efficiency.get(dtype, 1.0)
        if c.op.name in EXPERT_OPS:
            f = engine.moe_weight_dtype_efficiency.get(dtype, f)
        if c.op.op_class == "gemm" and f < 1.0:
            stream_s = c.op.weight_bytes / (rate * f)
            extra = extra + c.op.layers * np.maximum(stream_s - c.time_s, 0.0)
    return extra


def quantized_kv_extra_s(engine: Engine, cost: PassCost) -> FloatArray:
    """Kernel seconds a pass's attention over a quantized KV cache takes beyond the roofline,
    (S,): the engine's kernel streams the cache at `Engine.kv_efficiency` of its bf16 kernel's
    rate (dequantization, the query's quantization, FP8 tiles), so each memory-bound attention
    op's cache read takes 1 / f of the time the roofline gives its bytes. Compute-bound
    passes (prefill) keep the roofline. An engine that casts the query, K and V in kernels of
    their own adds `kv_quant_kernels_per_layer` kernels per attention layer (kernel_s each)."""
    extra = np.zeros(cost.tokens.shape)
    if not (engine.kv_dtype_efficiency or engine.kv_quant_kernels_per_layer):
        return extra
    for c in cost.ops:
        kernel = c.op.kernel
        if kernel is None or not is_quantized(kernel.kv_dtype):
            continue
        # the casts an unfused engine runs per attention layer, each a graph kernel
        extra = extra + c.op.layers * engine.kv_quant_kernels_per_layer * engine.kernel_s
        f = engine.kv_efficiency(kernel.kv_dtype, kernel.head_dim)
        if f < 1.0:
            read_s = c.op.kv_read_bytes / c.bandwidth_bytes_per_s
            extra = extra + c.op.layers * np.where(c.compute_bound, 0.0, read_s * (1.0 / f - 1.0))
    return extra


def expert_parts(engine: Engine, hw: Hardware, cost: PassCost) -> tuple[FloatArray, FloatArray]:
    """(touched experts x MoE layers, kernel seconds of the expert GEMMs with their
    quantized-weight term) of a pass, (S,) each; zeros for a dense model."""
    zero = np.zeros(cost.tokens.shape)
    ops = [c for c in cost.ops if c.op.name in EXPERT_OPS]
    if not ops:
        return zero, zero
    up = ops[0]
    units = (up.op.gemm_count if up.op.gemm_count is not None else zero + 1.0) * up.op.layers
    kernel = zero + sum(c.total_time_s for c in ops)
    quant = quantized_extra_s(engine, hw, PassCost(ops=tuple(ops), tokens=cost.tokens,
                                                   overhead_s=0.0))
    return np.asarray(units, dtype=np.float64), kernel + quant


def moe_layers_run(cost: PassCost) -> FloatArray:
    """MoE layers whose fused-MoE kernels a pass runs, (S,): all of the model's where the pass
    has tokens, none in an empty pass or a dense model."""
    ops = [c for c in cost.ops if c.op.name in EXPERT_OPS]
    if not ops:
        return np.zeros(cost.tokens.shape)
    return np.where(cost.tokens > 0, float(ops[0].op.layers), 0.0)


def engine_kernel_s(engine: Engine, hw: Hardware, cost: PassCost) -> FloatArray:
    """Kernel seconds of a pass as the engine's kernels run it, on `hw` (the timing profile
    `cost` was computed on): the kernel model plus the quantized-GEMM term, the fused-MoE
    stack's fixed time per MoE layer, and the expert GEMMs held to the per-expert floor, (S,).
    The collectives in `cost` are the engines' measured link times."""
    kernel = cost.time_s + quantized_extra_s(engine, hw, cost) + quantized_kv_extra_s(engine, cost)
    if engine.moe_layer_s > 0.0:
        kernel = kernel + moe_layers_run(cost) * engine.moe_layer_s
    if engine.moe_expert_floor_s > 0.0:
        units, experts = expert_parts(engine, hw, cost)
        floor = units * engine.moe_expert_floor_s
        kernel = kernel + np.maximum(floor - experts, 0.0)
    return np.asarray(kernel)

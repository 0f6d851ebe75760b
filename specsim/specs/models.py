"""Target model specs (architecture numbers from each model's config.json) and parameter counts.

A model is a stack of decoder layers. Each layer has a token mixer (`layer_types`: full
attention, sliding-window attention, linear attention, a Mamba-2 state-space mixer, or none)
and a channel mixer (`mlp_types`: a dense MLP, a mixture of experts, or none). A transformer
layer has both; a Nemotron-H block has one of the two. The spec holds what the roofline and
the memory calculator need, nothing more.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from specsim.errors import SpecError, check_int, parameter_error
from specsim.specs.defaults import MAX_TP
from specsim.specs.dtypes import BYTES_PER_PARAM
from specsim.specs.fields import MAX_LAYERS, Fields
from specsim.specs.io import SpecFile, read_spec_file
from specsim.specs.names import read_display_name, read_hub_id
from specsim.specs.paths import resolve_path

LAYER_KINDS = ("full_attention", "sliding_attention", "linear_attention", "mamba", "mlp_only")
ATTENTION_KINDS = ("full_attention", "sliding_attention")
MLP_KINDS = ("dense", "moe", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class MoE:
    """Mixture-of-experts MLP: E routed experts, k active per token, optional shared experts."""

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    # Layers with a dense MLP instead of experts (DeepSeek-V3: the first 3; Llama 4 Maverick:
    # every other one). Costs add up per layer, so only the count matters, not where they are;
    # a model with explicit `mlp_types` says it per layer instead (then 0 here).
    dense_layers: int = 0
    expert_bias: bool = False  # per-expert biases (gpt-oss)
    weight_dtype: str = ""  # experts stored in another dtype than the rest ("" = same)
    # Latent MoE (Nemotron 3 Super/Ultra): the routed experts work in a `latent_size`-wide space,
    # entered and left through two projections (fc1/fc2_latent_proj); 0 = the hidden size.
    latent_size: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.experts_per_token <= self.num_experts:
            raise SpecError(
                f"field 'moe.experts_per_token' must be in 1..{self.num_experts}, "
                f"got {self.experts_per_token}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds a compressed latent."""

    q_lora_rank: int  # 0 = plain query projection
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def cache_elems_per_token(self) -> int:
        """Elements cached per token per layer: the latent plus the decoupled rope key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearAttention:
    """Gated-delta-net style linear attention: a fixed-size state per request per layer."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel_size: int

    @property
    def state_elems(self) -> int:
        """Recurrent state per request per layer: one key_dim x value_dim matrix per value head."""
        return self.num_value_heads * self.key_head_dim * self.value_head_dim

    @property
    def conv_state_elems(self) -> int:
        """Short-convolution state per request per layer (last kernel-1 inputs of q, k, v)."""
        channels = 2 * self.num_key_heads * self.key_head_dim \
            + self.num_value_heads * self.value_head_dim
        return channels * (self.conv_kernel_size - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mamba:
    """Mamba-2 mixer (Dao & Gu 2024, "Transformers are SSMs"; Nemotron-H): `num_heads` heads of
    `head_dim` channels, each with a `state_size`-wide state; B and C shared by `n_groups`
    groups of heads; a depthwise causal convolution of `conv_kernel_size` taps over x, B, C."""

    num_heads: int
    head_dim: int
    state_size: int
    n_groups: int
    conv_kernel_size: int

    def __post_init__(self) -> None:
        if self.num_heads % self.n_groups:
            raise SpecError(f"field 'mamba.n_groups' = {self.n_groups} does not divide "
                            f"'mamba.num_heads' = {self.num_heads}")

    @property
    def intermediate_size(self) -> int:
        """Channels of x (and of the gate z and the output y): heads x head_dim."""
        return self.num_heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        """Channels the convolution runs over: x plus the groups' B and C."""
        return self.intermediate_size + 2 * self.n_groups * self.state_size

    @property
    def state_elems(self) -> int:
        """SSM state per request per layer: a head_dim x state_size matrix per head."""
        return self.num_heads * self.head_dim * self.state_size

    @property
    def conv_state_elems(self) -> int:
        """Convolution state per request per layer: the last kernel-1 inputs of x, B, C."""
        return self.conv_dim * (self.conv_kernel_size - 1)


# DeepSeek-V3.2's lightning indexer caches its keys in FP8 with one FP32 scale per block of
# 128 elements (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py: Indexer.k_cache float8_e4m3fn
# of index_head_dim, k_scale_cache float32 of index_head_dim // block_size, block_size = 128;
# vLLM's DeepSeek-V3.2 indexer cache stores the same 128 + 4 bytes per token).
INDEX_KEY_BYTES_PER_ELEM = 1.0
INDEX_SCALE_BLOCK = 128
INDEX_SCALE_BYTES = 4.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SparseAttention:
    """DeepSeek Sparse Attention (DeepSeek-V3.2): a lightning indexer of `index_n_heads` heads
    of `index_head_dim` scores every cached token for each query; the MLA attention then reads
    only the `index_topk` best-scoring tokens of the latent cache."""

    index_n_heads: int
    index_head_dim: int
    index_topk: int
    # Layers with an indexer of their own (0: every attention layer). GLM-5.2's `indexer_types`
    # marks the others 'shared': they reuse the top-k of the layer before, with no indexer
    # weights, keys or scoring of their own.
    indexer_layers: int = 0

    @property
    def index_key_bytes_per_token(self) -> float:
        """Bytes of the indexer's own key cache per token per layer (FP8 + block scales)."""
        blocks = -(-self.index_head_dim // INDEX_SCALE_BLOCK)
        return self.index_head_dim * INDEX_KEY_BYTES_PER_ELEM + blocks * INDEX_SCALE_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """A decoder-only target model; numbers as in its config.json."""

    slug: str
    name: str
    architecture: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    gated_mlp: bool = True
    qkv_bias: bool = False
    attention_output_bias: bool = False
    qk_norm: bool = False
    attention_output_gate: bool = False
    attention_sinks: bool = False
    layer_types: tuple[str, ...] = ()
    sliding_window: int = 0
    v_head_dim: int = 0  # width of a value head; 0 = head_dim (MiMo-V2-Flash: 128 of 192)
    sliding_num_kv_heads: int = 0  # KV heads of sliding layers; 0 = num_kv_heads (MiMo: 8 of 4)
    # low-rank query of softmax attention (Step-3's share_q_dim): hidden -> q_lora_rank, a norm,
    # then up to the heads; 0 = one full-rank query projection (MLA keeps its own in `mla`)
    q_lora_rank: int = 0
    moe: MoE | None = None
    mla: MLA | None = None
    linear_attention: LinearAttention | None = None
    mamba: Mamba | None = None
    dsa: SparseAttention | None = None
    mlp_types: tuple[str, ...] = ()  # per layer; () = dense, or MoE after moe.dense_layers
    mtp_layers: int = 0
    weight_dtype: str = "bf16"
    advertised_params: float = 0.0
    advertised_active_params: float = 0.0
    sources: dict[str, str] = field(default_factory=dict)
    path: str = ""
    hf_id: str = ""  # Hugging Face repository id ("" if unknown)

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_kv_heads:
            raise SpecError(
                f"field 'num_attention_heads' = {self.num_attention_heads} is not divisible by "
                f"'num_kv_heads' = {self.num_kv_heads}")
        if len(self.layer_types) != self.num_layers:
            raise SpecError(f"field 'layer_types' has {len(self.layer_types)} entries, "
                            f"'num_layers' is {self.num_layers}")
        if self.num_attention_heads % self.kv_heads_of("sliding_attention"):
            raise SpecError(f"field 'sliding_num_kv_heads' = {self.sliding_num_kv_heads} does "
                            f"not divide 'num_attention_heads' = {self.num_attention_heads}")
        if self.num_kv_heads > self.num_attention_heads:
            raise SpecError(f"field 'num_kv_heads' = {self.num_kv_heads} exceeds "
                            f"'num_attention_heads' = {self.num_attention_heads}")
        if self.moe and self.moe.dense_layers > self.num_layers:
            raise SpecError(f"field 'moe.dense_layers' = {self.moe.dense_layers} exceeds "
                            f"'num_layers' = {self.num_layers}")
        bad = sorted(set(self.layer_types) - set(LAYER_KINDS))
        if bad:
            raise SpecError(f"field 'layer_types' has unknown kind {bad[0]!r}; "
                            f"known: {', '.join(LAYER_KINDS)}")
        if "sliding_attention" in self.layer_types and self.sliding_window <= 0:
            raise SpecError("field 'sliding_window' must be > 0 when sliding layers exist")
        if "linear_attention" in self.layer_types and self.linear_attention is None:
            raise SpecError("field 'linear_attention' is missing but layer_types has linear layers")
        if "mamba" in self.layer_types and self.mamba is None:
            raise SpecError("field 'mamba' is missing but layer_types has mamba layers")
        if self.q_lora_rank and self.mla is not None:
            raise SpecError("field 'q_lora_rank' is for softmax attention; MLA gives its own "
                            "in 'mla.q_lora_rank'")
        if self.dsa is not None and self.mla is None:
            raise SpecError("field 'dsa' (sparse attention) needs the 'mla' block it selects for")
        if self.dsa is not None and self.dsa.indexer_layers > self.num_attention_layers:
            raise SpecError(f"field 'dsa.indexer_layers' = {self.dsa.indexer_layers} exceeds the "
                            f"{self.num_attention_layers} attention layers")
        self._check_mlp_types()
        for dtype in (self.weight_dtype, self.moe.weight_dtype if self.moe else ""):
            if dtype and dtype not in BYTES_PER_PARAM:
                raise SpecError(f"field 'weight_dtype' = {dtype!r} is not one of "
                                f"{', '.join(BYTES_PER_PARAM)}")

    def _check_mlp_types(self) -> None:
        if not self.mlp_types:
            return
        if len(self.mlp_types) != self.num_layers:
            raise SpecError(f"field 'mlp_types' has {len(self.mlp_types)} entries, "
                            f"'num_layers' is {self.num_layers}")
        bad = sorted(set(self.mlp_types) - set(MLP_KINDS))
        if bad:
            raise SpecError(f"field 'mlp_types' has unknown kind {bad[0]!r}; "
                            f"known: {', '.join(MLP_KINDS)}")
        if "moe" in self.mlp_types and self.moe is None:
            raise SpecError("field 'moe' is missing but mlp_types has moe layers")
        if self.moe is not None and self.moe.dense_layers:
            raise SpecError("give dense layers once: 'mlp_types' per layer or "
                            "'moe.dense_layers', not both")
        empty = next((i for i, (mixer, mlp) in enumerate(zip(self.layer_types, self.mlp_types,
                                                              strict=True))
                      if mixer == "mlp_only" and mlp == "none"), None)
        if empty is not None:
            raise SpecError(f"layer {empty} is 'mlp_only' in 'layer_types' and 'none' in "
                            "'mlp_types': it has neither a mixer nor an MLP")

    @property
    def layer_counts(self) -> Counter[str]:
        return Counter(self.layer_types)

    @property
    def mlp_kinds(self) -> tuple[str, ...]:
        """Each layer's channel mixer: `mlp_types` as given, else dense for the first
        moe.dense_layers and experts after them (dense throughout without a moe block)."""
        if self.mlp_types:
            return self.mlp_types
        dense = self.moe.dense_layers if self.moe else self.num_layers
        return ("dense",) * dense + ("moe",) * (self.num_layers - dense)

    def weights_text(self, served: str = "") -> str:
        """The weights as served: `served` where given, else the checkpoint's dtype (with its
        experts' where that differs, as gpt-oss ships mxfp4 experts in a bf16 model)."""
        experts = self.moe.weight_dtype if self.moe is not None else None
        if served or not experts or experts == self.weight_dtype:
            return served or self.weight_dtype
        return f"{self.weight_dtype}, {experts} experts"

    @property
    def num_moe_layers(self) -> int:
        return self.mlp_kinds.count("moe")

    @property
    def num_dense_mlp_layers(self) -> int:
        return self.mlp_kinds.count("dense")

    @property
    def num_attention_layers(self) -> int:
        counts = self.layer_counts
        return sum(counts[kind] for kind in ATTENTION_KINDS)

    @property
    def num_indexer_layers(self) -> int:
        """Attention layers that run a sparse-attention indexer of their own (0 without DSA)."""
        if self.dsa is None:
            return 0
        return self.dsa.indexer_layers or self.num_attention_layers

    @property
    def num_sublayers(self) -> int:
        """Pre-normed residual blocks: a mixer and an MLP per transformer layer (2), one per
        Nemotron-H block; each has its norm and, under TP, its all-reduce."""
        mixers = self.num_layers - self.layer_counts["mlp_only"]
        return mixers + self.num_layers - self.mlp_kinds.count("none")

    @property
    def q_heads_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    def kv_heads_of(self, kind: str) -> int:
        """KV heads of an attention layer of `kind` (sliding layers may have their own)."""
        if kind == "sliding_attention" and self.sliding_num_kv_heads:
            return self.sliding_num_kv_heads
        return self.num_kv_heads

    @property
    def kv_heads_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def bytes_per_param(self) -> float:
        return BYTES_PER_PARAM[self.weight_dtype]

    @property
    def expert_bytes_per_param(self) -> float:
        dtype = self.moe.weight_dtype if self.moe and self.moe.weight_dtype else self.weight_dtype
        return BYTES_PER_PARAM[dtype]


def tp_problem(model: Model, tp: int) -> str | None:
    """Why `model` cannot be split over `tp` GPUs as vLLM and SGLang split it, or None.

    Both engines split the query heads evenly (heads % TP == 0) and either split the KV heads
    (kv_heads % TP == 0) or replicate them (TP % kv_heads == 0). A Mamba-2 mixer splits its
    heads too, and its B/C groups unless there is one group to replicate (vLLM
    model_executor/layers/mamba/mamba_mixer2.py asserts both); linear attention splits its key
    and value heads. Each problem names the dimension that does not divide.
    """
    heads = model.num_attention_heads
    degree = f"tensor parallel degree {tp}"
    if tp < 1 or heads % tp:
        return f"{degree} must divide the {heads} attention heads of {model.name}"
    for kv in sorted({model.kv_heads_of(kind) for kind in model.layer_counts
                      if kind in ATTENTION_KINDS} or {model.num_kv_heads}):
        if kv % tp and tp % kv:
            return f"{degree} and the {kv} KV heads of {model.name} must divide one another"
    if model.mamba is not None and "mamba" in model.layer_types:
        mb = model.mamba
        if mb.num_heads % tp:
            return f"{degree} must divide the {mb.num_heads} Mamba heads of {model.name}"
        if mb.n_groups % tp and mb.n_groups != 1:
            return f"{degree} must divide the {mb.n_groups} Mamba groups of {model.name}"
    la = model.linear_attention
    if la is not None and "linear_attention" in model.layer_types:
        for what, count in (("key", la.num_key_heads), ("value", la.num_value_heads)):
            if count % tp:
                return (f"{degree} must divide the {count} linear-attention {what} heads of "
                        f"{model.name}")
    return None


def ep_problem(model: Model, ep: int) -> str | None:
    """Why the routed experts of `model` cannot be spread over `ep` GPUs, or None."""
    if ep == 1:
        return None
    if model.moe is None or model.num_moe_layers == 0:
        return f"expert parallel degree {ep}: {model.name} has no experts (not MoE)"
    if model.moe.num_experts % ep:
        return (f"expert parallel degree {ep} must divide the {model.moe.num_experts} routed "
                f"experts of {model.name}")
    return None


def check_parallel(model: Model, *, tp: int = 1, ep: int = 1) -> None:
    """The one check of a parallel layout: SpecError naming the option (--tp, --ep) and the
    dimension of the model it does not divide."""
    check_int(tp, "tp", low=1, high=MAX_TP)
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1:
        raise parameter_error("ep", f"expert parallel degree {ep!r} must be an integer >= 1")
    for option, problem in (("tp", tp_problem(model, tp)), ("ep", ep_problem(model, ep))):
        if problem is not None:
            raise parameter_error(option, problem)


def check_tensor_parallel(model: Model, tp: int) -> None:
    """The TP degrees vLLM and SGLang accept for a model; SpecError naming --tp otherwise."""
    check_parallel(model, tp=tp)


def load_model(name: str) -> Model:
    """Load a built-in model by slug (e.g. `llama-3.1-8b`) or a YAML file by path."""
    path = resolve_path("models", name)
    return model_from_file(read_spec_file(path), slug=path.stem)


def model_from_file(spec: SpecFile, *, slug: str) -> Model:
    """Build a Model from a parsed spec file; every problem names the file and the field."""
    f = Fields(spec.data, spec.path)
    try:
        model = _build(f, spec, slug)
        f.check_unknown()
        _check_consistent(f, model)
        return model
    except SpecError as err:
        message = str(err)
        raise SpecError(message if message.startswith(spec.path) else f"{spec.path}: {message}") \
            from None


# Query heads' width (heads x head_dim) over the hidden size: 0.67x to 3x in every config read
# so far (GLM-4.5-Air and MiMo-V2-Flash 3x); a spec past 16x either way has a head_dim or a
# head count off by a unit or a digit (head_dim 1, hidden_size 1), not an architecture.
MAX_QUERY_WIDTH_RATIO = 16.0


def query_width_problem(heads: int, head_dim: int, hidden: int) -> str | None:
    """Why `heads` x `head_dim` query channels cannot project from and back to `hidden`, or
    None (the ratio bound above); the message names the three fields."""
    ratio = heads * head_dim / hidden
    if 1 / MAX_QUERY_WIDTH_RATIO <= ratio <= MAX_QUERY_WIDTH_RATIO:
        return None
    return (f"fields 'num_attention_heads' x 'head_dim' = {heads:,} x {head_dim:,} query "
            f"channels are {ratio:.3g}x 'hidden_size' = {hidden:,} (published models: "
            f"0.67x-3x; refused past {MAX_QUERY_WIDTH_RATIO:g}x either way)")


def _check_consistent(f: Fields, model: Model) -> None:
    """Numbers each in range that no model has together (one line naming the field): query
    heads far wider or narrower than the hidden size, shared experts with a count but no width
    (or a width but no count), linear-attention value heads that the key heads do not group,
    more multi-token-prediction layers than the model has layers."""
    problem = query_width_problem(model.num_attention_heads, model.head_dim, model.hidden_size)
    if problem is not None:
        raise SpecError(f"{model.path}: {problem}")
    moe = model.moe
    if moe is not None and (moe.num_shared_experts > 0) != (
            moe.shared_expert_intermediate_size > 0):
        given, missing = ("num_shared_experts", "shared_expert_intermediate_size") \
            if moe.num_shared_experts else ("shared_expert_intermediate_size",
                                            "num_shared_experts")
        raise f.error(f"moe.{given}", f"= {getattr(moe, given):,} needs 'moe.{missing}' > 0: "
                      "shared experts have a count and a width")
    la = model.linear_attention
    if la is not None and la.num_value_heads % la.num_key_heads:
        raise f.error("linear_attention.num_value_heads",
                      f"= {la.num_value_heads} is not a multiple of 'num_key_heads' = "
                      f"{la.num_key_heads}: each key head serves a whole group of value heads")
    if model.mtp_layers > model.num_layers:
        raise f.error("mtp_layers", f"= {model.mtp_layers:,} exceeds num_layers = "
                      f"{model.num_layers:,}: multi-token prediction adds a layer or a few")


def _build(f: Fields, spec: SpecFile, slug: str) -> Model:
    num_layers = f.integer("num_layers", minimum=1, maximum=MAX_LAYERS)
    heads = f.integer("num_attention_heads", minimum=1)
    hidden = f.integer("hidden_size", minimum=1)
    if not f.has("head_dim") and hidden % heads:
        raise f.error("hidden_size", f"= {hidden} is not divisible by num_attention_heads = "
                      f"{heads}; give head_dim explicitly")
    advertised = f.sub("advertised", required=False)
    return Model(
        slug=slug,
        name=read_display_name(f),
        hf_id=read_hub_id(f, "hf_id") if f.has("hf_id") else "",
        architecture=f.string("architecture"),
        hidden_size=hidden,
        num_layers=num_layers,
        num_attention_heads=heads,
        num_kv_heads=f.integer("num_kv_heads", minimum=1),
        head_dim=f.integer("head_dim", hidden // heads, minimum=1),
        intermediate_size=f.integer("intermediate_size", minimum=1),
        vocab_size=f.integer("vocab_size", minimum=1),
        tie_word_embeddings=f.boolean("tie_word_embeddings", False),
        gated_mlp=f.boolean("gated_mlp", True),
        qkv_bias=f.boolean("qkv_bias", False),
        attention_output_bias=f.boolean("attention_output_bias", False),
        qk_norm=f.boolean("qk_norm", False),
        attention_output_gate=f.boolean("attention_output_gate", False),
        attention_sinks=f.boolean("attention_sinks", False),
        layer_types=_layer_types(f, num_layers),
        sliding_window=f.integer("sliding_window", 0),
        v_head_dim=f.integer("v_head_dim", 0),
        sliding_num_kv_heads=f.integer("sliding_num_kv_heads", 0),
        q_lora_rank=f.integer("q_lora_rank", 0),
        moe=_moe(f.sub("moe", required=False)),
        mla=_mla(f.sub("mla", required=False)),
        linear_attention=_linear(f.sub("linear_attention", required=False)),
        mamba=_mamba(f.sub("mamba", required=False)),
        dsa=_dsa(f.sub("dsa", required=False)),
        mlp_types=_kinds(f, "mlp_types") if f.has("mlp_types") else (),
        mtp_layers=f.integer("mtp_layers", 0),
        weight_dtype=f.string("weight_dtype", "bf16"),
        advertised_params=advertised.number("params", positive=True) if advertised else 0.0,
        advertised_active_params=advertised.number("active_params", 0.0, minimum=0.0)
        if advertised else 0.0,
        sources=spec.sources,
        path=spec.path,
    )


def _kinds(f: Fields, key: str) -> tuple[str, ...]:
    """A per-layer list of kinds (`layer_types`, `mlp_types`)."""
    value = f.value(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise f.error(key, "must be a list of layer kinds")
    return tuple(value)


def _layer_types(f: Fields, num_layers: int) -> tuple[str, ...]:
    """Explicit `layer_types`, or a repeating `layer_pattern`, or all full attention."""
    if f.has("layer_types"):
        return _kinds(f, "layer_types")
    if f.has("layer_pattern"):
        pattern = f.value("layer_pattern")
        if not isinstance(pattern, list) or not pattern or \
                not all(isinstance(v, str) for v in pattern):
            raise f.error("layer_pattern", "must be a non-empty list of layer kinds")
        return tuple(pattern[i % len(pattern)] for i in range(num_layers))
    return ("full_attention",) * num_layers


def _moe(f: Fields | None) -> MoE | None:
    if f is None:
        return None
    return MoE(
        num_experts=f.integer("num_experts", minimum=1),
        experts_per_token=f.integer("experts_per_token", minimum=1),
        expert_intermediate_size=f.integer("expert_intermediate_size", minimum=1),
        num_shared_experts=f.integer("num_shared_experts", 0),
        shared_expert_intermediate_size=f.integer("shared_expert_intermediate_size", 0),
        dense_layers=f.integer("dense_layers", 0),
        expert_bias=f.boolean("expert_bias", False),
        weight_dtype=f.string("weight_dtype", "") if f.has("weight_dtype") else "",
        latent_size=f.integer("latent_size", 0),
    )


def _mla(f: Fields | None) -> MLA | None:
    if f is None:
        return None
    return MLA(
        q_lora_rank=f.integer("q_lora_rank", 0),
        kv_lora_rank=f.integer("kv_lora_rank", minimum=1),
        qk_nope_head_dim=f.integer("qk_nope_head_dim", minimum=1),
        qk_rope_head_dim=f.integer("qk_rope_head_dim", minimum=1),
        v_head_dim=f.integer("v_head_dim", minimum=1),
    )


def _counts(f: Fields, *names: str) -> dict[str, int]:
    """The named fields of a block, each a whole number >= 1."""
    return {name: f.integer(name, minimum=1) for name in names}


def _linear(f: Fields | None) -> LinearAttention | None:
    if f is None:
        return None
    return LinearAttention(**_counts(f, "num_key_heads", "num_value_heads", "key_head_dim",
                                     "value_head_dim", "conv_kernel_size"))


def _mamba(f: Fields | None) -> Mamba | None:
    if f is None:
        return None
    return Mamba(**_counts(f, "num_heads", "head_dim", "state_size", "n_groups",
                           "conv_kernel_size"))


def _dsa(f: Fields | None) -> SparseAttention | None:
    if f is None:
        return None
    return SparseAttention(**_counts(f, "index_n_heads", "index_head_dim", "index_topk"),
                           indexer_layers=f.integer("indexer_layers", 0))

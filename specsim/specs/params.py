"""Parameter counts and weight bytes of a target model, component by component.

Counts follow the tensors of the Hugging Face implementations named in each spec's
`architecture` (biases and norms included), so totals can be checked against the sizes
the model cards advertise.
"""

from __future__ import annotations

from dataclasses import dataclass

from specsim.specs.cache import attention_layer_kv_bytes_per_token, kv_layout
from specsim.specs.models import Model

EXPERT_COMPONENTS = ("experts",)


def attention_params(model: Model, kind: str = "full_attention") -> float:
    """Parameters of one softmax-attention block of `kind` (projections, biases, norms,
    sinks); value heads may be narrower than key heads, sliding layers have their KV heads."""
    d, h = model.hidden_size, model.num_attention_heads
    if model.mla is not None:
        m = model.mla
        qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (d * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * h * qk_dim
             if m.q_lora_rank else d * h * qk_dim)
        kv = d * m.cache_elems_per_token + m.kv_lora_rank \
            + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
        return float(q + kv + h * m.v_head_dim * d)
    q_out = model.q_heads_dim * (2 if model.attention_output_gate else 1)
    kv_out = model.kv_heads_of(kind) * (model.head_dim + model.value_head_dim)
    o_in = h * model.value_head_dim
    r = model.q_lora_rank  # low-rank query: hidden -> r, its norm, r -> heads
    q = d * r + r + r * q_out if r else d * q_out
    weights = q + d * kv_out + o_in * d
    biases = (model.q_heads_dim + kv_out) * model.qkv_bias + d * model.attention_output_bias
    norms = 2 * model.head_dim * model.qk_norm
    return float(weights + biases + norms + h * model.attention_sinks)


def indexer_params(model: Model) -> float:
    """Parameters of DeepSeek-V3.2's lightning indexer in one layer (DeepSeek-V3.2-Exp
    inference/model.py, class Indexer): wq_b from the query latent to the index heads, wk from
    the hidden state to one key, k_norm (a LayerNorm: weight and bias), weights_proj to one
    weight per index head."""
    dsa, mla = model.dsa, model.mla
    if dsa is None or mla is None:
        return 0.0
    d, heads, dim = model.hidden_size, dsa.index_n_heads, dsa.index_head_dim
    q_in = mla.q_lora_rank or d
    return float(q_in * heads * dim + d * dim + 2 * dim + d * heads)


def mamba_params(model: Model) -> float:
    """Parameters of one Mamba-2 mixer (transformers NemotronHMamba2Mixer): in_proj to z, x, B,
    C and dt; the depthwise convolution over x, B, C with its bias; dt_bias, A_log and D per
    head; the gated RMSNorm over x; out_proj. No projection biases (Nemotron-H use_bias:
    false)."""
    mb = model.mamba
    if mb is None:
        return 0.0
    d, inner = model.hidden_size, mb.intermediate_size
    in_proj = d * (inner + mb.conv_dim + mb.num_heads)
    conv = mb.conv_dim * mb.conv_kernel_size + mb.conv_dim
    return float(in_proj + conv + 3 * mb.num_heads + inner + inner * d)


def linear_attention_params(model: Model) -> float:
    """Parameters of one gated-delta-net linear-attention block."""
    la = model.linear_attention
    if la is None:
        return 0.0
    d = model.hidden_size
    key_dim = la.num_key_heads * la.key_head_dim
    value_dim = la.num_value_heads * la.value_head_dim
    in_proj = d * (2 * key_dim + 2 * value_dim + 2 * la.num_value_heads)
    conv = (2 * key_dim + value_dim) * la.conv_kernel_size
    per_head = 2 * la.num_value_heads + la.value_head_dim  # dt bias, A_log, output norm
    return float(in_proj + conv + per_head + value_dim * d)


def dense_mlp_params(model: Model, intermediate_size: int | None = None) -> float:
    ff = model.intermediate_size if intermediate_size is None else intermediate_size
    return float((3 if model.gated_mlp else 2) * model.hidden_size * ff)


def expert_params(model: Model) -> float:
    """Parameters of ONE routed expert (an MLP like the dense one: gated with gate, up and
    down, or up and down only (Nemotron-H's squared ReLU); biases where the model has them),
    from and to the latent space of a latent MoE."""
    assert model.moe is not None
    d, ff = model.moe.latent_size or model.hidden_size, model.moe.expert_intermediate_size
    bias = (2 * ff + d) * model.moe.expert_bias
    return float((3 if model.gated_mlp else 2) * d * ff + bias)


def param_breakdown(model: Model) -> dict[str, float]:
    """Total parameters per component (all layers summed); MTP modules are not counted."""
    d = model.hidden_size
    counts = model.layer_counts
    out = {
        "embedding": float(model.vocab_size * d),
        "lm_head": 0.0 if model.tie_word_embeddings else float(model.vocab_size * d),
        "attention": sum(counts[kind] * attention_params(model, kind)
                         for kind in ("full_attention", "sliding_attention")),
        "linear_attention": counts["linear_attention"] * linear_attention_params(model),
        "norms": float((model.num_sublayers + 1) * d),
        "mlp": model.num_dense_mlp_layers * dense_mlp_params(model),
    }
    if model.mamba is not None:
        out["mamba"] = counts["mamba"] * mamba_params(model)
    if model.dsa is not None:
        out["indexer"] = model.num_indexer_layers * indexer_params(model)
    moe = model.moe
    if moe is None:
        return out
    moe_layers = model.num_moe_layers
    out["router"] = float(moe_layers * (d * moe.num_experts + moe.num_experts * moe.expert_bias))
    if moe.latent_size:  # fc1_latent_proj d -> latent and fc2_latent_proj latent -> d
        out["latent_projections"] = float(moe_layers * 2 * d * moe.latent_size)
    out["experts"] = moe_layers * moe.num_experts * expert_params(model)
    out["shared_experts"] = moe_layers * moe.num_shared_experts * dense_mlp_params(
        model, moe.shared_expert_intermediate_size)
    return out


def total_params(model: Model) -> float:
    return sum(param_breakdown(model).values())


def active_params(model: Model) -> float:
    """Parameters one token touches: the k routed experts of each MoE layer, not all E."""
    parts = param_breakdown(model)
    if model.moe is not None:
        parts["experts"] *= model.moe.experts_per_token / model.moe.num_experts
    return sum(parts.values())


def weight_bytes(model: Model) -> float:
    """Bytes of all weights as stored (experts may use their own dtype, e.g. MXFP4)."""
    parts = param_breakdown(model)
    experts = sum(parts.pop(k, 0.0) for k in EXPERT_COMPONENTS)
    return sum(parts.values()) * model.bytes_per_param + experts * model.expert_bytes_per_param


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSizes:
    """A model's derived sizes, computed once from its architecture fields: parameters per
    component and in all, those one token touches, weight bytes, and its bf16 cache (all
    layers per token, one attention layer per token, fixed state per request), on one GPU."""

    params_by_part: dict[str, float]
    total_params: float
    active_params: float
    weight_bytes: float
    kv_bytes_per_token: float
    attention_layer_kv_bytes_per_token: float
    state_bytes_per_request: float


def model_sizes(model: Model) -> ModelSizes:
    """The sizes `models list` and `models show` print (TP 1, bf16 cache)."""
    layout = kv_layout(model)
    return ModelSizes(
        params_by_part=param_breakdown(model), total_params=total_params(model),
        active_params=active_params(model), weight_bytes=weight_bytes(model),
        kv_bytes_per_token=layout.bytes_per_token,
        attention_layer_kv_bytes_per_token=attention_layer_kv_bytes_per_token(model),
        state_bytes_per_request=layout.fixed_bytes_per_request)

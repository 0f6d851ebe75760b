"""The work of one forward pass, op by op: bytes moved and flops, before any hardware is known.

Each op of a decoder layer (and the few ops outside the layers) becomes an `Op` record with
its weight, activation, KV-read and KV-write bytes and its flops, as arrays over the S passes
of a `PassShape`. Weight GEMMs also keep their shape (m x k times k x n, `count` of them),
which calibrated GEMM models need. Tensor parallelism splits heads, MLP and experts over TP
GPUs; expert parallelism (EP > 1) instead places E / EP whole experts on each GPU and adds the
all-to-all that dispatches tokens to their experts and combines the results. The records
describe ONE GPU's shard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.forward.shapes import FloatArray, PassShape
from specsim.specs.cache import attention_kv_bytes_per_token, kv_heads_per_gpu
from specsim.specs.dtypes import BYTES_PER_PARAM, Precision
from specsim.specs.models import Model, check_parallel


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionKernel:
    """An attention op's kernel geometry on one GPU: the pass's requests (`shape`), the query
    and KV heads and head width per GPU, the bytes of one cached K or V element and its dtype,
    and the window (inf: full attention)."""

    shape: PassShape
    q_heads: float
    kv_heads: float
    head_dim: float
    kv_elem_bytes: float
    window: float = np.inf
    kv_dtype: str = "bf16"


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """One op on one GPU, repeated in `layers` layers; arrays have shape (S,).

    gemm_m/k/n/count: for weight GEMMs, `count` GEMMs of (m x k) @ (k x n) each (a grouped
    expert GEMM has fractional expected count; None = one GEMM); zero for other ops.
    kernel: for softmax attention over a per-head K/V cache, the geometry the tiled attention
    model (`attention_time`) needs; None for every other op (MLA, linear attention, GEMMs).
    """

    name: str
    op_class: str
    layers: int
    weight_bytes: FloatArray
    activation_bytes: FloatArray
    kv_read_bytes: FloatArray
    kv_write_bytes: FloatArray
    flops: FloatArray
    gemm_m: FloatArray
    gemm_k: float = 0.0
    gemm_n: float = 0.0
    gemm_count: FloatArray | None = None
    weight_bytes_per_param: float = 0.0
    weight_dtype: str = ""  # the GEMM's stored weight dtype by name (specs/dtypes.py); "" else
    act_bytes_per_elem: float = 0.0
    kernel: AttentionKernel | None = None

    @property
    def bytes_(self) -> FloatArray:
        return self.weight_bytes + self.activation_bytes + self.kv_read_bytes + self.kv_write_bytes


# Routing locality: the q tokens one request scores in a pass (a verified tree, a prefill
# chunk) share their context and route to overlapping experts; they touch as many experts as
# q^ROUTING_LOCALITY tokens routed independently would. Published counts of distinct experts
# per verify pass give the exponent: gpt-oss-20b, 8 rows, ~13 of 32 experts where independent
# routing gives 21 (aws-neuron/nkipy PR #63): 0.65; Laguna XS 2.1 (256 experts, top 8), 8
# and 15 rows, 39.4 and 58.9 experts against 57.4 and 97.0 (Luce-Org/lucebox PR #501): 0.80
# and 0.78. The median, 0.78, is used; requests stay independent of each other.
ROUTING_LOCALITY = 0.78


def expected_distinct_experts(num_experts: int, experts_per_token: int, tokens: FloatArray
                              ) -> FloatArray:
    """Expected experts touched by n tokens routed uniformly, k of E each: E (1 - (1 - k/E)^n)."""
    miss = 1.0 - experts_per_token / num_experts
    return num_experts * (1.0 - np.power(miss, tokens))


class _Builder:
    """Collects the ops of a pass for one model, shape, TP degree and precision."""

    def __init__(self, model: Model, shape: PassShape, tp: int, precision: Precision,
                 ep: int = 1) -> None:
        self.model, self.shape, self.tp, self.ep = model, shape, tp, ep
        self.n = shape.tokens
        self.zero = np.broadcast_to(0.0, self.n.shape)
        self.weight_dtype = precision.weight_dtype or model.weight_dtype
        self.wb = BYTES_PER_PARAM[self.weight_dtype]
        moe_dtype = model.moe.weight_dtype if model.moe and model.moe.weight_dtype else ""
        self.expert_dtype = precision.weight_dtype or moe_dtype or model.weight_dtype
        self.ab = BYTES_PER_PARAM[precision.activation_dtype]
        self.kv_dtype = precision.kv_dtype
        self.sb = BYTES_PER_PARAM[precision.state_dtype]
        self.ops: list[Op] = []

    def gemm(self, name: str, layers: int, k: float, n_out: float, *, m: FloatArray | None = None,
             count: FloatArray | None = None, dtype: str | None = None) -> None:
        """`count` GEMMs (m x k) @ (k x n_out) of `dtype` weights (default: the pass's weight
        dtype); m defaults to the pass's tokens, count to 1."""
        if layers == 0:
            return
        m = self.n if m is None else m
        dtype = self.weight_dtype if dtype is None else dtype
        wb = BYTES_PER_PARAM[dtype]
        shape = self.n.shape
        if count is None:  # one GEMM: weights are a constant, activations and flops scale with m
            weight = np.broadcast_to(k * n_out * wb, shape)
            activation, flops = m * ((k + n_out) * self.ab), m * (2.0 * k * n_out)
        else:
            weight = count * (k * n_out * wb)
            activation, flops = count * m * ((k + n_out) * self.ab), count * m * (2.0 * k * n_out)
        self.ops.append(Op(
            name=name, op_class="gemm", layers=layers, weight_bytes=weight,
            activation_bytes=activation, kv_read_bytes=self.zero, kv_write_bytes=self.zero,
            flops=flops, gemm_m=m, gemm_k=float(k), gemm_n=float(n_out), gemm_count=count,
            weight_bytes_per_param=wb, weight_dtype=dtype, act_bytes_per_elem=self.ab))

    def other(self, name: str, op_class: str, layers: int, *, activation: FloatArray | None = None,
              kv_read: FloatArray | None = None, kv_write: FloatArray | None = None,
              flops: FloatArray | None = None, kernel: AttentionKernel | None = None) -> None:
        if layers == 0:
            return
        z = self.zero
        self.ops.append(Op(
            name=name, op_class=op_class, layers=layers, weight_bytes=z,
            activation_bytes=z if activation is None else activation,
            kv_read_bytes=z if kv_read is None else kv_read,
            kv_write_bytes=z if kv_write is None else kv_write,
            flops=z if flops is None else flops, gemm_m=z, kernel=kernel))


def pass_work(model: Model, shape: PassShape, *, tp: int = 1,
              precision: Precision | None = None, ep: int = 1) -> list[Op]:
    """All ops of S forward passes of `model` on one GPU of a TP group (and an EP group of
    `ep` GPUs over which the routed experts are spread; 1 = experts split by TP)."""
    check_parallel(model, tp=tp, ep=ep)
    b = _Builder(model, shape, tp, precision or Precision(), ep)
    counts = model.layer_counts
    attn_layers = model.num_attention_layers
    if model.mla is not None:
        _mla_projections(b, attn_layers)
    else:
        _attention_projections(b, attn_layers)
    _sparse_indexer(b, model.num_indexer_layers)
    _attention_kernels(b)
    _linear_attention(b, counts["linear_attention"])
    _mamba(b, counts["mamba"])
    _mlp(b)
    _layer_glue(b)
    _outside_layers(b)
    return b.ops


def _attention_projections(b: _Builder, layers: int) -> None:
    """Q, K, V and output projections; sliding layers with KV heads of their own (MiMo-V2-Flash)
    get their own QKV GEMM."""
    m, tp = b.model, b.tp
    q_out = m.q_heads_dim * (2 if m.attention_output_gate else 1) / tp
    counts = m.layer_counts
    sliding = counts["sliding_attention"] if m.sliding_num_kv_heads else 0
    # a low-rank query (Step-3) projects to q_lora_rank beside K and V, replicated as vLLM's
    # step3_text does, then up to this GPU's heads
    first_q = m.q_lora_rank or q_out
    for name, kind, n in (("qkv_proj", "full_attention", layers - sliding),
                          ("qkv_proj_sliding", "sliding_attention", sliding)):
        kv_out = kv_heads_per_gpu(m.kv_heads_of(kind), tp) * (m.head_dim + m.value_head_dim)
        b.gemm(name, n, m.hidden_size, first_q + kv_out)
    if m.q_lora_rank:
        b.gemm("q_up_proj", layers, m.q_lora_rank, q_out)
    b.gemm("o_proj", layers, m.num_attention_heads * m.value_head_dim / tp, m.hidden_size)


def _mla_projections(b: _Builder, layers: int) -> None:
    """MLA: replicated down-projections to the latents, head-split up-projections."""
    m, tp = b.model, b.tp
    mla = m.mla
    assert mla is not None
    heads = m.num_attention_heads / tp
    b.gemm("mla_down_proj", layers, m.hidden_size, mla.q_lora_rank + mla.cache_elems_per_token)
    q_in = mla.q_lora_rank or m.hidden_size
    b.gemm("q_up_proj", layers, q_in, heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim))
    # With weight absorption the kv up-projection multiplies the queries and the attention
    # output instead of every cached latent: same weights and flops per scored token.
    b.gemm("kv_up_proj", layers, mla.kv_lora_rank, heads * (mla.qk_nope_head_dim + mla.v_head_dim))
    b.gemm("o_proj", layers, heads * mla.v_head_dim, m.hidden_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionWork:
    """Bytes and flops of one attention layer over a pass, (S,) each."""

    activation_bytes: FloatArray
    kv_read_bytes: FloatArray
    kv_write_bytes: FloatArray
    flops: FloatArray


def attention_work(shape: PassShape, *, heads: float | FloatArray,
                   kv_bytes_per_token: float | FloatArray, qk_dim: float | FloatArray,
                   v_dim: float | FloatArray, act_bytes: float, window: float = np.inf
                   ) -> AttentionWork:
    """One attention layer: Q in and O out, the cache read once, the new K/V written.

    heads: query heads on this GPU; kv_bytes_per_token: K and V (or MLA's latent) cached per
    token on this GPU; qk_dim, v_dim: per-head widths of Q K^T and P V; window: the most
    cached tokens a request's queries see.
    """
    n = shape.tokens
    return AttentionWork(
        activation_bytes=n * heads * (qk_dim + v_dim) * act_bytes,
        kv_read_bytes=shape.cached_tokens(window) * kv_bytes_per_token,
        kv_write_bytes=n * kv_bytes_per_token,
        # 2 flops per multiply-add: Q K^T over qk_dim, then P V over v_dim, per head
        flops=2.0 * shape.attention_pairs(window) * heads * (qk_dim + v_dim))


def _attention_kernels(b: _Builder) -> None:
    """Attention over the KV cache, one op per attention kind (full and sliding window).

    With DeepSeek Sparse Attention each query attends to the `index_topk` cached tokens its
    indexer selected, not to the whole context: the kernel reads min(context, top-k) latents
    per request and scores as many (query, key) pairs, which is a window of top-k in what it
    reads and computes (the selected tokens are scattered, but each is one whole latent row).
    The q positions one request verifies select overlapping sets and are counted once.
    """
    m, tp, s = b.model, b.tp, b.shape
    heads = m.num_attention_heads / tp
    if m.mla is not None:  # queries attend over the latent plus its rope key
        qk_dim, v_dim = m.mla.cache_elems_per_token, m.mla.kv_lora_rank
    else:
        qk_dim, v_dim = m.head_dim, m.value_head_dim
    counts = m.layer_counts
    full_window = float(m.dsa.index_topk) if m.dsa is not None else np.inf
    for kind, window in (("full_attention", full_window),
                         ("sliding_attention", m.sliding_window)):
        if not counts[kind]:
            continue
        kv_per_token = attention_kv_bytes_per_token(m, tp=tp, kv_dtype=b.kv_dtype, kind=kind)
        w = attention_work(s, heads=heads, kv_bytes_per_token=kv_per_token, qk_dim=qk_dim,
                           v_dim=v_dim, act_bytes=b.ab, window=window)
        # the tiled kernel model takes one head width: the mean of K's and V's moves the same
        # bytes and does the same flops
        kernel = None if m.mla is not None else AttentionKernel(
            shape=s, q_heads=heads, kv_heads=float(kv_heads_per_gpu(m.kv_heads_of(kind), tp)),
            head_dim=(qk_dim + v_dim) / 2, kv_elem_bytes=BYTES_PER_PARAM[b.kv_dtype],
            window=float(window), kv_dtype=b.kv_dtype)
        b.other("attention" if kind == "full_attention" else "sliding_attention", "attention",
                counts[kind], activation=w.activation_bytes, kv_read=w.kv_read_bytes,
                kv_write=w.kv_write_bytes, flops=w.flops, kernel=kernel)


def _linear_attention(b: _Builder, layers: int) -> None:
    """Linear attention: projections plus a fixed-size recurrent state read and written."""
    la = b.model.linear_attention
    if la is None or layers == 0:
        return
    tp, d = b.tp, b.model.hidden_size
    key_dim = la.num_key_heads * la.key_head_dim
    value_dim = la.num_value_heads * la.value_head_dim
    b.gemm("linear_in_proj", layers, d, (2 * key_dim + 2 * value_dim + 2 * la.num_value_heads) / tp)
    b.gemm("linear_out_proj", layers, value_dim / tp, d)
    state = (la.state_elems * b.sb + la.conv_state_elems * b.ab) / tp
    requests = b.shape.requests
    # Per token and value head: S k, the rank-1 delta update, and S^T q (2 flops per MAC each).
    flops = b.n * 6.0 * la.state_elems / tp
    b.other("linear_attention", "attention", layers,
            activation=b.n * (2 * key_dim + 2 * value_dim) / tp * b.ab,
            kv_read=requests * state, kv_write=requests * state, flops=flops)


# Mamba-2 recurrence, per token and state element (Dao & Gu 2024, eq. of the SSM step
# h_t = exp(dt A) h_{t-1} + dt x_t B_t^T, y_t = h_t C_t): the decay (1 multiply), the rank-1
# update and its add (2), and C h (multiply and add, 2): 5 flops. The causal convolution costs
# 2 flops per tap and channel.
_MAMBA_FLOPS_PER_STATE_ELEM = 5.0


def _mamba(b: _Builder, layers: int) -> None:
    """Mamba-2 layers: in/out projections (heads split by TP), the convolution over x, B, C
    and the selective scan. Each request's SSM and convolution states are read once and
    written once per pass; the scan over its q new tokens keeps them on chip."""
    mb = b.model.mamba
    if mb is None or layers == 0:
        return
    tp, d, inner = b.tp, b.model.hidden_size, mb.intermediate_size
    b.gemm("mamba_in_proj", layers, d, (inner + mb.conv_dim + mb.num_heads) / tp)
    b.gemm("mamba_out_proj", layers, inner / tp, d)
    state = (mb.state_elems * b.sb + mb.conv_state_elems * b.ab) / tp
    requests = b.shape.requests
    flops = b.n * (_MAMBA_FLOPS_PER_STATE_ELEM * mb.state_elems
                   + 2.0 * mb.conv_dim * mb.conv_kernel_size) / tp
    # reads x, B, C (conv_dim), dt (a scalar per head) and the gate z; writes y
    activation = b.n * (mb.conv_dim + mb.num_heads + 2 * inner) / tp * b.ab
    b.other("mamba_scan", "attention", layers, activation=activation, kv_read=requests * state,
            kv_write=requests * state, flops=flops)


# The indexer's logits are FP32 (DeepSeek-V3.2-Exp inference/kernel.py fp8_index returns a
# float32 [tokens, context] score); the top-k selection reads them back.
_INDEX_LOGIT_BYTES = 4.0


def _sparse_indexer(b: _Builder, layers: int) -> None:
    """DeepSeek-V3.2's lightning indexer in each attention layer: its projections (replicated
    on every TP rank: vLLM and SGLang build wq_b, wk and weights_proj as ReplicatedLinear), and
    its scoring of every cached token for each query, index_n_heads dot products of
    index_head_dim over the FP8 index keys, weighted and summed per head (DeepSeek-V3.2 report,
    eq. 1: I_t,s = sum_j w_t,j ReLU(q_t,j . k_s)), then the top-k of those logits."""
    m = b.model
    dsa, mla = m.dsa, m.mla
    if dsa is None or mla is None or layers == 0:
        return
    d, heads, dim = m.hidden_size, dsa.index_n_heads, dsa.index_head_dim
    b.gemm("index_q_proj", layers, mla.q_lora_rank or d, heads * dim)
    b.gemm("index_k_proj", layers, d, dim)
    b.gemm("index_weights_proj", layers, d, heads)
    s = b.shape
    pairs = s.attention_pairs()
    key_bytes = dsa.index_key_bytes_per_token
    b.other("sparse_indexer", "attention", layers,
            activation=b.n * heads * dim * b.ab + 2.0 * pairs * _INDEX_LOGIT_BYTES,
            kv_read=s.cached_tokens() * key_bytes, kv_write=b.n * key_bytes,
            # per (query, key) pair and index head: a dot product (2 dim), ReLU, weight, sum
            flops=pairs * heads * (2.0 * dim + 3.0))


def _mlp(b: _Builder) -> None:
    m, tp = b.model, b.tp
    d = m.hidden_size
    up = 2 if m.gated_mlp else 1
    moe = m.moe
    dense_layers = m.num_dense_mlp_layers
    b.gemm("mlp_up", dense_layers, d, up * m.intermediate_size / tp)
    b.gemm("mlp_down", dense_layers, m.intermediate_size / tp, d)
    if moe is None or m.num_moe_layers == 0:
        return
    layers = m.num_moe_layers
    b.gemm("router", layers, d, moe.num_experts)
    e = moe.latent_size or d  # the width the experts read and write (latent MoE: the latent)
    if moe.latent_size:  # one Linear each way, read whole on every TP rank (as TensorRT-LLM's
        b.gemm("moe_latent_in", layers, d, e)  # Nemotron-H MoE builds fc1/fc2_latent_proj)
        b.gemm("moe_latent_out", layers, e, d)
    touched = expected_distinct_experts(moe.num_experts, moe.experts_per_token,
                                        b.shape.independent_tokens(ROUTING_LOCALITY))
    routed = b.n * moe.experts_per_token
    m_each = np.divide(routed, touched, out=np.zeros_like(routed), where=touched > 0)
    ff = moe.expert_intermediate_size / tp
    if b.ep > 1:  # E / EP whole experts here: touched ones are E/EP (1 - (1 - k/E)^n)
        ff, touched = moe.expert_intermediate_size, touched / b.ep
        _all_to_all(b, layers)
    b.gemm("experts_up", layers, e, up * ff, m=m_each, count=touched, dtype=b.expert_dtype)
    b.gemm("experts_down", layers, ff, e, m=m_each, count=touched, dtype=b.expert_dtype)
    if moe.num_shared_experts:
        shared_ff = moe.num_shared_experts * moe.shared_expert_intermediate_size / tp
        b.gemm("shared_up", layers, d, up * shared_ff)
        b.gemm("shared_down", layers, shared_ff, d)


def all_to_all_bytes(tokens: FloatArray, *, hidden_size: int, experts_per_token: int, ep: int,
                     act_bytes: float) -> FloatArray:
    """Bytes one GPU sends in ONE all-to-all (dispatch or combine) of a MoE layer.

    Each of the `tokens` goes to its k experts; (EP - 1)/EP of them live on other GPUs (routing
    uniform), and each copy is a hidden-sized activation: tokens x hidden x act bytes x k x
    (EP - 1)/EP. The combine sends as much back.
    """
    return np.asarray(tokens * (hidden_size * act_bytes * experts_per_token * (ep - 1) / ep))


def _all_to_all(b: _Builder, moe_layers: int) -> None:
    """Dispatch and combine of every MoE layer under expert parallelism (two per layer; a
    latent MoE sends its latent-wide tokens)."""
    moe = b.model.moe
    assert moe is not None
    sent = all_to_all_bytes(b.n, hidden_size=moe.latent_size or b.model.hidden_size,
                            experts_per_token=moe.experts_per_token, ep=b.ep, act_bytes=b.ab)
    b.other("all_to_all", "all_to_all", 2 * moe_layers, activation=sent)


# One fused add + RMSNorm kernel per sub-layer (a transformer layer has two: before its mixer
# and before its MLP; a Nemotron-H block one), reading the hidden state and the residual and
# writing both: 4 hidden-sized transfers.
_GLUE_TRANSFERS_PER_SUBLAYER = 4


def _layer_glue(b: _Builder) -> None:
    """Norms and residual adds, and one all-reduce per sub-layer under tensor parallelism."""
    m = b.model
    hidden_bytes = b.n * m.hidden_size * b.ab
    b.other("norm_residual", "memory", m.num_sublayers,
            activation=_GLUE_TRANSFERS_PER_SUBLAYER * hidden_bytes)
    if b.tp > 1:
        b.other("all_reduce", "communication", m.num_sublayers, activation=hidden_bytes)


# The sampler reads the logits, writes probabilities and reads them again to sample or to
# verify a draft: three fp32 passes over the vocabulary per position.
_SAMPLING_PASSES = 3
_FP32_BYTES = 4.0


def sampling_bytes(rows: FloatArray, vocab_size: float | FloatArray) -> FloatArray:
    """Bytes the sampler moves for `rows` positions over a vocabulary of `vocab_size`."""
    return np.asarray(_SAMPLING_PASSES * rows * vocab_size * _FP32_BYTES)


def _outside_layers(b: _Builder) -> None:
    """Embedding lookup, LM head on the positions that need logits, and sampling."""
    m = b.model
    d = m.hidden_size
    b.other("embedding", "memory", 1, activation=b.n * d * (b.wb + b.ab))
    logits_m = b.n * b.shape.logit_fraction
    b.gemm("lm_head", 1, d, m.vocab_size / b.tp, m=logits_m)
    if b.tp > 1:
        b.other("logits_gather", "communication", 1, activation=logits_m * m.vocab_size * b.ab)
    b.other("sampling", "memory", 1, activation=sampling_bytes(logits_m, m.vocab_size))

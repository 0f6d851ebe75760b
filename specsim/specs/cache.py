"""What a model or drafter caches per request: K/V bytes per token, sliding windows, fixed state.

A cache is described by its layout: segments of layers that store `bytes_per_token` per cached
token (full attention: every token; sliding window: at most `window` tokens) plus a fixed state
per request (linear attention, Mamba-2 layers, a drafter's recurrent state). All sizes are per
GPU of a TP group. These are properties of the specs (a model's shape, a dtype); what fits in a
GPU's memory is `specsim.forward.memory`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from specsim.specs.dtypes import BYTES_PER_PARAM
from specsim.specs.models import Model

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSegment:
    """Layers that cache `bytes_per_token` (summed over those layers) for up to `window` tokens."""

    bytes_per_token: float
    window: float = np.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheLayout:
    """Per-request cache of a model or drafter on one GPU."""

    segments: tuple[CacheSegment, ...] = ()
    fixed_bytes_per_request: float = 0.0

    def bytes_per_request(self, context: ArrayLike) -> FloatArray:
        """Bytes cached for one request holding `context` tokens, same shape as context."""
        ctx = np.asarray(context, dtype=np.float64)
        total = np.full_like(ctx, self.fixed_bytes_per_request)
        for seg in self.segments:
            total = total + seg.bytes_per_token * np.minimum(ctx, seg.window)
        return total

    def __add__(self, other: CacheLayout) -> CacheLayout:
        return CacheLayout(segments=self.segments + other.segments,
                           fixed_bytes_per_request=self.fixed_bytes_per_request
                           + other.fixed_bytes_per_request)

    @property
    def bytes_per_token(self) -> float:
        """Bytes one more token of context adds, below every sliding window."""
        return float(sum(seg.bytes_per_token for seg in self.segments))


def kv_heads_per_gpu(kv_heads: int, tp: int) -> int:
    """KV heads one GPU of a TP group holds.

    Heads are split over the group while TP <= kv_heads; beyond that each GPU keeps one head,
    each head replicated on TP / kv_heads GPUs (vLLM and SGLang both do this).
    """
    return max(1, kv_heads // tp)


def kv_bytes_per_token(*, kv_heads: int, head_dim: int, layers: int = 1, tp: int = 1,
                       kv_dtype: str = "bf16") -> float:
    """Bytes `layers` attention layers cache per token on one GPU: K and V of its KV heads."""
    return 2.0 * layers * kv_heads_per_gpu(kv_heads, tp) * head_dim * BYTES_PER_PARAM[kv_dtype]


def attention_kv_bytes_per_token(model: Model, *, tp: int = 1, kv_dtype: str = "bf16",
                                 kind: str = "full_attention") -> float:
    """Bytes of K and V (or MLA's latent) one attention layer of `kind` caches per token on
    one GPU: what its attention kernel reads per cached token. K is head_dim wide, V
    value_head_dim (equal unless the config says otherwise)."""
    if model.mla is not None:  # one latent per token, replicated on every TP rank
        return model.mla.cache_elems_per_token * BYTES_PER_PARAM[kv_dtype]
    heads = kv_heads_per_gpu(model.kv_heads_of(kind), tp)
    return heads * (model.head_dim + model.value_head_dim) * BYTES_PER_PARAM[kv_dtype]


def attention_layer_kv_bytes_per_token(model: Model, *, tp: int = 1, kv_dtype: str = "bf16"
                                       ) -> float:
    """Bytes one attention layer of `model` caches per token on one GPU: K and V (or MLA's
    latent), plus, in a layer with an indexer of its own, a sparse-attention indexer's keys
    (FP8 whatever the cache dtype, replicated on every TP rank like the latent)."""
    index = model.dsa.index_key_bytes_per_token if model.dsa is not None else 0.0
    return attention_kv_bytes_per_token(model, tp=tp, kv_dtype=kv_dtype) + index


def kv_layout(model: Model, *, tp: int = 1, kv_dtype: str = "bf16", state_dtype: str = "fp32"
              ) -> CacheLayout:
    """Cache layout of a model: its attention layers' K/V and its linear layers' fixed state."""
    kinds = model.layer_types
    per_layer = attention_kv_bytes_per_token(model, tp=tp, kv_dtype=kv_dtype)
    full = kinds.count("full_attention")
    sliding = kinds.count("sliding_attention")
    index = model.num_indexer_layers * model.dsa.index_key_bytes_per_token if model.dsa else 0.0
    segments = [CacheSegment(bytes_per_token=full * per_layer + index)] if full else []
    if sliding:
        per_sliding = attention_kv_bytes_per_token(model, tp=tp, kv_dtype=kv_dtype,
                                                   kind="sliding_attention")
        segments.append(CacheSegment(bytes_per_token=sliding * per_sliding,
                                     window=model.sliding_window))
    fixed = 0.0
    linear = kinds.count("linear_attention")
    if linear and model.linear_attention is not None:
        la = model.linear_attention
        per = la.state_elems * BYTES_PER_PARAM[state_dtype] \
            + la.conv_state_elems * BYTES_PER_PARAM[kv_dtype]
        fixed = linear * per / tp
    mamba = kinds.count("mamba")
    if mamba and model.mamba is not None:  # heads (and their state) split over TP
        mb = model.mamba
        per = mb.state_elems * BYTES_PER_PARAM[state_dtype] \
            + mb.conv_state_elems * BYTES_PER_PARAM[kv_dtype]
        fixed += mamba * per / tp
    return CacheLayout(segments=tuple(segments), fixed_bytes_per_request=fixed)

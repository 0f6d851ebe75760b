"""GPU memory: weights, the target's KV cache, a drafter's cache, activations, max concurrency.

What each request caches (its `CacheLayout`) is `specsim.specs.cache`; this module adds weights
and workspace and finds what fits. All sizes are per GPU of a TP group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError, check_number
from specsim.forward.shapes import BoolArray, FloatArray
from specsim.specs.cache import CacheLayout, kv_layout
from specsim.specs.defaults import DEFAULT_MEMORY_FRACTION as DEFAULT_MEMORY_FRACTION
from specsim.specs.dtypes import BYTES_PER_PARAM, Precision
from specsim.specs.hardware import Hardware
from specsim.specs.models import Model, check_parallel
from specsim.specs.params import param_breakdown, total_params, weight_bytes

if TYPE_CHECKING:
    from specsim.specs.drafters import Drafter

# DEFAULT_MEMORY_FRACTION (vLLM's default `gpu_memory_utilization`, the share of HBM the engine
# may take) is defined in specsim.specs.defaults, which the command line reads without numpy.
# Tokens of the largest pass the engine plans its activation workspace for (vLLM's
# `max_num_batched_tokens` under chunked prefill is of this order; override per engine).
DEFAULT_WORKSPACE_TOKENS = 8192
# vLLM's default `max_num_seqs`: the most sequences scheduled in one pass.
DEFAULT_MAX_SEQS = 256


def check_ep(model: Model, ep: int) -> None:
    """EP must be 1, or divide the routed experts of a mixture-of-experts model
    (`specs.models.check_parallel`, the one check of a parallel layout)."""
    check_parallel(model, ep=ep)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPlan:
    """Memory of serving `requests` concurrent requests at `context` tokens on one GPU.

    Arrays have the shape of `requests`; bytes throughout.
    """

    requests: FloatArray
    context: float
    weights_bytes: float
    drafter_weights_bytes: float
    workspace_bytes: float
    target_kv_bytes: FloatArray
    drafter_kv_bytes: FloatArray
    capacity_bytes: float
    usable_bytes: float
    per_request_bytes: float = 0.0

    @property
    def total_bytes(self) -> FloatArray:
        fixed = self.weights_bytes + self.drafter_weights_bytes + self.workspace_bytes
        return fixed + self.target_kv_bytes + self.drafter_kv_bytes

    @property
    def fits(self) -> BoolArray:
        return self.total_bytes <= self.usable_bytes

    @property
    def max_requests(self) -> int:
        """Most concurrent requests at this context that fit in the usable memory."""
        free = self.usable_bytes - self.weights_bytes - self.drafter_weights_bytes \
            - self.workspace_bytes
        if free < 0:
            return 0
        if self.per_request_bytes <= 0:
            raise SpecError("per-request cache is zero: concurrency is not bounded by memory")
        return int(np.floor(free / self.per_request_bytes))


def workspace_bytes(model: Model, *, tokens: float = DEFAULT_WORKSPACE_TOKENS, tp: int = 1,
                    activation_dtype: str = "bf16") -> float:
    """Peak activations of a pass over `tokens` tokens: one layer's live tensors plus logits.

    Per token: hidden state and residual (2 d), the QKV output (about 2 d) and the MLP's gate
    and up outputs (2 ff / TP; for MoE the k active experts' share), in the activation dtype.
    Logits: fp32 rows for at most DEFAULT_MAX_SEQS positions (a prefill-heavy pass samples one
    position per sequence).
    """
    ab = BYTES_PER_PARAM[activation_dtype]
    ff = model.moe.expert_intermediate_size * model.moe.experts_per_token if model.moe \
        else model.intermediate_size
    per_token = (4.0 * model.hidden_size + 2.0 * ff / tp) * ab
    logits = min(tokens, DEFAULT_MAX_SEQS) * model.vocab_size * 4.0 / tp
    return float(tokens * per_token + logits)


def memory_plan(model: Model, hbm_capacity_bytes: float, requests: ArrayLike,
                context: ArrayLike, *,
                tp: int = 1, drafter_cache: CacheLayout | None = None,
                drafter_weights_bytes: float = 0.0,
                memory_fraction: float = DEFAULT_MEMORY_FRACTION, kv_dtype: str = "bf16",
                weight_bytes_total: float | None = None, ep: int = 1,
                expert_weight_bytes_total: float | None = None) -> MemoryPlan:
    """Memory per GPU for `requests` concurrent requests, each holding `context` tokens.

    context: one length, or a mix of lengths the requests spread over evenly (caches are then
    the mean per request). weight_bytes_total: the target's stored weights, bytes (default: at
    the model's own dtypes). ep: GPUs the routed experts are spread over (1: experts split by
    TP like the rest); expert_weight_bytes_total: the routed experts' share of the stored
    weights (default: at the model's own expert dtype).
    """
    check_number(memory_fraction, "memory_fraction", low=0.0, high=1.0, low_open=True)
    ctx = np.atleast_1d(np.asarray(context, dtype=np.float64))
    if np.any(ctx < 0):
        raise SpecError(f"context must be >= 0, got {ctx.tolist()}")
    r = np.atleast_1d(np.asarray(requests, dtype=np.float64))
    target = kv_layout(model, tp=tp, kv_dtype=kv_dtype).bytes_per_request(ctx).mean()
    drafter = drafter_cache.bytes_per_request(ctx).mean() if drafter_cache else np.float64(0.0)
    total = weight_bytes(model) if weight_bytes_total is None else weight_bytes_total
    experts = expert_weight_bytes(model) if expert_weight_bytes_total is None \
        else expert_weight_bytes_total
    check_ep(model, ep)
    weights = weights_per_gpu_bytes(total, experts, tp=tp, ep=ep)
    return MemoryPlan(
        requests=r, context=float(ctx.mean()), weights_bytes=weights,
        drafter_weights_bytes=drafter_weights_bytes / tp,
        workspace_bytes=workspace_bytes(model, tp=tp),
        target_kv_bytes=r * float(target), drafter_kv_bytes=r * float(drafter),
        capacity_bytes=hbm_capacity_bytes, usable_bytes=memory_fraction * hbm_capacity_bytes,
        per_request_bytes=float(target + drafter))


def expert_weight_bytes(model: Model, weight_dtype: str = "") -> float:
    """Bytes of the routed experts' weights as stored (0 for a dense model)."""
    experts = param_breakdown(model).get("experts", 0.0)
    per_param = BYTES_PER_PARAM[weight_dtype] if weight_dtype else model.expert_bytes_per_param
    return float(experts * per_param)


def weights_per_gpu_bytes(total_bytes: float, expert_bytes: float, *, tp: int, ep: int) -> float:
    """Weight bytes on one GPU: everything split by TP, except that under expert parallelism
    (ep > 1) the routed experts are spread whole over EP GPUs (experts / EP each)."""
    if ep <= 1:
        return total_bytes / tp
    return (total_bytes - expert_bytes) / tp + expert_bytes / ep


def stored_weight_bytes(model: Model, precision: Precision) -> float:
    """Bytes of a model's weights as stored: its own dtypes, or precision.weight_dtype for all."""
    if not precision.weight_dtype:
        return weight_bytes(model)
    return total_params(model) * BYTES_PER_PARAM[precision.weight_dtype]


def _drafter_weight_bytes(drafter: Drafter, precision: Precision) -> float:
    if not precision.weight_dtype:
        return drafter.weight_bytes()
    params = total_params(drafter.model) if drafter.model is not None else drafter.params()
    return params * BYTES_PER_PARAM[precision.weight_dtype]


def serving_memory(model: Model, hw: Hardware, requests: ArrayLike,
                   context: float | tuple[float, ...], *, drafter: Drafter | None = None,
                   tp: int = 1, memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                   precision: Precision | None = None, ep: int = 1) -> MemoryPlan:
    """Memory per GPU of serving a target (and a drafter) at a precision on a GPU.

    The precision sets what the pass time also sees: stored weights (weight_dtype; the drafter
    too, as the drafter's passes are timed with it), and the bytes each cached token takes in
    the target's and the drafter's caches (kv_dtype).
    context: tokens per request, or a mix the requests spread over evenly.
    """
    p = precision or Precision()
    return memory_plan(
        model, hw.hbm_capacity_bytes, requests, context, tp=tp,
        drafter_cache=drafter.cache_layout(tp=tp, kv_dtype=p.kv_dtype) if drafter else None,
        drafter_weights_bytes=_drafter_weight_bytes(drafter, p) if drafter else 0.0,
        memory_fraction=memory_fraction, kv_dtype=p.kv_dtype,
        weight_bytes_total=stored_weight_bytes(model, p), ep=ep,
        expert_weight_bytes_total=expert_weight_bytes(model, p.weight_dtype))

"""T(n): the time of a forward pass, op by op, on one GPU (a tensor-parallel shard).

Each op takes t = max(bytes / bandwidth, flops / peak_flops) (plus a floor once calibrated);
attention over a K/V cache takes the tiled kernel model (`attention_time`) instead where the
profile holds its fitted terms (`efficiency.attention.decode` / `.prefill`), for decode and
prefill chunks of >= 64 tokens (what was measured; verification of fewer keeps the roofline);
the pass takes the sum over ops and layers plus a per-pass overhead. On a datasheet profile
this is the idealized curve of the article: flat while weight reads dominate, linear once the
tokens in the pass exceed the ops:byte ratio. Weight GEMMs go through `gemm_model`, which a
calibrated profile bends to the measured curve.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import check_int, parameter_error
from specsim.forward.attention_time import attention_kernel_time_s
from specsim.forward.gemm import gemm_time_s
from specsim.forward.ops import AttentionKernel, Op, pass_work
from specsim.forward.shapes import (
    BoolArray,
    FloatArray,
    PassShape,
    batch_mix_passes,
    decode_passes,
    uniform_passes,
)
from specsim.specs.defaults import MAX_TREE_NODES
from specsim.specs.dtypes import Precision
from specsim.specs.hardware import AttentionKernels, Hardware, layout_problem
from specsim.specs.models import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCost:
    """An op's work and its time on one GPU; arrays (S,), time per layer instance.

    bandwidth_bytes_per_s, flops_per_s: the effective rates the op ran at, which decide the
    bound that holds (compute when its flops take longer than its bytes).
    """

    op: Op
    time_s: FloatArray
    bandwidth_bytes_per_s: float
    flops_per_s: float

    @property
    def total_time_s(self) -> FloatArray:
        return self.time_s * self.op.layers

    def total(self, field: str) -> FloatArray:
        """An Op byte/flop field over all its layers, (S,)."""
        return np.asarray(getattr(self.op, field) * self.op.layers)

    @property
    def compute_bound(self) -> BoolArray:
        if self.op.op_class in ("communication", "all_to_all"):
            return np.zeros(self.time_s.shape, dtype=bool)
        return np.asarray(self.op.flops / self.flops_per_s > self.op.bytes_
                          / self.bandwidth_bytes_per_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class PassCost:
    """Time of S forward passes, with the per-op records it is made of."""

    ops: tuple[OpCost, ...]
    tokens: FloatArray
    overhead_s: float

    @property
    def tokens_per_s(self) -> FloatArray:
        """Tokens scored per second of pass, (S,)."""
        return np.asarray(self.tokens / self.time_s)

    @property
    def time_s(self) -> FloatArray:
        """Seconds per pass, (S,)."""
        total = np.full(self.tokens.shape, self.overhead_s)
        for c in self.ops:
            total += c.time_s * c.op.layers
        return total

    def total(self, field: str) -> FloatArray:
        """Sum of an Op byte/flop field over ops and layers, (S,)."""
        total: FloatArray = np.sum([getattr(c.op, field) * c.op.layers for c in self.ops], axis=0)
        return total

    @property
    def bytes_(self) -> FloatArray:
        return self.total("bytes_")

    @property
    def flops(self) -> FloatArray:
        return self.total("flops")

    @property
    def compute_bound(self) -> BoolArray:
        """True where compute-bound ops take more of the pass than memory-bound ones, (S,)."""
        compute = np.sum([c.total_time_s * c.compute_bound for c in self.ops], axis=0)
        return np.asarray(compute > 0.5 * (self.time_s - self.overhead_s))

    def by_op(self) -> dict[str, FloatArray]:
        """Seconds per pass spent in each named op (all layers), (S,) each."""
        out: dict[str, FloatArray] = {}
        for c in self.ops:
            out[c.op.name] = out.get(c.op.name, 0.0) + c.total_time_s
        return out


def op_cost(op: Op, hw: Hardware, *, compute_dtype: str = "bf16", tp: int = 1,
            ep: int = 1) -> OpCost:
    """Time one op on `hw`, by its class (collectives over `tp` GPUs, all-to-alls over `ep`)."""
    eff = hw.efficiency
    bw, peak = hw.hbm_bandwidth_bytes_per_s, hw.flops_per_s(compute_dtype)
    if op.op_class == "gemm":
        gemm = eff.gemm
        if op.gemm_count is not None:
            # `count` expert GEMMs run as one grouped kernel (the fused-MoE kernel): one
            # fixed latency for the kernel, not one per expert, and no dense-GEMM tile or wave
            # padding per expert (a few tokens each, which cuBLAS's 64-128-row tiles of the
            # fitted dense model would pad to a full tile per expert: 3.5x the datasheet at 64
            # tokens on Qwen3-30B-A3B); the fused kernel's own fixed cost per layer is the
            # engine's moe_layer_s
            gemm = dataclasses.replace(gemm, floor_s=0.0, tile_fraction=0.0,
                                       wave_fraction=0.0)
        gemm_peak = hw.kernel_flops_per_s(compute_dtype, eff.gemm.flops)
        time = gemm_time_s(
            op.gemm_m, op.gemm_k, op.gemm_n, weight_bytes_per_param=op.weight_bytes_per_param,
            act_bytes_per_elem=op.act_bytes_per_elem, bandwidth_bytes_per_s=bw,
            flops_per_s=gemm_peak, eff=gemm)
        if op.gemm_count is not None:
            time = op.gemm_count * time + eff.gemm.floor_s * (op.gemm_count > 0)
        return OpCost(op=op, time_s=time, bandwidth_bytes_per_s=bw * eff.gemm.bandwidth,
                      flops_per_s=gemm_peak * eff.gemm.flops)
    if op.op_class == "all_to_all":
        return OpCost(op=op, time_s=all_to_all_time_s(op.bytes_, hw, ep),
                      bandwidth_bytes_per_s=hw.interconnect_bandwidth_bytes_per_s,
                      flops_per_s=peak)
    if op.op_class == "communication":
        return OpCost(op=op, time_s=collective_time_s(op.bytes_, hw, tp),
                      bandwidth_bytes_per_s=hw.interconnect_bandwidth_bytes_per_s,
                      flops_per_s=peak)
    roof = eff.attention if op.op_class == "attention" else eff.memory
    peak = hw.kernel_flops_per_s(compute_dtype, roof.flops)
    bytes_ = op.bytes_
    memory_s = bytes_ / (bw * roof.bandwidth)
    compute_s = op.flops / (peak * roof.flops)
    time = np.maximum(memory_s, compute_s)
    if roof.floor_s:
        time = time + roof.floor_s * (bytes_ + op.flops > 0)
    kernels = eff.attention_kernels
    if op.kernel is not None and kernels is not None and hw.sm_count >= 1:
        tiled, covered = tiled_attention_time_s(op.kernel, kernels, bw, peak, hw.sm_count)
        time = np.where(covered, tiled, time)
    return OpCost(op=op, time_s=time, bandwidth_bytes_per_s=bw * roof.bandwidth,
                  flops_per_s=peak * roof.flops)


# Share of the link's per-direction bandwidth an all-reduce's ring streams at, for the
# messages past an engine's measured custom all-reduce (the bytes of prefill chunks and wide
# verification passes) and wherever a TP degree has no measurement. Fitted on Vidur's NCCL
# all-reduce of 1-67 MB on one DGX A100 (../shared/data/vidur_profiles/network/
# all_reduce_a100.csv, 865 sizes per degree): time = latency + 2 (n - 1)/n bytes / (f x 300
# GB/s) gives f = 0.564 / 0.571 / 0.538 on 2 / 4 / 8 GPUs (median residual 1.6 / 5.5 / 8.0%);
# the 8-GPU value, the degree large models serve at. Transferred to other links as a
# fraction: NCCL's ring protocol, not the link, sets it (tests/test_engine_terms.py).
RING_BANDWIDTH_FRACTION = 0.538

# Fewest queries per request the prefill kernel's terms are used for: one full query tile,
# the smallest prefill chunk of the measured table (Vidur's A100 attention: 64 to 4,096).
MIN_PREFILL_QUERIES = 64.0


def tiled_attention_time_s(kernel: AttentionKernel, kernels: AttentionKernels,
                           bandwidth_bytes_per_s: float, flops_per_s: float, sm_count: int
                           ) -> tuple[FloatArray, BoolArray]:
    """Seconds of one layer's attention by the tiled model, (S,): per group of identical
    requests one kernel (decode terms where each request scores one token, the prefill
    kernel's causal terms where it scores a prefill chunk), summed over the groups; and
    where the model covers every group of the pass, (S,). Verification of 2-63 tokens per
    request was not measured (the prefill table starts at 64 queries of one request): those
    passes keep the roofline."""
    s = kernel.shape
    common: dict[str, Any] = {"q_heads": kernel.q_heads, "kv_heads": kernel.kv_heads,
              "head_dim": kernel.head_dim, "bandwidth_bytes_per_s": bandwidth_bytes_per_s,
              "flops_per_s": flops_per_s, "sm_count": sm_count,
              "act_bytes": kernel.kv_elem_bytes}
    context = np.minimum(s.contexts, kernel.window)
    decode = attention_kernel_time_s(s.counts, context, 1.0, causal=False, eff=kernels.decode,
                                     **common)
    prefill = attention_kernel_time_s(s.counts, context, np.maximum(s.queries, 1.0),
                                      causal=True, eff=kernels.prefill, **common)
    per_group = np.where(s.queries > 1.0, prefill, decode)
    active = (s.counts > 0.0) & (s.queries > 0.0)
    measured = (s.queries == 1.0) | (s.queries >= MIN_PREFILL_QUERIES)
    covered = np.all(measured | ~active, axis=1)
    time = np.where(active, per_group, 0.0).sum(axis=1)
    return np.asarray(time, dtype=np.float64), np.asarray(covered)


def pass_cost(model: Model, hw: Hardware, shape: PassShape, *, tp: int = 1,
              precision: Precision | None = None, ep: int = 1) -> PassCost:
    """Time S forward passes of `model` on `hw` with TP-way tensor parallelism (and the routed
    experts spread over `ep` GPUs). A layout the model's dimensions do not divide, then one
    that does not fit the GPU's interconnect (`check_layout`), is refused naming the option."""
    precision = precision or Precision()
    ops = pass_work(model, shape, tp=tp, precision=precision, ep=ep)
    check_layout(hw, tp, ep)
    costs = tuple(op_cost(op, hw, compute_dtype=precision.compute_dtype, tp=tp, ep=ep)
                  for op in ops)
    return PassCost(ops=costs, tokens=shape.tokens, overhead_s=hw.efficiency.pass_overhead_s)


def check_layout(hw: Hardware, tp: int, ep: int = 1) -> None:
    """SpecError naming --tp (or --ep, where the expert group is the wider one) when a replica
    of TP `tp` and EP `ep` does not fit the GPU's interconnect (`specs.hardware.layout_problem`)."""
    problem = layout_problem(hw, tp, ep)
    if problem is not None:
        raise parameter_error("ep" if ep > tp else "tp", problem)


def all_to_all_time_s(bytes_: FloatArray, hw: Hardware, ep: int = 1) -> FloatArray:
    """One all-to-all in which each GPU sends `bytes_` to the other EP - 1 GPUs of its group.

    Within one scale-up domain (EP <= the profile's `node.scale_up_gpus`): latency + bytes /
    link bandwidth. Across domains the share bound for the d - 1 peers of its own domain,
    (d - 1)/(EP - 1), goes over the link while the rest, (EP - d)/(EP - 1), leaves over the
    GPU's own NIC at the same time; a token bound for another node crosses the NIC and then
    the peer's link (DeepEP's RDMA-then-NVLink path), so both latencies are paid:
    t = latency + network latency + max(inside / link bandwidth, outside / NIC bandwidth)."""
    b = np.asarray(bytes_, dtype=np.float64)
    node, d = hw.node, hw.scale_up_gpus
    if node is None or ep <= d:
        return np.asarray(hw.interconnect_latency_s + b / hw.group_bandwidth(ep),
                          dtype=np.float64)
    inside_s = b * (d - 1) / (ep - 1) / hw.interconnect_bandwidth_bytes_per_s
    outside_s = b * (ep - d) / (ep - 1) / node.network_bandwidth_bytes_per_s
    return np.asarray(hw.interconnect_latency_s + node.network_latency_s
                      + np.maximum(inside_s, outside_s), dtype=np.float64)


def collective_time_s(bytes_: FloatArray, hw: Hardware, tp: int) -> FloatArray:
    """All-reduce of `bytes_` over `tp` GPUs.

    Within one scale-up domain (TP <= the profile's `node.scale_up_gpus`, every TP without a
    `node` block): `domain_allreduce_s`. Past it, hierarchically (NCCL's tree/ring over nodes):
    the d GPUs of each domain reduce-scatter and later all-gather over the link (together one
    all-reduce at degree d, priced as above), and between them each GPU all-reduces its 1/d
    share with its peers of the other n = TP/d domains over its own NIC, a ring:
    network latency + 2 (n - 1)/n x (bytes / d) / NIC bandwidth."""
    if tp <= 1:
        return np.zeros_like(bytes_)
    node, d = hw.node, hw.scale_up_gpus
    if node is None or tp <= d:
        return domain_allreduce_s(bytes_, hw, tp)
    n = tp / d
    network = 2.0 * (n - 1.0) / n * np.asarray(bytes_, dtype=np.float64) / d \
        / node.network_bandwidth_bytes_per_s
    return np.asarray(domain_allreduce_s(bytes_, hw, d) + node.network_latency_s + network,
                      dtype=np.float64)


def domain_allreduce_s(bytes_: FloatArray, hw: Hardware, tp: int) -> FloatArray:
    """All-reduce of `bytes_` over `tp` GPUs of one scale-up domain.

    Where the profile has the serving engines' measured all-reduce at this TP degree
    (`Hardware.allreduce_s`), its time at that message size: linear between the measured
    sizes and the smallest size's time below them; past the largest the engines hand the
    message to NCCL, whose ring takes the extra bytes at RING_BANDWIDTH_FRACTION of the link.
    Otherwise NCCL's ring throughout: latency + 2 (tp - 1)/tp bytes / (RING_BANDWIDTH_FRACTION x
    link bandwidth). The link bandwidth is the group's (`Hardware.group_bandwidth`): on a
    fully connected mesh a group of tp GPUs has tp - 1 of its links."""
    if tp <= 1:
        return np.zeros_like(bytes_)
    points = hw.allreduce_s.get(tp)
    if points:
        sizes, times = (np.array(p, dtype=np.float64) for p in zip(*points, strict=True))
        b = np.asarray(bytes_, dtype=np.float64)
        slope = 2.0 * (tp - 1) / tp / (RING_BANDWIDTH_FRACTION * hw.group_bandwidth(tp))
        beyond = times[-1] + slope * (b - sizes[-1])
        return np.asarray(np.where(b > sizes[-1], beyond, np.interp(b, sizes, times)),
                          dtype=np.float64)
    ring = 2.0 * (tp - 1) / tp * bytes_ / (RING_BANDWIDTH_FRACTION * hw.group_bandwidth(tp))
    return np.asarray(hw.interconnect_latency_s + ring, dtype=np.float64)


def forward_time_s(model: Model, hw: Hardware, tokens: ArrayLike, *, context: ArrayLike = 0.0,
                   tokens_per_request: ArrayLike = 1.0, tp: int = 1,
                   precision: Precision | None = None, ep: int = 1) -> FloatArray:
    """T(n): seconds of a pass scoring n tokens in total, `tokens_per_request` per request.

    tokens: n, scalar or (S,); requests = n / tokens_per_request (fractional in expectation);
    context: cached tokens per request. Returns seconds, shape (S,).
    """
    n = np.atleast_1d(np.asarray(tokens, dtype=np.float64))
    q = np.asarray(tokens_per_request, dtype=np.float64)
    shape = uniform_passes(q, n / q, context)
    return pass_cost(model, hw, shape, tp=tp, precision=precision, ep=ep).time_s


def roofline(model: Model, hw: Hardware, tokens: ArrayLike, *,
             context: float | tuple[float, ...] = 0.0, queries: int = 1, tp: int = 1,
             precision: Precision | None = None, ep: int = 1) -> PassCost:
    """The passes of a T(n) sweep: n tokens scored per pass, `queries` per request.

    tokens: n, (S,); requests per pass = n / queries (fractional in expectation); context:
    cached tokens per request, or a mix of lengths the requests spread over evenly.
    """
    check_int(queries, "queries", low=1, high=MAX_TREE_NODES + 1)
    n = np.atleast_1d(np.asarray(tokens, dtype=np.float64))
    contexts = np.atleast_1d(np.asarray(context, dtype=np.float64))
    shape = batch_mix_passes(float(queries), n / queries, contexts)
    return pass_cost(model, hw, shape, tp=tp, precision=precision, ep=ep)


def decode_time_s(model: Model, hw: Hardware, batch: ArrayLike, *, context: ArrayLike = 0.0,
                  tp: int = 1, precision: Precision | None = None, ep: int = 1) -> FloatArray:
    """Seconds of one plain decoding step for `batch` requests at `context` cached tokens."""
    return pass_cost(model, hw, decode_passes(batch, context), tp=tp, precision=precision,
                     ep=ep).time_s


def knee_tokens(model: Model, hw: Hardware, *, context: float = 0.0, tp: int = 1,
                precision: Precision | None = None, max_tokens: int = 1 << 16) -> int:
    """Smallest n at which the pass turns compute-bound (0 if it never does up to max_tokens)."""
    n = np.arange(1, max_tokens + 1, dtype=np.float64)
    shape = uniform_passes(1.0, n, context)
    bound = pass_cost(model, hw, shape, tp=tp, precision=precision).compute_bound
    hits = np.flatnonzero(bound)
    return int(n[hits[0]]) if hits.size else 0

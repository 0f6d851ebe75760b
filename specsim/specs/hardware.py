"""GPU hardware profiles: datasheet numbers plus the efficiency factors calibration fills in.

A profile straight from a datasheet has ideal efficiencies (1.0) and no overheads, so the
roofline built on it is the idealized curve of the article. `specsim calibrate` writes a
profile whose `efficiency` block holds factors fitted to measured kernel timings.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsim.errors import SpecError
from specsim.specs.defaults import MAX_TP
from specsim.specs.fields import Fields, show
from specsim.specs.gemm_efficiency import GemmEfficiency as GemmEfficiency
from specsim.specs.gemm_efficiency import check_positive as check_positive
from specsim.specs.io import SpecFile, read_spec_file
from specsim.specs.names import read_display_name
from specsim.specs.paths import probe, resolve_path
from specsim.specs.transferred import KERNEL_MODEL_PROFILE
from specsim.specs.transferred import SOURCE as TRANSFERRED_SOURCE

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
GB = 1e9
TFLOPS = 1e12
US = 1e-6
GBIT = 1e9 / 8  # bytes/s in one Gb/s (network rates are quoted in bits)
# GPUs a replica may span: far above any deployed NVLink domain or expert-parallel group.
MAX_NODE_GPUS = 576
# Datasheet numbers past any GPU by two orders of magnitude (the largest built-in: 288 GB, 8 TB/s,
# 15,000 dense TFLOPS, 900 GB/s of link, 304 SMs): a unit slip (bytes for GB, FLOPS for TFLOPS)
# or a typo, refused naming the field rather than priced.
MAX_HBM_GB = 1e5
MAX_BANDWIDTH_GB_PER_S = 1e6
MAX_TFLOPS = 1e7
MAX_LATENCY_US = 1e6  # a second per collective
MAX_SM_COUNT = 100_000
MAX_MESH_LINKS = MAX_NODE_GPUS - 1  # a fully connected mesh links each GPU to all others


@dataclass(frozen=True, slots=True, kw_only=True)
class OpEfficiency:
    """Achieved fraction of datasheet bandwidth and flops for one op class, plus a time floor.

    bandwidth, flops: fractions in (0, 1.5] (1.0 = datasheet); floor_s: seconds added per op
    (kernel launch and tail), 0 = ideal.
    """

    bandwidth: float = 1.0
    flops: float = 1.0
    floor_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("bandwidth", "flops"):
            value = getattr(self, name)
            if not 0 < value <= 1.5:
                raise SpecError(f"field '{name}' must be in (0, 1.5], got {value!r}")
        if self.floor_s < 0:
            raise SpecError(f"field 'floor_s' must be >= 0, got {self.floor_s!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionKernelEfficiency:
    """Fitted terms of the tiled attention-time model (defaults: ideal, no overheads).

    Attributes:
        bandwidth: share of the datasheet HBM bandwidth all SMs together reach, (0, 1].
        flops: share of the datasheet peak flops, (0, 1].
        sm_bandwidth: bandwidth one CTA reaches when the HBM is not the limit (latency bound:
            the loads it keeps in flight), in units of (datasheet bandwidth / sm_count), > 0
            (inf: one CTA alone can use the whole bandwidth).
        floor_s: fixed time of the kernel (launch, tail), s.
        cta_s: fixed time per CTA in a wave (prologue: load Q, epilogue: write O), s.
        combine_s: time of the split-KV path's combine kernel, s.
        causal_skip: share of the fully masked key blocks a causal kernel skips, [0, 1].
        split_keys: key length the split heuristic sees when the launch is padded (the
            block table's width, e.g. a serving engine's maximum model length), tokens,
            >= 0 (0: the real keys).
    """

    bandwidth: float = 1.0
    flops: float = 1.0
    sm_bandwidth: float = math.inf
    floor_s: float = 0.0
    cta_s: float = 0.0
    combine_s: float = 0.0
    causal_skip: float = 1.0
    split_keys: float = 0.0

    def __post_init__(self) -> None:
        where = "AttentionKernelEfficiency"
        for name in ("bandwidth", "flops"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise SpecError(f"{where}.{name} = {getattr(self, name)!r}: need 0 < value <= 1")
        if not self.sm_bandwidth > 0.0:
            raise SpecError(f"{where}.sm_bandwidth = {self.sm_bandwidth!r}: need a number > 0")
        for name in ("floor_s", "cta_s", "combine_s", "split_keys"):
            check_positive(f"{where}.{name}", getattr(self, name), allow_zero=True)
        if not 0.0 <= self.causal_skip <= 1.0:
            raise SpecError(f"{where}.causal_skip = {self.causal_skip!r}: need 0 <= value <= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionKernels:
    """The tiled attention-time model's fitted terms for the two kernels a pass runs.

    decode: one query per request (FlashAttention's split-KV path, grouped query heads as the
    rows of one CTA); prefill: several causal queries per request (prefill chunks, and
    speculative verification of drafted tokens). See `specsim.forward.attention_time`.
    """

    decode: AttentionKernelEfficiency
    prefill: AttentionKernelEfficiency


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """Calibrated factors per op class; the defaults are the ideal datasheet roofline.

    gemm: weight GEMMs; attention: attention kernels; memory: elementwise, sampling and state
    traffic; pass_overhead_s: fixed time per forward pass (launches, scheduling), seconds;
    tree_attention_slowdown: time of tree-masked over causal attention of the same shape (trees
    fall off the fast causal kernels), 1.0 = no penalty; attention_kernels: the tiled
    attention model's terms where they were fitted (None: attention takes the roofline with
    `attention`'s fractions, the idealized one on a datasheet profile).
    """

    gemm: GemmEfficiency = field(default_factory=GemmEfficiency)
    attention: OpEfficiency = field(default_factory=OpEfficiency)
    attention_kernels: AttentionKernels | None = None
    memory: OpEfficiency = field(default_factory=OpEfficiency)
    pass_overhead_s: float = 0.0
    tree_attention_slowdown: float = 1.0

    def __post_init__(self) -> None:
        if not self.tree_attention_slowdown >= 1.0 / 1.5:
            raise SpecError("field 'tree_attention_slowdown' must be >= 0.67, got "
                            f"{self.tree_attention_slowdown!r}")

    @property
    def is_ideal(self) -> bool:
        return self == Efficiency()


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """The machine a GPU sits in and the network between machines (the profile's `node`).

    gpus: GPUs per node (one host or compute tray); scale_up_gpus: GPUs the `interconnect`
    (NVLink/NVSwitch, xGMI) links into one domain: the node's on an 8-GPU HGX or MI300X
    platform, 72 on a GB200/GB300 NVL72 rack of 4-GPU trays; network_name: the scale-out NIC;
    network_bandwidth_bytes_per_s: what ONE GPU sends over it per direction (its own NIC on a
    rail-optimized fabric), bytes/s; network_latency_s: a small-message all-reduce between
    nodes (one GPU each), s.
    """

    gpus: int
    scale_up_gpus: int
    network_name: str
    network_bandwidth_bytes_per_s: float
    network_latency_s: float

    def __post_init__(self) -> None:
        for name in ("gpus", "scale_up_gpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not 1 <= value <= MAX_NODE_GPUS:
                raise SpecError(f"field 'node.{name}' must be an integer in 1..{MAX_NODE_GPUS}, "
                                f"got {value!r}")
        if self.scale_up_gpus % self.gpus:
            raise SpecError(f"field 'node.scale_up_gpus' = {self.scale_up_gpus} must be a whole "
                            f"number of nodes of {self.gpus} GPUs")
        if not self.network_bandwidth_bytes_per_s > 0:
            raise SpecError("field 'node.network.bandwidth_Gb_per_s' must be > 0")
        if not self.network_latency_s >= 0:
            raise SpecError("field 'node.network.latency_us' must be >= 0")


def _same_rate(dtype: str) -> tuple[str, str]:
    """The dtype and the one tensor cores run at the same rate (bf16 and fp16)."""
    return dtype, {"bf16": "fp16", "fp16": "bf16"}.get(dtype, dtype)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hardware:
    """One GPU (or accelerator) as the roofline sees it. SI units throughout."""

    slug: str
    name: str
    vendor: str
    hbm_capacity_bytes: float
    hbm_bandwidth_bytes_per_s: float
    peak_flops_per_s: Mapping[str, float]
    interconnect_name: str
    interconnect_bandwidth_bytes_per_s: float
    interconnect_latency_s: float
    pcie_bandwidth_bytes_per_s: float
    sm_count: int = 0  # streaming multiprocessors / compute units; 0 = unknown
    # Measured max-achievable dense flop/s per dtype (a vendor's large-GEMM benchmark); where
    # given, a datasheet profile's compute-bound kernels run at it instead of the transferred
    # flops fraction (`transferred_hardware`). Empty: none measured.
    achievable_flops_per_s: Mapping[str, float] = field(default_factory=dict)
    # Measured time of the serving engines' all-reduce (their custom one-kernel all-reduce)
    # per TP degree: ((message bytes, seconds), ...) ascending in bytes. A TP degree without
    # points is priced as latency + ring traffic over the link (`interconnect_latency_s`).
    allreduce_s: Mapping[int, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    # Links of a fully connected mesh (AMD's xGMI: one link to each of 7 peers), over which
    # `interconnect_bandwidth_bytes_per_s` is the sum; 0: a switch (NVSwitch), which gives a
    # collective over any number of the domain's GPUs the whole bandwidth (`group_bandwidth`).
    mesh_links: int = 0
    efficiency: Efficiency = field(default_factory=Efficiency)
    # The node and the network between nodes; None: not given (every collective is priced
    # over `interconnect`, and a layout past 8 GPUs is refused: `layout_problem`).
    node: Node | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    path: str = ""

    def __post_init__(self) -> None:
        for name in ("hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s",
                     "interconnect_bandwidth_bytes_per_s", "pcie_bandwidth_bytes_per_s"):
            if not getattr(self, name) > 0:
                raise SpecError(f"{self.path}: '{name}' must be > 0, got {getattr(self, name)!r}")
        if not self.peak_flops_per_s:
            raise SpecError(f"{self.path}: no peak flops given")
        # one link per peer: 575 links on an 8-GPU board left a TP 8 group 7/575 of the bandwidth
        domain = self.node.scale_up_gpus if self.node is not None else DEFAULT_NODE_GPUS
        if self.mesh_links > domain - 1:
            raise SpecError(f"{self.path}: field 'interconnect.mesh_links' = {self.mesh_links} "
                            f"exceeds the {domain - 1} peers of a GPU in its {domain}-GPU domain "
                            "(a fully connected mesh has one link per peer)")

    def group_bandwidth(self, gpus: int) -> float:
        """Per-direction bandwidth one GPU has to the others of a group of `gpus` inside the
        domain: the whole link through a switch; on a fully connected mesh only the links to
        the group's other GPUs carry its traffic, (gpus - 1) of the `mesh_links`."""
        if self.mesh_links < 1:
            return self.interconnect_bandwidth_bytes_per_s
        peers = min(max(gpus - 1, 1), self.mesh_links)
        return self.interconnect_bandwidth_bytes_per_s * peers / self.mesh_links

    def flops_per_s(self, dtype: str) -> float:
        """Dense peak flop/s for a compute dtype; falls back from bf16 to fp16 and vice versa."""
        for candidate in _same_rate(dtype):
            if candidate in self.peak_flops_per_s:
                return self.peak_flops_per_s[candidate]
        have = ", ".join(self.peak_flops_per_s)
        raise SpecError(f"{self.name} has no {dtype} peak flops (has: {have})")

    def kernel_flops_per_s(self, dtype: str, fraction: float) -> float:
        """The peak flop/s a kernel model running at `fraction` of it divides by: the dense
        datasheet peak, or, where the profile has a measured max-achievable rate for the dtype
        and a kernel model (not the idealized GPU), that rate / fraction, so that compute-bound
        kernels run at the measured rate."""
        # (a measured rate first: most profiles have none, and op_cost asks for every op)
        if self.achievable_flops_per_s and not self.efficiency.is_ideal:
            for candidate in _same_rate(dtype):
                if candidate in self.achievable_flops_per_s:
                    return self.achievable_flops_per_s[candidate] / fraction
        return self.flops_per_s(dtype)

    @property
    def ops_per_byte(self) -> float:
        """Datasheet bf16 ops:byte ratio, the knee of the ideal roofline in tokens."""
        return self.flops_per_s("bf16") / self.hbm_bandwidth_bytes_per_s

    @property
    def is_calibrated(self) -> bool:
        return not self.efficiency.is_ideal

    @property
    def scale_up_gpus(self) -> int:
        """GPUs one `interconnect` domain links (no `node` block: every GPU of a layout, the
        pricing of every profile before the block existed)."""
        return self.node.scale_up_gpus if self.node is not None else MAX_NODE_GPUS

    @property
    def gpus_per_node(self) -> int:
        """GPUs one machine holds: the `node` block's, else the 8-GPU board of every HGX and
        MI300-series platform (DEFAULT_NODE_GPUS), over which a launch spreads its commands."""
        return self.node.gpus if self.node is not None else DEFAULT_NODE_GPUS


# GPUs per node assumed where a profile has no `node` block: the 8-GPU board of every HGX and
# MI300-series platform; a layout past it is refused rather than priced as one NVLink domain.
DEFAULT_NODE_GPUS = 8


def layout_problem(hw: Hardware, tp: int, ep: int = 1) -> str | None:
    """Why a replica of TP `tp` and EP `ep` (max(tp, ep) GPUs) does not fit the GPU's
    interconnect, or None: past one node without a `node` block (no network to price), past
    one scale-up domain in a number of GPUs that is not whole nodes, or an EP group that is not
    whole TP groups (vLLM: EP = TP x DP)."""
    gpus = max(tp, ep)
    where = hw.path or hw.name
    if ep > 1 and ep % tp and tp % ep:
        return (f"expert parallel degree {ep} and tensor parallel degree {tp} must divide one "
                "another")
    if hw.node is None:
        if gpus > DEFAULT_NODE_GPUS:
            return (f"a layout of {gpus} GPUs (TP {tp}, EP {ep}) spans nodes, and {where} has no "
                    "'node' block (GPUs per node, the network between nodes) to price it")
        return None
    node = hw.node
    if gpus > node.scale_up_gpus and gpus % node.gpus:
        return (f"a layout of {gpus} GPUs (TP {tp}, EP {ep}) spans more than the "
                f"{node.scale_up_gpus}-GPU {hw.interconnect_name} domain of {where} and is not "
                f"a whole number of its {node.gpus}-GPU nodes")
    return None


TRANSFERRED_PREFIX = "transferred/"


@functools.lru_cache(maxsize=1)
def _kernel_model_gemm() -> GemmEfficiency:
    return load_hardware(KERNEL_MODEL_PROFILE).efficiency.gemm


def datasheet_gemm(sm_count: int) -> GemmEfficiency:
    """The GEMM model a datasheet GPU with `sm_count` SMs runs its kernels on: the calibrated
    A100's (specs.transferred.KERNEL_MODEL_PROFILE) with the GPU's own SM count (0: unknown,
    no wave term)."""
    gemm = _kernel_model_gemm()
    if sm_count < 1:
        return dataclasses.replace(gemm, sm_count=0, wave_fraction=0.0)
    return dataclasses.replace(gemm, sm_count=sm_count)


def transferred_hardware(hw: Hardware) -> Hardware:
    """A datasheet profile with the transferred kernel efficiency (specs.transferred): the
    calibrated A100's GEMM model with the GPU's own SM count (`datasheet_gemm`), and attention
    and memory-class kernels at its bandwidth and flops fractions (they stream HBM and run the
    tensor cores as the GEMMs do). A dtype with a measured max-achievable rate
    (`achievable_flops_per_s`) keeps it (`Hardware.kernel_flops_per_s`)."""
    gemm = datasheet_gemm(hw.sm_count)
    roof = OpEfficiency(bandwidth=gemm.bandwidth, flops=gemm.flops)
    return dataclasses.replace(hw, slug=f"{TRANSFERRED_PREFIX}{hw.slug}",
                               name=f"{hw.name} (transferred efficiencies)",
                               efficiency=Efficiency(gemm=gemm, attention=roof, memory=roof),
                               sources={**hw.sources, "efficiency": TRANSFERRED_SOURCE})


def kernel_profile(hw: Hardware) -> Hardware:
    """The profile whose kernel model prices `hw` as a GPU runs it: the GPU's one kernel
    efficiency, which every engine, the plan's T(n) and every price use. A calibrated (or
    transferred) profile carries its own; a datasheet profile gets the transferred one
    (`transferred_hardware`, the same kernels as `--hardware transferred/<slug>`)."""
    return hw if hw.is_calibrated else transferred_hardware(hw)


def load_hardware(name: str) -> Hardware:
    """Load a built-in profile by slug (e.g. `h100-sxm`) or a YAML file by path.

    `transferred/<slug or path>`: the datasheet profile with the GEMM efficiencies transferred
    from the measured GPUs (specsim.specs.transferred), for a GPU without measurements.
    """
    if name.startswith(TRANSFERRED_PREFIX) and not probe(Path(name), "exists"):
        if not name.removeprefix(TRANSFERRED_PREFIX).strip():
            raise SpecError(f"hardware '{name}': name a GPU after {TRANSFERRED_PREFIX} (e.g. "
                            f"{TRANSFERRED_PREFIX}h100-sxm; see `specsim hardware list`)")
        datasheet = load_hardware(name.removeprefix(TRANSFERRED_PREFIX))
        if datasheet.is_calibrated:
            raise SpecError(f"hardware '{name}': {datasheet.slug} is already calibrated; "
                            "transfer onto a datasheet profile")
        return transferred_hardware(datasheet)
    path = resolve_path("hardware", name)
    slug = f"calibrated/{path.stem}" if path.parent.name == "calibrated" else path.stem
    return hardware_from_file(read_spec_file(path), slug=slug)


def hardware_from_file(spec: SpecFile, *, slug: str) -> Hardware:
    """Build a Hardware from a parsed spec file, converting the YAML's units to SI once."""
    f = Fields(spec.data, spec.path)
    memory = _sub(f, "memory")
    compute = _sub(f, "compute")
    link = _sub(f, "interconnect")
    pcie = _sub(f, "pcie")
    dense = _sub(compute, "dense_TFLOPS")
    read_display_name(pcie, "name", "PCIe")  # documentation only (e.g. "PCIe Gen5 x16")
    unknown = [k for k in dense.keys() if k not in DTYPES]
    if unknown:
        raise dense.error(unknown[0], f"is not a known dtype ({', '.join(DTYPES)})")
    try:
        hardware = Hardware(
            slug=slug,
            name=read_display_name(f),
            vendor=read_display_name(f, "vendor", "unknown"),
            hbm_capacity_bytes=memory.number("hbm_capacity_GB", positive=True,
                                             maximum=MAX_HBM_GB) * GB,
            hbm_bandwidth_bytes_per_s=memory.number("hbm_bandwidth_GB_per_s", positive=True,
                                                    maximum=MAX_BANDWIDTH_GB_PER_S) * GB,
            peak_flops_per_s={k: dense.number(k, positive=True, maximum=MAX_TFLOPS) * TFLOPS
                              for k in dense.keys()},
            interconnect_name=read_display_name(link, "name", "interconnect"),
            interconnect_bandwidth_bytes_per_s=link.number(
                "bandwidth_GB_per_s", positive=True, maximum=MAX_BANDWIDTH_GB_PER_S) * GB,
            interconnect_latency_s=link.number("latency_us", minimum=0.0,
                                               maximum=MAX_LATENCY_US) * US,
            pcie_bandwidth_bytes_per_s=pcie.number("bandwidth_GB_per_s", positive=True,
                                                   maximum=MAX_BANDWIDTH_GB_PER_S) * GB,
            sm_count=compute.integer("sm_count", 0, maximum=MAX_SM_COUNT),
            achievable_flops_per_s=_achievable(compute, dense),
            allreduce_s=_allreduce(link.sub("allreduce_us", required=False)),
            mesh_links=link.integer("mesh_links", 0, maximum=MAX_MESH_LINKS),
            efficiency=_efficiency(f.sub("efficiency", required=False)),
            node=_node(f.sub("node", required=False)),
            sources=spec.sources,
            path=spec.path,
        )
        f.check_unknown()
        return hardware
    except SpecError as err:
        message = str(err)
        raise SpecError(message if message.startswith(spec.path) else f"{spec.path}: {message}") \
            from None


def _allreduce(block: Fields | None) -> dict[int, tuple[tuple[float, float], ...]]:
    """`interconnect.allreduce_us`: per TP degree (keys tp2, tp4, ...) a list of [message
    bytes, measured microseconds] pairs, at least two sizes each; seconds, ascending in bytes."""
    if block is None:
        return {}
    out: dict[int, tuple[tuple[float, float], ...]] = {}
    for key in block.keys():
        # a degree past MAX_TP is one no --tp can reach
        degree = block.numbered_key(key, "tp", 2, MAX_TP, f"must be tp<N> with N >= 2 GPUs, at "
                                    f"most {MAX_TP} (e.g. tp8)")
        points = block.value(key)
        if not isinstance(points, list) or len(points) < 2:
            raise block.error(key, "must list at least two [message bytes, microseconds] pairs")
        pairs = []
        for point in points:
            if not (isinstance(point, list) and len(point) == 2
                    and all(_is_positive(x) for x in point)):
                raise block.error(key, f"has {show(point)}: each point must be [message bytes, "
                                  "microseconds], both positive numbers")
            pairs.append((float(point[0]), float(point[1]) * US))
        if len({size for size, _ in pairs}) < len(pairs):
            raise block.error(key, "lists a message size twice")
        out[degree] = tuple(sorted(pairs))
    return out


def _node(f: Fields | None) -> Node | None:
    """`node`: GPUs per node, GPUs per scale-up domain (default: the node's) and the scale-out
    `network` per GPU (bandwidth in Gb/s per direction, latency in us); converted to SI."""
    if f is None:
        return None
    net = f.sub("network")
    assert net is not None  # required=True raises instead of returning None
    gpus = f.integer("gpus", minimum=1, maximum=MAX_NODE_GPUS)
    return Node(gpus=gpus,
                scale_up_gpus=f.integer("scale_up_gpus", gpus, minimum=1, maximum=MAX_NODE_GPUS),
                network_name=read_display_name(net, "name", "network"),
                network_bandwidth_bytes_per_s=net.number(
                    "bandwidth_Gb_per_s", positive=True, maximum=8 * MAX_BANDWIDTH_GB_PER_S)
                * GBIT,
                network_latency_s=net.number("latency_us", minimum=0.0,
                                             maximum=MAX_LATENCY_US) * US)


def _is_positive(x: object) -> bool:
    return (isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            and x > 0)


def _achievable(compute: Fields, dense: Fields) -> dict[str, float]:
    """`compute.achievable_TFLOPS` (measured max-achievable dense flops per dtype), in flop/s:
    each a dtype of `dense_TFLOPS` and no more than its peak."""
    block = compute.sub("achievable_TFLOPS", required=False)
    if block is None:
        return {}
    out = {}
    for k in block.keys():
        if k not in dense.keys():
            raise block.error(k, "has no dense_TFLOPS peak of that dtype to compare it with")
        value = block.number(k, positive=True)
        if value > dense.number(k, positive=True):
            raise block.error(k, f"= {value:g} exceeds the dense peak "
                              f"{dense.number(k, positive=True):g}")
        out[k] = value * TFLOPS
    return out


def _sub(f: Fields, key: str) -> Fields:
    sub = f.sub(key)
    assert sub is not None  # required=True raises instead of returning None
    return sub


# Sub-blocks of `efficiency.attention` holding the tiled model's terms, one per kernel.
_KERNELS = ("decode", "prefill")


def _efficiency(f: Fields | None) -> Efficiency:
    if f is None:
        return Efficiency()
    attention = f.sub("attention", required=False)
    return Efficiency(
        gemm=_dataclass_from(GemmEfficiency, f.sub("gemm", required=False)),
        attention=_dataclass_from(OpEfficiency, attention, skip=_KERNELS),
        attention_kernels=_attention_kernels(attention),
        memory=_dataclass_from(OpEfficiency, f.sub("memory", required=False)),
        pass_overhead_s=f.number("pass_overhead_s", 0.0, minimum=0.0),
        tree_attention_slowdown=f.number("tree_attention_slowdown", 1.0, positive=True),
    )


def _attention_kernels(f: Fields | None) -> AttentionKernels | None:
    """The tiled model's terms: both `decode` and `prefill` sub-blocks, or neither."""
    if f is None or not any(f.has(k) for k in _KERNELS):
        return None
    missing = [k for k in _KERNELS if not f.has(k)]
    if missing:
        raise f.error(missing[0], "is missing: the tiled attention model needs both "
                      f"{' and '.join(_KERNELS)} blocks")
    return AttentionKernels(
        decode=_dataclass_from(AttentionKernelEfficiency, f.sub("decode")),
        prefill=_dataclass_from(AttentionKernelEfficiency, f.sub("prefill")))


def _dataclass_from(cls: Any, f: Fields | None, skip: tuple[str, ...] = ()) -> Any:
    """Build an efficiency dataclass from a YAML block whose keys are its field names.

    Values may be .inf where the dataclass allows it (a hard max in the GEMM model); integer
    fields get integers. The dataclass validates ranges itself. Keys in `skip` are sub-blocks
    read elsewhere.
    """
    if f is None:
        return cls()
    types = {fld.name: fld.type for fld in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key in f.keys():
        if key in skip:
            continue
        if key not in types:
            raise f.error(key, f"is not a field of {cls.__name__} ({', '.join(sorted(types))})")
        raw = f.value(key)
        if not isinstance(raw, int | float) or isinstance(raw, bool):
            raise f.error(key, f"must be a number, got {show(raw)}")
        if types[key] in (int, "int"):
            if not float(raw).is_integer():
                raise f.error(key, f"must be an integer, got {raw!r}")
            raw = int(raw)
        values[key] = raw
    try:
        return cls(**values)
    except SpecError as err:
        raise f.error("", str(err)) from None


def efficiency_to_yaml(eff: Efficiency, source: str,
                       kernel_sources: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The `efficiency` block of a calibrated profile, in the same form the loader reads;
    `kernel_sources`: the source line of each tiled attention kernel block (default `source`)."""
    kernel_sources = kernel_sources or {}
    block: dict[str, Any] = {
        name: dataclasses.asdict(getattr(eff, name)) for name in ("gemm", "attention", "memory")
    }
    kernels = eff.attention_kernels
    if kernels is not None:
        for name in _KERNELS:
            block["attention"][name] = {**dataclasses.asdict(getattr(kernels, name)),
                                        "source": kernel_sources.get(name, source)}
    block["pass_overhead_s"] = eff.pass_overhead_s
    block["tree_attention_slowdown"] = eff.tree_attention_slowdown
    block["source"] = source
    return block

"""Profiling backends: the devices `run_profile` times kernels on.

"torch" (CUDA: bf16, CUDA events, L2 flushed before every timed run; CPU: fp32, wall clock) and
"numpy" (CPU, float32, wall clock), so the profile -> calibrate -> predict loop runs without
torch or a GPU. torch is imported lazily; without it the torch backend is a clear error.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import platform
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from specsim.errors import SpecError
from specsim.forward.shapes import BoolArray
from specsim.measurement.profile_csv import attention_allowed

FloatArray = NDArray[np.float64]

# CPU backends refuse points whose tensors need more host memory than this.
HOST_MAX_BYTES = 8e9
_FLUSH_FALLBACK_BYTES = 256_000_000
# Profile metadata key saying whether (and how) the L2 was flushed between timed runs: a weight
# shard left in the L2 by the previous run would time the L2, not HBM (issue 24).
L2_FLUSH_KEY = "l2_flushed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilePoint:
    """One kernel to time, i.e. one row of the profile CSV (columns as in profile_data).

    kv_heads, v_dim: attention only, KV heads per GPU and value head dim (not CSV columns;
    they follow from the model and TP degree).
    """

    model: str
    tp: int
    op: str
    op_class: str
    m: int = 0
    k: int = 0
    n: int = 0
    count: int = 0
    batch: int = 0
    context: int = 0
    queries: int = 0
    mask: str = "none"
    kv_heads: int = 0
    v_dim: int = 0

    @property
    def kernel(self) -> tuple[object, ...]:
        """What is timed, without the op name: equal kernels are timed once."""
        return (self.op_class, self.op if self.op_class != "gemm" else "gemm", self.m, self.k,
                self.n, self.count, self.batch, self.context, self.queries, self.mask,
                self.kv_heads, self.v_dim)

    @property
    def label(self) -> str:
        """Short description for progress bars."""
        if self.op_class == "gemm":
            return f"{self.op} m={self.m}" + (f" x{self.count}" if self.count > 1 else "")
        if self.op_class == "attention":
            return f"{self.op} b={self.batch} q={self.queries} ctx={self.context}"
        return f"{self.op} m={self.m}"


def point_bytes(point: ProfilePoint, elem_bytes: float) -> float:
    """Bytes of the tensors one point allocates (inputs, outputs, dense attention scores)."""
    if point.op_class == "gemm":
        return point.count * (point.m * point.k + point.k * point.n + point.m * point.n) \
            * elem_bytes
    if point.op_class == "memory":
        return 3.0 * point.m * point.n * 4.0  # logits, probabilities, noise (fp32)
    b, h, q = point.batch, point.k, point.queries
    keys = point.context + point.queries
    return (b * h * q * (point.n + point.v_dim) + b * point.kv_heads * keys
            * (point.n + point.v_dim)) * elem_bytes + b * h * q * keys * 4.0


class Backend(Protocol):
    """Times kernels on one device."""

    name: str
    device_name: str
    dtype: str

    def versions(self) -> dict[str, str]:
        """Library versions (and GPU clocks when readable), as metadata strings."""

    def notes(self) -> dict[str, str]:
        """Kernel fallbacks taken so far (metadata), e.g. GQA heads expanded."""

    def time_s(self, point: ProfilePoint, *, repeats: int, warmup: int) -> FloatArray:
        """Seconds per run of the point's kernel, shape (repeats,)."""


def _time_host(run: Callable[[], object], repeats: int, warmup: int) -> FloatArray:
    """Wall-clock seconds of `repeats` runs after `warmup` runs (synchronous kernels)."""
    for _ in range(warmup):
        run()
    samples = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter_ns()
        run()
        samples[i] = (time.perf_counter_ns() - start) * 1e-9
    # A run shorter than the clock tick reads 0: report the tick instead.
    return np.maximum(samples, time.get_clock_info("perf_counter").resolution)


def _check_host_size(point: ProfilePoint, elem_bytes: float, backend: str) -> None:
    size = point_bytes(point, elem_bytes)  # host memory: refuse rather than swap or get killed
    if size > HOST_MAX_BYTES:
        raise SpecError(f"{backend} backend: {point.label} needs {size / 1e9:.1f} GB, more than "
                        f"{HOST_MAX_BYTES / 1e9:.0f} GB on the CPU; profile a quick plan")


def numpy_attention(q: NDArray[np.float32], k: NDArray[np.float32], v: NDArray[np.float32],
                    allowed: BoolArray | None) -> NDArray[np.float32]:
    """softmax(q k^T / sqrt(d) + mask) v with grouped KV heads.

    q: (B, H, L, D); k: (B, Hkv, S, D); v: (B, Hkv, S, Dv); query head h uses KV head
    h // (H / Hkv); allowed: (L, S) or None. Returns (B, H, L, Dv).
    """
    b, h, length, d = q.shape
    kv_heads = k.shape[1]
    group = h // kv_heads
    # The heads sharing a KV head are stacked as extra query rows: KV is read once per KV head.
    folded = q.reshape(b, kv_heads, group * length, d)
    scores = np.matmul(folded, k.swapaxes(-1, -2))
    scores *= np.float32(1.0 / math.sqrt(d))
    if allowed is not None:
        scores[..., ~np.tile(allowed, (group, 1))] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    out: NDArray[np.float32] = np.matmul(scores, v)
    return out.reshape(b, h, length, v.shape[-1])


class NumpyBackend:
    """CPU float32 kernels timed with the wall clock."""

    name = "numpy"
    dtype = "fp32"

    def __init__(self, device: str | None = None) -> None:
        if device not in (None, "cpu"):
            raise SpecError(f"numpy backend runs on the CPU only, not device '{device}'")
        self.device_name = cpu_name()
        self._rng = np.random.default_rng(0)

    def versions(self) -> dict[str, str]:
        return {"numpy_version": np.__version__}

    def notes(self) -> dict[str, str]:
        return {}  # no fallbacks

    def time_s(self, point: ProfilePoint, *, repeats: int, warmup: int) -> FloatArray:
        _check_host_size(point, 4.0, self.name)
        with _one_blas_thread():
            return _time_host(self.kernel(point), repeats, warmup)

    def _normal(self, *shape: int) -> NDArray[np.float32]:
        return self._rng.standard_normal(shape, dtype=np.float32)

    def kernel(self, point: ProfilePoint) -> Callable[[], object]:
        """The point's kernel with freshly allocated inputs, as a no-argument callable."""
        if point.op_class == "gemm":  # weights stored (n, k) as in nn.Linear: a @ w^T
            lead = (point.count,) if point.count > 1 else ()
            a, w = self._normal(*lead, point.m, point.k), self._normal(*lead, point.n, point.k)
            out = np.empty((*lead, point.m, point.n), dtype=np.float32)
            return lambda: np.matmul(a, w.swapaxes(-1, -2), out=out)
        if point.op_class == "attention":
            keys = point.context + point.queries
            q = self._normal(point.batch, point.k, point.queries, point.n)
            k = self._normal(point.batch, point.kv_heads, keys, point.n)
            v = self._normal(point.batch, point.kv_heads, keys, point.v_dim)
            allowed = attention_allowed(point.op, point.queries, point.context)
            return lambda: numpy_attention(q, k, v, allowed)
        logits = self._normal(point.m, point.n)
        rng = self._rng

        def sample() -> object:  # softmax, then the exponential race (Gumbel-max) per row
            probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
            probs /= probs.sum(axis=-1, keepdims=True)
            noise = rng.standard_exponential(probs.shape, dtype=np.float32)
            with np.errstate(divide="ignore"):  # a zero draw wins its row, as it should
                return np.argmax(probs / noise, axis=-1)

        return sample


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Run OpenBLAS (if loaded) on one thread meanwhile: on shared CPUs a multi-threaded GEMM
    waits whole scheduler ticks for its other threads (measured: 30 ms instead of 0.3 ms)."""
    get, set_ = _openblas_threads_api() or (lambda: 0, lambda _: None)
    before = get()
    set_(1)
    try:
        yield
    finally:
        set_(before)


@functools.cache
def _openblas_threads_api() -> tuple[Any, Any] | None:
    """(get, set) thread-count functions of the OpenBLAS this process loaded, if any."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as handle:
            paths = sorted({line.split()[-1] for line in handle if "openblas" in line.lower()})
        for path in paths:
            lib = ctypes.CDLL(path)
            for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "")):
                get, set_ = (f"{prefix}_{verb}_num_threads{suffix}" for verb in ("get", "set"))
                if hasattr(lib, get) and hasattr(lib, set_):
                    return getattr(lib, get), getattr(lib, set_)
    except OSError:
        pass
    return None


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip().replace("#", "") or "cpu"
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise SpecError('torch is not installed: pip install "specsim[profile]" '
                        "(or use --backend numpy)") from None
    return torch


class TorchBackend:
    """torch kernels: bf16 on CUDA (CUDA events, L2 flushed before each run), fp32 on the CPU."""

    name = "torch"

    def __init__(self, device: str | None = None) -> None:
        torch = self._torch = _import_torch()
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device != "cpu" and not device.startswith("cuda"):
            raise SpecError(f"torch backend: device '{device}' is not 'cpu' or 'cuda[:N]'")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise SpecError(f"torch backend: CUDA is not available to torch {torch.__version__}; "
                            "use device cpu")
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.torch_dtype = torch.bfloat16 if self.cuda else torch.float32
        self.dtype = "bf16" if self.cuda else "fp32"
        self.device_name = (torch.cuda.get_device_name(self.device) if self.cuda
                            else cpu_name()).replace("#", "")
        self._generator = torch.Generator(device=self.device).manual_seed(0)
        self._notes: dict[str, str] = {}
        self._flush = None
        if self.cuda:
            l2_bytes = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0)
            size = 2 * l2_bytes if l2_bytes else _FLUSH_FALLBACK_BYTES
            self._flush = torch.empty(size, dtype=torch.uint8, device=self.device)

    def versions(self) -> dict[str, str]:
        torch = self._torch
        out = {"torch_version": str(torch.__version__),
               "cuda_version": str(torch.version.cuda or "none"), "numpy_version": np.__version__}
        clocks = gpu_clocks(self.device.index or 0) if self.cuda else ""
        out = {**out, "gpu_clocks": clocks} if clocks else out
        if self._flush is not None:  # calibrate reports it (tables.l2_statement)
            out[L2_FLUSH_KEY] = (f"yes: {self._flush.numel():,} bytes zeroed before every "
                                 "timed run")
        return out

    def notes(self) -> dict[str, str]:
        return dict(self._notes)

    def time_s(self, point: ProfilePoint, *, repeats: int, warmup: int) -> FloatArray:
        torch = self._torch
        if self.cuda:
            with torch.inference_mode():
                return self._time_cuda(self.kernel(point), repeats, warmup)
        _check_host_size(point, 4.0, self.name)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as for numpy: shared CPUs stall multi-threaded kernels
        try:
            with torch.inference_mode():
                return _time_host(self.kernel(point), repeats, warmup)
        finally:
            torch.set_num_threads(threads)

    def _time_cuda(self, run: Callable[[], object], repeats: int, warmup: int) -> FloatArray:
        """CUDA-event seconds per run; an L2-sized buffer is zeroed before each run, which
        evicts the operands and keeps the GPU busy while the host enqueues the next run."""
        torch, flush = self._torch, self._flush
        assert flush is not None
        with torch.cuda.device(self.device):
            for _ in range(warmup):
                flush.zero_()
                run()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
            for start, end in zip(starts, ends, strict=True):
                flush.zero_()
                start.record()
                run()
                end.record()
            torch.cuda.synchronize(self.device)
            ms = np.array([s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)])
        return np.maximum(ms * 1e-3, 1e-9)  # event resolution is ~0.5 us: never report 0

    def _normal(self, *shape: int) -> Any:
        return self._torch.randn(*shape, generator=self._generator, device=self.device,
                                 dtype=self.torch_dtype)

    def kernel(self, point: ProfilePoint) -> Callable[[], object]:
        """The point's kernel with freshly allocated inputs, as a no-argument callable."""
        torch = self._torch
        if point.op_class == "gemm":  # weights stored (n, k) as in nn.Linear: a @ w^T
            lead = (point.count,) if point.count > 1 else ()
            a, w = self._normal(*lead, point.m, point.k), self._normal(*lead, point.n, point.k)
            out = torch.empty(*lead, point.m, point.n, device=self.device, dtype=self.torch_dtype)
            matmul = torch.bmm if lead else torch.mm
            return lambda: matmul(a, w.transpose(-1, -2), out=out)
        if point.op_class == "attention":
            keys = point.context + point.queries
            q = self._normal(point.batch, point.k, point.queries, point.n)
            k = self._normal(point.batch, point.kv_heads, keys, point.n)
            v = self._normal(point.batch, point.kv_heads, keys, point.v_dim)
            return self.attention(point.op, q, k, v, point.context)
        logits = self._normal(point.m, point.n)
        generator = self._generator

        def sample() -> object:  # softmax, then the exponential race (Gumbel-max) per row
            probs = torch.softmax(logits.float(), dim=-1)
            noise = torch.empty_like(probs).exponential_(generator=generator)
            return probs.div_(noise).argmax(dim=-1)

        return sample

    def attention(self, op: str, q: Any, k: Any, v: Any, context: int) -> Callable[[], object]:
        """SDPA over q (B, H, L, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv). Decode and tree stack
        the heads of a KV group as query rows (KV read once per KV head; a boolean ancestor
        mask for trees); causal uses the lower-right causal bias with native GQA."""
        sdpa = self._torch.nn.functional.scaled_dot_product_attention
        b, h, length, d = q.shape
        group = h // k.shape[1]
        if op == "attention_causal":
            return self._causal(sdpa, q, k, v, context)
        folded = q.reshape(b, k.shape[1], group * length, d)
        mask = self._tensor(attention_allowed(op, length, context), group)
        return lambda: sdpa(folded, k, v, attn_mask=mask).reshape(b, h, length, -1)

    def _causal(self, sdpa: Any, q: Any, k: Any, v: Any, context: int) -> Callable[[], object]:
        length, group = q.shape[2], q.shape[1] // k.shape[1]
        try:  # torch >= 2.3: the kernels skip the blocks the lower-right causal bias masks
            from torch.nn.attention.bias import causal_lower_right
            bias = causal_lower_right(length, k.shape[2])
        except ImportError:
            bias = self._tensor(attention_allowed("attention_causal", length, context))
            self._notes["attention_causal"] = "explicit causal mask (torch < 2.3)"
        gqa = {"enable_gqa": True} if group > 1 else {}
        try:
            sdpa(q, k, v, attn_mask=bias, **gqa)
            return lambda: sdpa(q, k, v, attn_mask=bias, **gqa)
        except (RuntimeError, TypeError):  # no native GQA: expand the KV heads
            self._notes["attention_causal"] = "KV heads expanded to the query heads (no GQA)"
            k_all, v_all = (x.repeat_interleave(group, dim=1) for x in (k, v))
            mask = self._tensor(attention_allowed("attention_causal", length, context))
            return lambda: sdpa(q, k_all, v_all, attn_mask=mask)

    def _tensor(self, allowed: BoolArray | None, group: int = 1) -> Any:
        """A boolean mask on the device, its rows repeated for `group` stacked heads."""
        return None if allowed is None else \
            self._torch.from_numpy(np.tile(allowed, (group, 1))).to(self.device)


def gpu_clocks(index: int) -> str:
    """Current and max SM / memory clocks from nvidia-smi, or "" when unreadable."""
    query = "clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem"
    try:
        result = subprocess.run(
            ["nvidia-smi", f"--id={index}", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    values = [v.strip() for v in result.stdout.strip().split(",")]
    return f"sm {values[0]} (max {values[1]}), memory {values[2]} (max {values[3]})" \
        if len(values) == 4 else ""


BACKENDS: dict[str, Callable[[str | None], Backend]] = {"numpy": NumpyBackend,
                                                         "torch": TorchBackend}


def make_backend(name: str, device: str | None = None) -> Backend:
    """Build a backend by name ("numpy" or "torch") for `device` (None = the default)."""
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise SpecError(f"unknown backend '{name}'; valid: {', '.join(BACKENDS)}") from None
    return factory(device)

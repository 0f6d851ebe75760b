"""The profiling harness: plan which kernels a model's forward pass is made of, then time them.

Planning (`plan_profile`) is pure: from `pass_work`'s per-GPU op shapes it lists the points to
time (weight GEMMs over a token grid, decode attention over batch x context, causal and
tree-masked verification attention, sampling over the vocabulary). Timing (`run_profile`) runs
each distinct kernel through a backend and returns the tidy profile frame of
`specsim.measurement.profile_csv` (times in seconds: median, p10 and p90 over `repeats` runs after
`warmup` runs). Points with the same kernel shape under different op names are timed once.

Backends (`BACKENDS`, built by `make_backend`): "torch" (CUDA: bf16, CUDA events, L2 flushed
before every timed run; CPU: fp32, wall clock) and "numpy" (CPU, float32, wall clock), so the
profile -> calibrate -> predict loop runs without torch or a GPU. torch is imported lazily.

Budget of the default plan for llama-3.1-8b at TP 1: 5 GEMM ops x 28 token counts = 140 GEMM
points, 16 decode-attention points, 12 causal + 12 tree points, 4 sampling points: 184 points,
x (30 repeats + 5 warm-up) = 6,440 kernel runs. The GEMMs dominate: about 1.5 GFLOP per token
over 11,055 grid tokens = 16 TFLOP per pass over the grid, ~30 ms on an H100/H200, ~1 s in all;
flushing L2 and launching add ~0.1 ms per run (~1 s). With CUDA start-up and allocations the
run takes well under a minute (a 70B model a few minutes). A `quick` plan of a tiny model
(`tiny_model()`) on the numpy backend takes about a second.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from specsim.errors import SpecError
from specsim.forward.ops import pass_work
from specsim.forward.shapes import decode_passes
from specsim.measurement.backends import (
    BACKENDS,
    Backend,
    NumpyBackend,
    ProfilePoint,
    TorchBackend,
    make_backend,
    numpy_attention,
    point_bytes,
)
from specsim.measurement.profile_csv import PROFILE_COLUMNS, attention_shape, shard_size
from specsim.specs.models import Model

FloatArray = NDArray[np.float64]
ProgressFn = Callable[[int, int, str], None]

# GEMM rows: powers of two to 4096, plus every 16 tokens from 32 to 320 around the knee where
# GEMMs turn from weight-bandwidth bound to compute bound.
DEFAULT_TOKENS: tuple[int, ...] = tuple(sorted({2**i for i in range(13)} | {*range(32, 321, 16)}))
QUICK_TOKENS: tuple[int, ...] = tuple(sorted({2**i for i in range(9)} | {*range(32, 321, 32)}))
DEFAULT_SAMPLING_ROWS: tuple[int, ...] = (1, 8, 64, 512)
QUICK_SAMPLING_ROWS: tuple[int, ...] = (1, 8, 64)
DEFAULT_REPEATS = 30
DEFAULT_WARMUP = 5
# Largest working set a CPU backend accepts for one point (decimal bytes).


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionGrid:
    """Attention points: decode (1 query) over batch x context, and verification (causal chain
    and tree-masked) over batch x queries x context; all values in requests or tokens."""

    decode_batches: tuple[int, ...] = (1, 4, 16, 64)
    decode_contexts: tuple[int, ...] = (512, 2048, 8192, 32768)
    verify_batches: tuple[int, ...] = (1, 8)
    verify_queries: tuple[int, ...] = (8, 32, 64)
    verify_contexts: tuple[int, ...] = (512, 4096)


QUICK_ATTENTION = AttentionGrid(decode_batches=(1, 4), decode_contexts=(128, 512),
                                verify_batches=(1, 4), verify_queries=(8, 32),
                                verify_contexts=(256,))


# ---------------------------------------------------------------- planning (pure)

def tiny_model() -> Model:
    """A 4-layer GQA model (hidden 256, vocab 4096) whose CPU profile takes about a second."""
    return Model(slug="tiny", name="tiny profiling model", architecture="LlamaForCausalLM",
                 hidden_size=256, num_layers=4, num_attention_heads=4, num_kv_heads=2,
                 head_dim=64, intermediate_size=768, vocab_size=4096,
                 layer_types=("full_attention",) * 4)


def plan_profile(model: Model, *, tp: int, tokens: Sequence[int] | None = None,
                 attention_grid: AttentionGrid | None = None, include_tree: bool = True,
                 include_sampling: bool = True, sampling_rows: Sequence[int] | None = None,
                 quick: bool = False, max_tokens: int | None = None) -> list[ProfilePoint]:
    """The points to time for `model` on one GPU of a TP group of `tp`.

    tokens: GEMM token counts (default DEFAULT_TOKENS, QUICK_TOKENS when `quick`), capped at
    `max_tokens`; attention_grid: default AttentionGrid() (QUICK_ATTENTION when `quick`);
    include_tree: add tree-masked points next to the causal ones; sampling_rows: rows sampled
    (default DEFAULT_SAMPLING_ROWS, QUICK_SAMPLING_ROWS when `quick`).
    """
    grid = _token_grid(tokens if tokens is not None else
                       (QUICK_TOKENS if quick else DEFAULT_TOKENS), max_tokens)
    points = _gemm_points(model, tp, grid)
    attention = attention_grid or (QUICK_ATTENTION if quick else AttentionGrid())
    points += _attention_points(model, tp, attention, include_tree)
    if include_sampling:
        rows = sampling_rows if sampling_rows is not None else \
            (QUICK_SAMPLING_ROWS if quick else DEFAULT_SAMPLING_ROWS)
        points += [ProfilePoint(model=model.slug, tp=tp, op="sampling", op_class="memory",
                                m=m, n=model.vocab_size) for m in _positive(rows, "sampling_rows")]
    return points


def _positive(values: Sequence[int], name: str, minimum: int = 1) -> list[int]:
    out = [int(v) for v in values]
    if any(v < minimum or v != w for v, w in zip(out, values, strict=True)):
        raise SpecError(f"'{name}' must be integers >= {minimum}, got {list(values)}")
    return out


def _token_grid(tokens: Sequence[int], max_tokens: int | None) -> list[int]:
    grid = sorted(set(_positive(tokens, "tokens")))
    if max_tokens is not None:
        grid = [t for t in grid if t <= max_tokens]
    if not grid:
        raise SpecError(f"no GEMM token count is <= max_tokens = {max_tokens}")
    return grid


def _gemm_points(model: Model, tp: int, grid: list[int]) -> list[ProfilePoint]:
    """Each weight GEMM at each token count; grouped experts as (tokens per expert, experts)."""
    n_tokens = np.asarray(grid, dtype=np.float64)
    points: list[ProfilePoint] = []
    for op in pass_work(model, decode_passes(n_tokens), tp=tp):
        if op.op_class != "gemm":
            continue
        counts = np.ones_like(n_tokens) if op.gemm_count is None else op.gemm_count
        seen: set[tuple[int, int]] = set()
        for rows, groups in zip(op.gemm_m, counts, strict=True):
            m, count = max(1, round(float(rows))), max(1, round(float(groups)))
            if rows <= 0 or (m, count) in seen:
                continue
            seen.add((m, count))
            points.append(ProfilePoint(
                model=model.slug, tp=tp, op=op.name, op_class="gemm", m=m,
                k=shard_size(op.gemm_k), n=shard_size(op.gemm_n), count=count))
    return points


def _attention_points(model: Model, tp: int, grid: AttentionGrid,
                      include_tree: bool) -> list[ProfilePoint]:
    counts = model.layer_counts
    if counts["full_attention"] + counts["sliding_attention"] == 0:
        return []  # linear attention only: its recurrent update is not profiled
    heads, kv_heads, qk_dim, v_dim = attention_shape(model, tp)

    def point(op: str, mask: str, batch: int, queries: int, context: int) -> ProfilePoint:
        return ProfilePoint(model=model.slug, tp=tp, op=op, op_class="attention", k=heads,
                            n=qk_dim, batch=batch, context=context, queries=queries, mask=mask,
                            kv_heads=kv_heads, v_dim=v_dim)

    points = [point("attention_decode", "none", b, 1, c)
              for b in _positive(grid.decode_batches, "decode_batches")
              for c in _positive(grid.decode_contexts, "decode_contexts", 0)]
    kinds = [("attention_causal", "causal")] + ([("attention_tree", "tree")] if include_tree
                                                else [])
    points += [point(op, mask, b, q, c)
               for b in _positive(grid.verify_batches, "verify_batches")
               for q in _positive(grid.verify_queries, "verify_queries")
               for c in _positive(grid.verify_contexts, "verify_contexts", 0)
               for op, mask in kinds]
    return points



__all__ = ["BACKENDS", "AttentionGrid", "Backend", "NumpyBackend", "ProfilePoint",
           "TorchBackend", "make_backend", "numpy_attention", "plan_profile", "point_bytes",
           "profile_metadata", "run_profile", "tiny_model"]


# ---------------------------------------------------------------- running

def run_profile(points: Sequence[ProfilePoint], backend: Backend, *, repeats: int = DEFAULT_REPEATS,
                warmup: int = DEFAULT_WARMUP, progress: ProgressFn | None = None) -> pd.DataFrame:
    """Time every distinct kernel of `points`; one row per point (PROFILE_COLUMNS, seconds).

    progress(done, total, label) is called after each distinct kernel.
    """
    if repeats < 1 or warmup < 0:
        raise SpecError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    if not points:
        raise SpecError("nothing to profile: the plan has no points")
    distinct = list({p.kernel: p for p in reversed(points)}.values())[::-1]
    stats: dict[tuple[object, ...], FloatArray] = {}
    for done, point in enumerate(distinct, start=1):
        samples = backend.time_s(point, repeats=repeats, warmup=warmup)
        stats[point.kernel] = np.percentile(samples, [10.0, 50.0, 90.0])
        if progress is not None:
            progress(done, len(distinct), point.label)
    rows = [[backend.device_name, backend.name, p.model, p.tp, p.op, p.op_class, backend.dtype,
             p.m, p.k, p.n, p.count, p.batch, p.context, p.queries, p.mask,
             stats[p.kernel][1], stats[p.kernel][0], stats[p.kernel][2], repeats] for p in points]
    return pd.DataFrame(rows, columns=list(PROFILE_COLUMNS))


def profile_metadata(model: Model, *, tp: int, backend: Backend, repeats: int, warmup: int,
                     command: str, created: datetime | None = None) -> dict[str, str]:
    """The `# key: value` header of a profile: versions, device, model, settings, command."""
    try:
        version = importlib.metadata.version("specsim")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    _, kv_heads, _, _ = attention_shape(model, tp)
    stamp = (created or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return {"format": "specsim profile v1", "specsim_version": version,
            "created_utc": stamp.isoformat(timespec="seconds"), "device": backend.device_name,
            "backend": backend.name, "dtype": backend.dtype, **backend.versions(),
            "model": model.slug, "tp": str(tp), "kv_heads_per_gpu": str(kv_heads),
            "repeats": str(repeats), "warmup": str(warmup), "command": command,
            **backend.notes()}

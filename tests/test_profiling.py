"""The profiling harness: plan contents (shapes derived by hand), kernels against brute force,
the numpy backend end to end, the statistics, and the torch backend when torch is installed.

Llama-3.1-8B (config.json, workloads/models/llama-3.1-8b.yaml): hidden 4096, 32 heads, 8 KV
heads, head_dim 128, intermediate 14336 (gated MLP), vocab 128256. Mixtral-8x7B: the same
attention, 8 experts of intermediate 14336, 2 per token, vocab 32000.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.measurement.profile_csv import (
    attention_allowed,
    check_profile_matches_model,
    read_profile,
    write_profile,
)
from specsim.measurement.profiling import (
    AttentionGrid,
    NumpyBackend,
    ProfilePoint,
    TorchBackend,
    make_backend,
    numpy_attention,
    plan_profile,
    profile_metadata,
    run_profile,
    tiny_model,
)
from specsim.specs.models import load_model

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (optional: "
                                 'pip install "specsim[profile]"); torch backend not tested')

# k x n per GPU by hand: qkv n = (32 + 2 * 8) * 128 / TP, o_proj k = 32 * 128 / TP,
# mlp_up n = 2 * 14336 / TP, mlp_down k = 14336 / TP, lm_head n = 128256 / TP.
LLAMA_8B_SHAPES = {
    1: {"qkv_proj": (4096, 6144), "o_proj": (4096, 4096), "mlp_up": (4096, 28672),
        "mlp_down": (14336, 4096), "lm_head": (4096, 128256)},
    2: {"qkv_proj": (4096, 3072), "o_proj": (2048, 4096), "mlp_up": (4096, 14336),
        "mlp_down": (7168, 4096), "lm_head": (4096, 64128)},
}
# Powers of two 1..4096 and every 16 tokens from 32 to 320: 13 + 19 - 4 shared = 28 counts.
TOKEN_GRID = [1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240,
              256, 272, 288, 304, 320, 512, 1024, 2048, 4096]


@pytest.mark.parametrize("tp", [1, 2])
def test_plan_llama_8b_gemm_shapes_and_token_grid(tp: int) -> None:
    points = plan_profile(load_model("llama-3.1-8b"), tp=tp)
    gemms = [p for p in points if p.op_class == "gemm"]
    assert {p.op: (p.k, p.n) for p in gemms} == LLAMA_8B_SHAPES[tp]
    for op in LLAMA_8B_SHAPES[tp]:
        assert [p.m for p in gemms if p.op == op] == TOKEN_GRID
    assert all(p.count == 1 and p.tp == tp and p.model == "llama-3.1-8b" for p in gemms)


@pytest.mark.parametrize("tp", [1, 2])
def test_plan_llama_8b_attention_and_sampling(tp: int) -> None:
    points = plan_profile(load_model("llama-3.1-8b"), tp=tp)
    attention = [p for p in points if p.op_class == "attention"]
    assert {(p.k, p.n, p.kv_heads, p.v_dim) for p in attention} == {(32 // tp, 128, 8 // tp, 128)}
    decode = {(p.batch, p.context) for p in attention if p.op == "attention_decode"}
    assert decode == {(b, c) for b in (1, 4, 16, 64) for c in (512, 2048, 8192, 32768)}
    assert all(p.queries == 1 and p.mask == "none" for p in attention
               if p.op == "attention_decode")
    causal = {(p.batch, p.queries, p.context) for p in attention if p.mask == "causal"}
    tree = {(p.batch, p.queries, p.context) for p in attention if p.mask == "tree"}
    assert causal == tree == {(b, q, c) for b in (1, 8) for q in (8, 32, 64) for c in (512, 4096)}
    sampling = [p for p in points if p.op_class == "memory"]
    assert [(p.op, p.m, p.n) for p in sampling] == [("sampling", m, 128256) for m in
                                                    (1, 8, 64, 512)]
    assert len(points) == 5 * 28 + 16 + 12 + 12 + 4


def test_plan_flags_drop_tree_and_sampling_points() -> None:
    points = plan_profile(load_model("llama-3.1-8b"), tp=1, include_tree=False,
                          include_sampling=False)
    assert not [p for p in points if p.mask == "tree" or p.op_class == "memory"]
    assert len([p for p in points if p.mask == "causal"]) == 12


def test_plan_mixtral_expert_gemms_count_touched_experts() -> None:
    # Uniform routing, 2 of 8 experts per token: n tokens touch 8 (1 - (6/8)^n) experts.
    # n = 1: 2 experts of 1 token; n = 2: 8 * (1 - 0.5625) = 3.5 -> 4 experts (rounded half to
    # even) of 4 / 3.5 = 1.14 -> 1 token; n = 4096: all 8 experts, 4096 * 2 / 8 = 1024 tokens.
    points = plan_profile(load_model("mixtral-8x7b"), tp=1, tokens=[1, 2, 4096])
    up = [(p.m, p.count, p.k, p.n) for p in points if p.op == "experts_up"]
    assert up == [(1, 2, 4096, 28672), (1, 4, 4096, 28672), (1024, 8, 4096, 28672)]
    assert [(p.k, p.n) for p in points if p.op == "router"][0] == (4096, 8)


def test_plan_quick_and_max_tokens_keep_cpu_runs_small() -> None:
    points = plan_profile(tiny_model(), tp=1, quick=True, max_tokens=64)
    assert max(p.m for p in points if p.op_class == "gemm") == 64
    assert max(p.batch * p.context for p in points) == 4 * 512
    with pytest.raises(SpecError, match="max_tokens = 0"):
        plan_profile(tiny_model(), tp=1, max_tokens=0)


@pytest.mark.parametrize("kwargs, message", [
    ({"tp": 3}, "tensor parallel degree 3 must divide the 32 attention heads"),
    ({"tp": 1, "tokens": [0, 8]}, "'tokens' must be integers >= 1"),
    ({"tp": 1, "tokens": [1.5]}, "'tokens' must be integers >= 1"),
    ({"tp": 1, "attention_grid": AttentionGrid(decode_contexts=(-1,))}, "'decode_contexts'"),
])
def test_plan_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        plan_profile(load_model("llama-3.1-8b"), **kwargs)  # type: ignore[arg-type]


def test_causal_mask_without_context_is_lower_triangular() -> None:
    allowed = attention_allowed("attention_causal", 5, 0)
    assert allowed is not None
    assert [[bool(allowed[i, j]) for j in range(5)] for i in range(5)] == \
        [[j <= i for j in range(5)] for i in range(5)]


def test_causal_mask_sees_all_context_then_lower_right() -> None:
    allowed = attention_allowed("attention_causal", 3, 4)
    assert allowed is not None and allowed.shape == (3, 7)
    assert allowed.sum(axis=1).tolist() == [5, 6, 7]


def test_tree_mask_is_ancestry_in_the_heap_numbered_binary_tree() -> None:
    # Independent rule: with 1-based heap numbers, j is an ancestor-or-self of i exactly when
    # the binary digits of j + 1 are a prefix of those of i + 1.
    queries, context = 64, 3
    allowed = attention_allowed("attention_tree", queries, context)
    assert allowed is not None
    assert allowed[:, :context].all()
    for i in range(queries):
        for j in range(queries):
            expected = bin(i + 1)[2:].startswith(bin(j + 1)[2:])
            assert allowed[i, context + j] == expected
    # levels 0..5 hold 63 tokens; the 64th is at depth 6: 7 tokens on its root path
    assert allowed[:, context:].sum(axis=1).max() == 7


def _brute_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                     allowed: np.ndarray | None) -> np.ndarray:
    """Per request, head and query: softmax over the allowed keys, in float64."""
    b, h, length, d = q.shape
    group = h // k.shape[1]
    out = np.zeros((b, h, length, v.shape[-1]))
    for r in range(b):
        for head in range(h):
            kv = head // group
            for i in range(length):
                keys = list(range(k.shape[2])) if allowed is None else \
                    [int(j) for j in np.flatnonzero(allowed[i])]
                scores = np.array([q[r, head, i] @ k[r, kv, j] / math.sqrt(d) for j in keys],
                                  dtype=np.float64)
                weights = np.exp(scores - scores.max())
                weights /= weights.sum()
                out[r, head, i] = sum(w * v[r, kv, j] for w, j in zip(weights, keys, strict=True))
    return out


ATTENTION_CASES = [("attention_decode", 1, 6), ("attention_causal", 5, 4),
                   ("attention_causal", 4, 0), ("attention_tree", 7, 3)]


def _qkv(queries: int, context: int, v_dim: int = 8) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7)
    keys = context + queries
    return (rng.standard_normal((2, 4, queries, 8), dtype=np.float32),
            rng.standard_normal((2, 2, keys, 8), dtype=np.float32),
            rng.standard_normal((2, 2, keys, v_dim), dtype=np.float32))


@pytest.mark.parametrize("op, queries, context", ATTENTION_CASES)
def test_numpy_attention_with_grouped_heads_matches_brute_force(op: str, queries: int,
                                                                context: int) -> None:
    q, k, v = _qkv(queries, context, v_dim=6)  # 4 query heads share 2 KV heads
    allowed = attention_allowed(op, queries, context)
    got = numpy_attention(q, k, v, allowed)
    np.testing.assert_allclose(got, _brute_attention(q, k, v, allowed), atol=1e-5)


def test_numpy_kernels_produce_the_planned_shapes() -> None:
    backend = NumpyBackend()
    gemm = ProfilePoint(model="x", tp=1, op="experts_up", op_class="gemm", m=5, k=16, n=12,
                        count=3)
    assert np.asarray(backend.kernel(gemm)()).shape == (3, 5, 12)
    attention = ProfilePoint(model="x", tp=1, op="attention_tree", op_class="attention", k=4,
                             n=8, batch=2, context=5, queries=7, mask="tree", kv_heads=1,
                             v_dim=6)
    assert np.asarray(backend.kernel(attention)()).shape == (2, 4, 7, 6)
    sampling = ProfilePoint(model="x", tp=1, op="sampling", op_class="memory", m=9, n=50)
    tokens = np.asarray(backend.kernel(sampling)())
    assert tokens.shape == (9,) and tokens.min() >= 0 and tokens.max() < 50


class _FixedBackend:
    """Returns the samples 1..10 s for every point and counts the kernels it was asked for."""

    name, device_name, dtype = "fixed", "test device", "fp32"

    def __init__(self) -> None:
        self.timed: list[str] = []

    def versions(self) -> dict[str, str]:
        return {}

    def notes(self) -> dict[str, str]:
        return {}

    def time_s(self, point: ProfilePoint, *, repeats: int, warmup: int) -> np.ndarray:
        self.timed.append(point.label)
        return np.arange(1.0, 11.0)


def test_run_profile_statistics_and_shared_kernels_timed_once() -> None:
    # Two op names with one GEMM shape (4096 x 4096): one measurement, two rows.
    points = [ProfilePoint(model="x", tp=1, op=op, op_class="gemm", m=8, k=4096, n=4096,
                           count=1) for op in ("o_proj", "shared_down")]
    backend = _FixedBackend()
    progress: list[tuple[int, int, str]] = []
    frame = run_profile(points, backend, repeats=10, warmup=0,
                        progress=lambda done, total, label: progress.append((done, total, label)))
    assert backend.timed == ["o_proj m=8"] and progress == [(1, 1, "o_proj m=8")]
    # 1..10 s: p10 = 1 + 0.1 * 9 = 1.9 s, median 5.5 s, p90 = 1 + 0.9 * 9 = 9.1 s (linear)
    assert frame["op"].tolist() == ["o_proj", "shared_down"]
    assert frame["time_p10_s"].tolist() == pytest.approx([1.9, 1.9])
    assert frame["time_median_s"].tolist() == pytest.approx([5.5, 5.5])
    assert frame["time_p90_s"].tolist() == pytest.approx([9.1, 9.1])
    assert set(frame["device"]) == {"test device"} and set(frame["repeats"]) == {10}


@pytest.mark.parametrize("repeats, warmup", [(0, 1), (3, -1)])
def test_run_profile_rejects_bad_repeats(repeats: int, warmup: int) -> None:
    with pytest.raises(SpecError, match="repeats must be >= 1 and warmup >= 0"):
        run_profile(plan_profile(tiny_model(), tp=1, quick=True), _FixedBackend(),
                    repeats=repeats, warmup=warmup)


def test_numpy_profile_of_tiny_model_is_a_valid_csv(tmp_path: Path) -> None:
    model = tiny_model()
    points = plan_profile(model, tp=1, quick=True, max_tokens=64)
    backend = make_backend("numpy")
    seen: list[int] = []
    frame = run_profile(points, backend, repeats=3, warmup=1,
                        progress=lambda done, total, label: seen.append(done))
    assert seen == list(range(1, len(points) + 1))
    metadata = profile_metadata(model, tp=1, backend=backend, repeats=3, warmup=1,
                                command="specsim profile --model tiny --backend numpy")
    out = tmp_path / "tiny.csv"
    write_profile(frame, out, metadata)
    again, meta = read_profile(out)
    assert len(again) == len(points)
    assert (again["time_p10_s"] > 0).all()
    assert (again["time_p10_s"] <= again["time_median_s"]).all()
    assert (again["time_median_s"] <= again["time_p90_s"]).all()
    assert set(again["backend"]) == {"numpy"} and set(again["dtype"]) == {"fp32"}
    assert meta["model"] == "tiny" and meta["tp"] == "1" and meta["kv_heads_per_gpu"] == "2"
    assert meta["command"] == "specsim profile --model tiny --backend numpy"
    assert {"specsim_version", "created_utc", "device", "numpy_version"} <= set(meta)
    check_profile_matches_model(again, model, 1)


def test_cpu_backends_refuse_points_too_large_for_memory() -> None:
    big = plan_profile(load_model("llama-3.1-8b"), tp=1)
    decode = [p for p in big if p.op == "attention_decode" and p.batch == 64
              and p.context == 32768]
    # KV: 64 requests x 32769 tokens x 8 heads x 2 x 128 x 4 bytes = 17.2 GB
    with pytest.raises(SpecError, match=r"needs 1[78]\.\d GB"):
        make_backend("numpy").time_s(decode[0], repeats=1, warmup=0)


def test_unknown_backend_lists_valid_names() -> None:
    with pytest.raises(SpecError, match="unknown backend 'jax'; valid: numpy, torch"):
        make_backend("jax")


def test_numpy_backend_is_cpu_only() -> None:
    with pytest.raises(SpecError, match="CPU only"):
        make_backend("numpy", "cuda")


def test_missing_torch_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(SpecError) as info:
        make_backend("torch")
    assert str(info.value) == ('torch is not installed: pip install "specsim[profile]" '
                               "(or use --backend numpy)")


@needs_torch
@pytest.mark.parametrize("op, queries, context", ATTENTION_CASES)
def test_torch_attention_matches_brute_force(op: str, queries: int, context: int) -> None:
    import torch

    q, k, v = _qkv(queries, context)
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    run = TorchBackend("cpu").attention(op, tq, tk, tv, context)
    expected = _brute_attention(q, k, v, attention_allowed(op, queries, context))
    np.testing.assert_allclose(np.asarray(run()), expected, atol=1e-5)


@needs_torch
def test_torch_cpu_profile_is_valid(tmp_path: Path) -> None:
    model = tiny_model()
    grid = AttentionGrid(decode_batches=(2,), decode_contexts=(64,), verify_batches=(1,),
                         verify_queries=(8,), verify_contexts=(32,))
    points = plan_profile(model, tp=1, tokens=[1, 16], attention_grid=grid, sampling_rows=[4])
    backend = make_backend("torch", "cpu")
    frame = run_profile(points, backend, repeats=3, warmup=1)
    out = tmp_path / "torch.csv"
    write_profile(frame, out, profile_metadata(model, tp=1, backend=backend, repeats=3,
                                               warmup=1, command="test"))
    again, meta = read_profile(out)
    assert set(again["backend"]) == {"torch"} and "torch_version" in meta
    assert (again["time_p10_s"] <= again["time_p90_s"]).all()


# ---------------------------------------------------------------- run-time estimate and budget


def test_point_flops_by_hand() -> None:
    from specsim.measurement.backends import ProfilePoint
    from specsim.measurement.profile_budget import point_flops

    # A GEMM of 8 rows over a 4096 x 128256 LM head: 2 m k n = 2 * 8 * 4096 * 128256.
    gemm = ProfilePoint(model="x", tp=1, op="lm_head", op_class="gemm", m=8, k=4096, n=128256,
                        count=1)
    assert point_flops(gemm) == 2 * 8 * 4096 * 128256
    # Attention: QK^T (2 q keys d) and PV (2 q keys dv) per head and request.
    att = ProfilePoint(model="x", tp=1, op="attention_decode", op_class="attention", k=32,
                       n=128, batch=2, context=511, queries=1, kv_heads=8, v_dim=128)
    assert point_flops(att) == 2 * 2 * 32 * 1 * 512 * (128 + 128)


def test_budget_keeps_the_cheapest_kernels_and_names_what_it_skipped() -> None:
    from specsim.measurement.profile_budget import (
        DeviceRates,
        kernel_s,
        skipped_summary,
        within_budget,
    )
    from specsim.specs.models import load_model

    points = plan_profile(load_model("llama-3.1-8b"), tp=1, quick=True)
    # A CPU-like device: 50 GFLOP/s, 10 GB/s, 5 us per kernel.
    rates = DeviceRates(flops_per_s=50e9, bytes_per_s=10e9, floor_s=5e-6)
    seconds = kernel_s(points, rates, elem_bytes=4.0, repeats=20, warmup=5)
    kept, skipped = within_budget(points, seconds, 60.0)
    assert len(kept) + len(skipped) == len(points) and kept and skipped
    assert sum(seconds[k] for k in {p.kernel for p in kept}) <= 60.0
    # Every skipped kernel costs at least as much as every kept one (cheapest first).
    assert min(seconds[p.kernel] for p in skipped) >= max(seconds[p.kernel] for p in kept)
    # The LM head at 320 rows is 2 * 320 * 4096 * 128256 = 336 GFLOP a run: 6.7 s at 50
    # GFLOP/s, x 25 runs > 60 s, so it is skipped and named.
    assert any(p.op == "lm_head" and p.m == 320 for p in skipped)
    assert "lm_head" in skipped_summary(kept, skipped)

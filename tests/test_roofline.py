"""T(n) on datasheet profiles: the article's worked numbers, and each term re-derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.cost import decode_time_s, forward_time_s, knee_tokens, pass_cost
from specsim.forward.shapes import decode_passes, mixed_pass, uniform_passes
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from specsim.specs.params import param_breakdown, weight_bytes

H100 = load_hardware("h100-sxm")
LLAMA8B = load_model("llama-3.1-8b")
BW = 3.35e12
PEAK = 989.4e12


def test_8b_on_h100_reads_its_weights_in_4_8_ms() -> None:
    """The article: 16 GB / 3.35 TB/s ~= 4.8 ms => at most 208 tokens/s at batch size 1."""
    read_all_s = weight_bytes(LLAMA8B) / BW
    assert read_all_s == pytest.approx(4.8e-3, abs=0.05e-3)
    assert 1 / read_all_s <= 209
    # A decode step reads every weight matrix but only one row of the embedding table, so the
    # roofline's T(1) is the weights less the table, plus activations, over the bandwidth.
    table_s = param_breakdown(LLAMA8B)["embedding"] * 2 / BW
    t1 = decode_time_s(LLAMA8B, H100, 1)[0]
    assert t1 == pytest.approx(read_all_s - table_s, rel=0.005)
    assert t1 < read_all_s


def test_8_tokens_cost_nearly_the_same_as_one() -> None:
    t = forward_time_s(LLAMA8B, H100, [1, 8])
    assert t[1] / t[0] < 1.02


def test_pass_follows_the_article_curve_away_from_the_knee() -> None:
    """max(weights / BW, 2 * params * n / F), plus the traffic the article leaves out.

    Per token: fused add+RMSNorm (8 hidden-sized bf16 transfers per layer), the sampler (3 fp32
    passes over the 128,256 logits), the embedding row (read and written). Far below the knee
    every op is memory-bound, so the GEMM activations (k + n elements in and out per token) add
    on as well; the attention (Q/O activations, K/V writes at context 0) is memory-bound at any n.
    """
    d, layers, vocab = 4096, 32, 128256
    read = (weight_bytes(LLAMA8B) - param_breakdown(LLAMA8B)["embedding"] * 2) / BW
    params = read * BW / 2
    glue = 8 * layers * d * 2 + 3 * vocab * 4 + d * 4
    gemm_act = 2 * (layers * ((4096 + 6144) + (4096 + 4096) + (4096 + 28672) + (14336 + 4096))
                    + (4096 + vocab))
    attention = layers * (32 * 256 * 2 + 2 * 8 * 128 * 2)  # Q in, O out; K, V written
    small = np.array([1.0, 16.0, 64.0])
    expected_small = read + small * (glue + gemm_act + attention) / BW
    assert forward_time_s(LLAMA8B, H100, small) == pytest.approx(expected_small, rel=1e-3)
    big = np.array([4096.0, 16384.0])
    expected_big = 2 * params * big / PEAK + big * (glue + attention) / BW
    assert forward_time_s(LLAMA8B, H100, big) == pytest.approx(expected_big, rel=0.01)


def test_pass_stays_memory_bound_up_to_295_tokens() -> None:
    # The article: memory-bound until n reaches the ops:byte ratio 989 / 3.35 ~= 295.
    n = np.arange(1.0, 296.0)
    assert not pass_cost(LLAMA8B, H100, decode_passes(n)).compute_bound.any()


def test_knee_near_the_ops_per_byte_ratio() -> None:
    """Each GEMM turns compute-bound at m* = r k n / (k n - r (k + n)), r = F / BW = 295.

    Activations in and out move the knee above r: for the QKV GEMM (4096 x 6144)
    m* = 295.3 * 25,165,824 / (25,165,824 - 295.3 * 10,240) = 335.6; for the MLP down GEMM
    (14336 x 4096) 324.5; for the LM head (4096 x 128256) 317.1. The pass knee lies among them.
    """
    r = PEAK / BW
    knees = [r * k * n / (k * n - r * (k + n)) for k, n in
             [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096), (4096, 128256)]]
    assert min(knees) > r
    assert min(knees) - 1 <= knee_tokens(LLAMA8B, H100) <= max(knees) + 1


def test_sweep_equals_pointwise() -> None:
    n = np.array([1.0, 7.0, 300.0, 4096.0])
    sweep = forward_time_s(LLAMA8B, H100, n, context=1000.0)
    points = [forward_time_s(LLAMA8B, H100, [x], context=1000.0)[0] for x in n]
    assert sweep == pytest.approx(points, rel=1e-12)


def test_kv_cache_reads_add_bytes_over_bandwidth() -> None:
    """Decode of B = 8 requests at L = 4096: 32 layers x 8 x 4096 x (2 x 8 x 128 x 2 B) read."""
    kv_read = 32 * 8 * 4096 * (2 * 8 * 128 * 2)
    t0 = decode_time_s(LLAMA8B, H100, 8, context=0)[0]
    t1 = decode_time_s(LLAMA8B, H100, 8, context=4096)[0]
    assert t1 - t0 == pytest.approx(kv_read / BW, rel=0.01)


def test_attention_flops_by_hand() -> None:
    """4 * n_q * context * heads * head_dim per layer: B = 4 requests verifying 8 tokens at 1000."""
    cost = pass_cost(LLAMA8B, H100, uniform_passes(8, 4, 1000.0))
    attention = next(c for c in cost.ops if c.op.name == "attention")
    pairs = 4 * 8 * (1000 + 8)  # each query scores the context and its request's block
    assert attention.op.flops[0] == pytest.approx(4 * pairs * 32 * 128)
    assert attention.op.layers == 32


def test_mixed_batch_is_the_sum_of_its_requests() -> None:
    contexts, queries = [100.0, 5000.0, 30000.0], [1.0, 4.0, 9.0]
    mixed = pass_cost(LLAMA8B, H100, mixed_pass(contexts, queries))
    kv = sum(c for c in contexts) * 32 * 4096
    attention = [c for c in mixed.ops if c.op.name == "attention"][0]
    assert attention.op.kv_read_bytes[0] * 32 == pytest.approx(kv)
    assert mixed.tokens[0] == 14


def test_tensor_parallel_halves_weights_and_adds_all_reduces() -> None:
    """TP 2: half the weight bytes per GPU, plus 2 all-reduces per layer of n * d * 2 bytes
    (8,192 B at one token): on the H100 the engines' measured custom all-reduce at TP 2,
    between 4 KiB (3.9 us) and 32 KiB (4.5 us) of hardware/h100-sxm.yaml's table; on a GPU
    without a table (A100) latency + 2 (TP - 1)/TP * bytes / link bandwidth (NVLink 3: 300
    GB/s per direction)."""
    t1 = decode_time_s(LLAMA8B, H100, 1)[0]
    t2 = decode_time_s(LLAMA8B, H100, 1, tp=2)[0]
    all_reduce = 64 * (3.9e-6 + 4096 / 28672 * 0.6e-6)
    assert t2 == pytest.approx(t1 / 2 + all_reduce, rel=0.01)
    a100 = load_hardware("a100-80g-sxm")
    t1, t2 = (decode_time_s(LLAMA8B, a100, 1, tp=tp)[0] for tp in (1, 2))
    ring = 64 * (a100.interconnect_latency_s + 1.0 * 4096 * 2 / 300e9)
    assert t2 == pytest.approx(t1 / 2 + ring, rel=0.01)


def test_tensor_parallel_must_divide_heads() -> None:
    with pytest.raises(SpecError, match="tensor parallel degree 3"):
        decode_time_s(LLAMA8B, H100, 1, tp=3)


def test_moe_verification_is_not_free() -> None:
    """Qwen3-30B-A3B: n tokens touch 128 (1 - (1 - 8/128)^n) experts of 3 x 2048 x 768 params
    each per layer; at n = 64 almost all experts are read, at n = 1 only eight."""
    moe = load_model("qwen3-30b-a3b")
    d, layers, heads, kv, vocab = 2048, 48, 32 * 128, 4 * 128 * 2, 151936
    attention = layers * (d * (heads + kv) + heads * d)  # qkv and output projections
    router, lm_head = layers * d * 128, vocab * d
    expert = layers * 3 * d * 768
    for n in (1, 64):
        touched = 128 * (1 - (1 - 8 / 128) ** n)
        cost = pass_cost(moe, H100, decode_passes(n))
        read = cost.total("weight_bytes")[0]
        assert read == pytest.approx(2 * (attention + router + lm_head + touched * expert))
    dense_ratio = np.divide(*forward_time_s(LLAMA8B, H100, [64, 1]))
    moe_ratio = np.divide(*forward_time_s(moe, H100, [64, 1]))
    assert dense_ratio < 1.05 and moe_ratio > 4


def test_mla_caches_the_latent() -> None:
    """DeepSeek-V3: (512 + 64) latent elements per token per layer, bf16, on every TP rank;
    attention flops per (query, key) pair: 2 * heads * ((512 + 64) + 512)."""
    ds = load_model("deepseek-v3")
    cost = pass_cost(ds, H100, decode_passes(2, 10000.0), tp=8)
    attention = next(c for c in cost.ops if c.op.name == "attention")
    assert attention.op.kv_read_bytes[0] == pytest.approx(2 * 10000 * 576 * 2)
    pairs = 2 * (10000 + 1)
    assert attention.op.flops[0] == pytest.approx(2 * pairs * (128 / 8) * (576 + 512))


def test_linear_attention_state_does_not_grow_with_context() -> None:
    nxt = load_model("qwen3-next-80b-a3b")
    short = pass_cost(nxt, H100, decode_passes(4, 1000.0))
    long = pass_cost(nxt, H100, decode_passes(4, 100000.0))
    by_short, by_long = short.by_op(), long.by_op()
    assert by_long["linear_attention"] == pytest.approx(by_short["linear_attention"])
    assert by_long["attention"] > 10 * by_short["attention"]
    # 36 linear layers, state 32 heads x 128 x 128 fp32 + conv state, read and written per request
    state = 32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2
    lin = next(c for c in short.ops if c.op.name == "linear_attention")
    assert lin.op.kv_read_bytes[0] == pytest.approx(4 * state)


def test_sliding_window_caps_the_cache_read() -> None:
    oss = load_model("gpt-oss-120b")
    cost = pass_cost(oss, H100, decode_passes(1, 50000.0))
    sliding = next(c for c in cost.ops if c.op.name == "sliding_attention")
    assert sliding.op.kv_read_bytes[0] == pytest.approx(128 * 2 * 8 * 64 * 2)
    assert sliding.op.layers == 18


def test_fp8_weights_halve_the_weight_time() -> None:
    from specsim.specs.dtypes import Precision

    bf16 = decode_time_s(LLAMA8B, H100, 1)[0]
    fp8 = decode_time_s(LLAMA8B, H100, 1, precision=Precision(weight_dtype="fp8",
                                                             compute_dtype="fp8"))[0]
    assert fp8 == pytest.approx(bf16 / 2, rel=0.02)


def test_a_batch_mix_is_its_requests() -> None:
    """Two requests at 1,000 and 9,000 cached tokens: the mix equals the two requests listed,
    and on full attention (linear in the context) a uniform batch at their mean context; not on
    sliding-window layers, where min(context, window) is not linear."""
    from specsim.forward.shapes import batch_mix_passes

    mix = pass_cost(LLAMA8B, H100, batch_mix_passes(5, 2, [1000, 9000])).time_s
    listed = pass_cost(LLAMA8B, H100, mixed_pass([1000, 9000], [5, 5])).time_s
    mean = pass_cost(LLAMA8B, H100, uniform_passes(5, 2, 5000)).time_s
    assert mix == pytest.approx(listed, rel=1e-12) and mix == pytest.approx(mean, rel=1e-12)
    oss = load_model("gpt-oss-120b")
    mix = pass_cost(oss, H100, batch_mix_passes(1, 2, [64, 9000])).total("kv_read_bytes")
    mean = pass_cost(oss, H100, uniform_passes(1, 2, 4532)).total("kv_read_bytes")
    per_token = 2 * 8 * 64 * 2  # K and V per layer
    assert mix[0] == pytest.approx(18 * per_token * (9064 + 64 + 128))
    assert mean[0] == pytest.approx(18 * per_token * (2 * 4532 + 2 * 128))


def test_tokens_per_s_is_tokens_over_pass_time() -> None:
    """No ops, a 0.5 s overhead: passes of 2 and 4 tokens take 0.5 s, 4 and 8 tokens/s."""
    from specsim.forward.cost import PassCost

    cost = PassCost(ops=(), tokens=np.array([2.0, 4.0]), overhead_s=0.5)
    assert cost.tokens_per_s.tolist() == [4.0, 8.0]

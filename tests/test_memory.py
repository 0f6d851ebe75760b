"""Memory: the article's drafter-cache example, KV per token by hand, max concurrency."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.memory import memory_plan
from specsim.forward.ops import pass_work
from specsim.forward.shapes import decode_passes
from specsim.specs.cache import kv_layout
from specsim.specs.drafters import load_drafter
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from specsim.specs.params import weight_bytes

H100 = load_hardware("h100-sxm")


def test_dflash_drafter_cache_for_qwen3_8b() -> None:
    """The article: 2 (K/V) x 2 B x 32,768 tokens x 5 layers x 8 heads x 128 = 671,088,640 B
    per request; 86 GB at 128 requests; 14% on top of the target's 36-layer cache."""
    drafter = load_drafter("dflash-qwen3-8b").cache_layout()
    assert drafter.bytes_per_token == 5 * 2 * 8 * 128 * 2 == 20_480
    per_request = drafter.bytes_per_request(32768)
    assert per_request == 671_088_640
    assert 128 * per_request / 1e9 == pytest.approx(86, abs=0.5)
    target = kv_layout(load_model("qwen3-8b")).bytes_per_request(32768)
    assert per_request / target == pytest.approx(0.14, abs=0.005)  # = 5 / 36


def test_dflash_cache_overtakes_weights_and_hbm() -> None:
    """The article: the drafter cache passes the target's weights (16 GB) at 24 requests and the
    80 GB of an H100 at 119 (16e9 / 671,088,640 = 23.8; 80e9 / 671,088,640 = 119.2)."""
    per_request = 5 * 2 * 8 * 128 * 2 * 32768  # the article's DFlash cache per request
    assert int(np.ceil(16e9 / per_request)) == 24
    assert int(np.floor(80e9 / per_request)) == 119


def test_kv_bytes_per_token_by_hand() -> None:
    # Llama-3.1-8B: 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 131,072 B per token.
    assert kv_layout(load_model("llama-3.1-8b")).bytes_per_request(1.0) == 131_072
    # DeepSeek-V3 (MLA): 61 layers x (512 + 64) x 2 B = 70,272 B per token.
    assert kv_layout(load_model("deepseek-v3")).bytes_per_request(1.0) == 61 * 576 * 2


def test_sliding_layers_stop_growing_at_the_window() -> None:
    oss = load_model("gpt-oss-120b")
    per_layer = 2 * 8 * 64 * 2
    layout = kv_layout(oss)
    assert layout.bytes_per_request(100_000) == 18 * per_layer * 100_000 + 18 * per_layer * 128


def test_linear_attention_state_is_fixed() -> None:
    nxt = kv_layout(load_model("qwen3-next-80b-a3b"))
    growth = nxt.bytes_per_request(20000) - nxt.bytes_per_request(10000)
    assert growth == 12 * (2 * 2 * 256 * 2) * 10000  # only the 12 full-attention layers grow
    state = 36 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2)
    assert nxt.bytes_per_request(0) == state


def test_max_concurrency_by_hand() -> None:
    """Llama-3.1-8B on H100 at 8k: (0.9 x 80 GB - weights - workspace) / (8192 x 131,072 B)."""
    model = load_model("llama-3.1-8b")
    plan = memory_plan(model, H100.hbm_capacity_bytes, [1], 8192)
    free = 0.9 * 80e9 - weight_bytes(model) - plan.workspace_bytes
    assert plan.max_requests == int(free // (8192 * 131_072))
    assert 40 < plan.max_requests < 60


def test_drafter_cache_reduces_concurrency() -> None:
    model = load_model("qwen3-8b")
    drafter = load_drafter("dflash-qwen3-8b").cache_layout()
    alone = memory_plan(model, H100.hbm_capacity_bytes, [1], 32768)
    both = memory_plan(model, H100.hbm_capacity_bytes, [1], 32768, drafter_cache=drafter)
    assert both.max_requests == int(alone.max_requests * 36 / 41) or \
        abs(both.max_requests - alone.max_requests * 36 / 41) < 1


def test_a_model_that_does_not_fit() -> None:
    plan = memory_plan(load_model("llama-3.1-70b"), H100.hbm_capacity_bytes, [1, 8], 4096)
    assert plan.max_requests == 0 and not plan.fits.any()
    # 141 GB of bf16 weights: half of them per GPU still leaves no room for a 4k cache ...
    two = memory_plan(load_model("llama-3.1-70b"), H100.hbm_capacity_bytes, [1, 8], 4096, tp=2)
    assert two.max_requests == 0
    # ... a quarter does.
    four = memory_plan(load_model("llama-3.1-70b"), H100.hbm_capacity_bytes, [1, 8], 4096, tp=4)
    assert four.max_requests > 8 and four.fits.all()


def test_bad_memory_fraction() -> None:
    with pytest.raises(SpecError, match="memory_fraction: must be in"):
        memory_plan(load_model("qwen3-8b"), 80e9, [1], 100, memory_fraction=1.5)


def test_kv_heads_replicated_beyond_their_count() -> None:
    """TP 16 over 8 KV heads: every GPU keeps one whole head (each head on two GPUs), so per
    token and layer 2 x 1 x 128 x 2 B = 512 B, for the target's cache, the drafter's cache,
    and the K/V the target's pass writes."""
    target = load_model("qwen3-8b")
    drafter = load_drafter("dflash-qwen3-8b", target=target)
    assert kv_layout(target, tp=16).bytes_per_token == 36 * 512
    assert drafter.cache_layout(tp=16).bytes_per_token == 5 * 512
    attention = next(op for op in pass_work(target, decode_passes([1], 0.0), tp=16)
                     if op.name == "attention")
    assert attention.kv_write_bytes[0] == 512
    qkv = next(op for op in pass_work(target, decode_passes([1], 0.0), tp=16)
               if op.name == "qkv_proj")
    assert qkv.gemm_n == 32 * 128 / 16 + 2 * 1 * 128  # 2 query heads, 1 K and 1 V head

"""Model specs: every built-in loads, parameter counts match hand arithmetic and the sizes the
model cards advertise, MoE expert reads match a Monte Carlo of routing, bad specs fail clearly."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.ops import expected_distinct_experts
from specsim.specs.models import load_model
from specsim.specs.params import active_params, param_breakdown, total_params, weight_bytes
from specsim.specs.paths import builtin_names

REQUIRED = {"llama-2-7b", "llama-3.1-8b", "llama-3.1-70b", "qwen3-4b", "qwen3-8b", "qwen3-14b",
            "qwen3-32b", "qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-120b",
            "qwen3-next-80b-a3b",
            # frontier models served with speculation (issue 26)
            "deepseek-r1", "deepseek-v3.2", "kimi-k2", "glm-4.5", "minimax-m2.5",
            "qwen3-235b-a22b", "llama-4-scout", "llama-4-maverick", "nemotron-3-nano-30b-a3b",
            "glm-5", "qwen3.5-397b-a17b"}


def test_all_required_models_are_built_in() -> None:
    assert REQUIRED <= set(builtin_names("models"))


@pytest.mark.parametrize("slug", sorted(REQUIRED))
def test_parameter_count_matches_advertised_size(slug: str) -> None:
    model = load_model(slug)
    assert model.advertised_params > 0, f"{slug}: no advertised size recorded"
    assert model.sources.get("advertised.params"), f"{slug}: advertised size has no source"
    assert total_params(model) == pytest.approx(model.advertised_params, rel=0.02)


# Vendors count active parameters differently; each row follows the convention of its source.
@pytest.mark.parametrize("slug, excluded, rel", [
    ("qwen3-30b-a3b", (), 0.02),  # card: 3.3B activated, embeddings included
    ("mixtral-8x7b", (), 0.02),  # Mistral AI: 12.9B per token, embeddings included
    ("deepseek-v3", (), 0.02),  # README: 37B activated
    ("gpt-oss-120b", ("embedding",), 0.005),  # paper: 5.13B, unembedding in, embedding out
    # card: "3B activated", one significant figure: 3.25B without embedding and LM head
    ("qwen3-next-80b-a3b", ("embedding", "lm_head"), 0.1),
])
def test_active_parameters_match_advertised(slug: str, excluded: tuple[str, ...],
                                            rel: float) -> None:
    model = load_model(slug)
    assert model.advertised_active_params > 0
    parts = param_breakdown(model)
    active = active_params(model) - sum(parts[k] for k in excluded)
    assert active == pytest.approx(model.advertised_active_params, rel=rel)


def test_llama_3_1_8b_by_hand() -> None:
    d, layers, ff, vocab, kv = 4096, 32, 14336, 128256, 8 * 128
    attention = d * d + 2 * d * kv + d * d  # q, k, v, o
    mlp = 3 * d * ff  # gate, up, down
    per_layer = attention + mlp + 2 * d  # two RMSNorms
    total = layers * per_layer + 2 * vocab * d + d  # untied embedding and LM head, final norm
    assert total == 8_030_261_248
    model = load_model("llama-3.1-8b")
    assert total_params(model) == total
    assert weight_bytes(model) == 2 * total  # bf16


def test_qwen3_8b_by_hand() -> None:
    d, layers, ff, vocab, kv, head = 4096, 36, 12288, 151936, 8 * 128, 128
    per_layer = (2 * d * d + 2 * d * kv) + 2 * head + 3 * d * ff + 2 * d  # + q/k norms
    assert layers * per_layer == 6_946_071_552  # the model card's "6.95B non-embedding"
    assert total_params(load_model("qwen3-8b")) == layers * per_layer + 2 * vocab * d + d


def test_mixtral_by_hand() -> None:
    d, layers, ff, experts, vocab = 4096, 32, 14336, 8, 32000
    attention = 2 * d * d + 2 * d * 1024
    per_layer = attention + experts * 3 * d * ff + d * experts + 2 * d  # experts + router
    total = layers * per_layer + 2 * vocab * d + d
    active = total - layers * (experts - 2) * 3 * d * ff  # 2 of 8 experts per token
    model = load_model("mixtral-8x7b")
    assert total_params(model) == total
    assert active_params(model) == pytest.approx(active)


def test_deepseek_v3_by_hand() -> None:
    d, heads, layers, dense_layers, vocab = 7168, 128, 61, 3, 129280
    q_lora, kv_lora, nope, rope, v = 1536, 512, 128, 64, 128
    attention = (d * q_lora + q_lora + q_lora * heads * (nope + rope)  # q down, norm, up
                 + d * (kv_lora + rope) + kv_lora  # kv down (latent + rope key), norm
                 + kv_lora * heads * (nope + v)  # kv up
                 + heads * v * d)  # output
    dense_mlp = 3 * d * 18432
    moe = 256 * 3 * d * 2048 + 3 * d * 2048 + d * 256  # routed, shared, router
    total = (layers * (attention + 2 * d) + dense_layers * dense_mlp
             + (layers - dense_layers) * moe + 2 * vocab * d + d)
    model = load_model("deepseek-v3")
    assert total_params(model) == total
    assert total == pytest.approx(671e9, rel=0.005)
    assert weight_bytes(model) == pytest.approx(total * 1.0)  # fp8 checkpoint


def test_gpt_oss_stores_experts_in_mxfp4() -> None:
    model = load_model("gpt-oss-120b")
    # 128 experts x 36 layers x (3 d ff + biases) at 4.25 bits; the rest in bf16.
    assert model.expert_bytes_per_param == pytest.approx(4.25 / 8)
    assert weight_bytes(model) < 0.6 * total_params(model)


@pytest.mark.parametrize("experts, k, n", [(8, 2, 1), (8, 2, 7), (128, 8, 1), (128, 8, 33),
                                           (256, 8, 100), (512, 10, 64)])
def test_expected_experts_against_monte_carlo(experts: int, k: int, n: int) -> None:
    """Route n tokens, each to k distinct experts chosen uniformly; count distinct experts."""
    rng = np.random.default_rng(1234)
    trials = max(300, 2_000_000 // (n * experts))
    scores = rng.random((trials, n, experts))
    chosen = np.argpartition(scores, k, axis=-1)[..., :k]  # k distinct uniform experts
    touched = np.zeros((trials, experts), dtype=bool)
    np.put_along_axis(touched, chosen.reshape(trials, n * k), True, axis=1)
    counts = touched.sum(axis=1)
    mean, stderr = counts.mean(), counts.std(ddof=1) / np.sqrt(trials)
    expected = expected_distinct_experts(experts, k, np.array([float(n)]))[0]
    assert abs(mean - expected) < 5 * stderr + 1e-9


def test_moe_reads_more_experts_as_the_pass_grows() -> None:
    n = np.array([1.0, 8.0, 64.0, 512.0])
    touched = expected_distinct_experts(128, 8, n)
    assert touched[0] == pytest.approx(8)
    assert np.all(np.diff(touched) > 0) and touched[-1] == pytest.approx(128, rel=1e-6)


def _spec(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "name": "Tiny", "source": "test", "architecture": "LlamaForCausalLM", "hidden_size": 64,
        "num_layers": 2, "num_attention_heads": 4, "num_kv_heads": 2, "head_dim": 16,
        "intermediate_size": 128, "vocab_size": 1000,
        "advertised": {"params": 1e5, "source": "test"},
    }
    data.update(overrides)
    return data


def test_a_file_model_loads(write_yaml) -> None:  # type: ignore[no-untyped-def]
    model = load_model(str(write_yaml("tiny.yaml", _spec())))
    per_layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64
    assert total_params(model) == 2 * per_layer + 2 * 1000 * 64 + 64


@pytest.mark.parametrize("overrides, message", [
    ({"num_kv_heads": 3}, r"'num_attention_heads' = 4 is not divisible by 'num_kv_heads' = 3"),
    ({"hidden_size": "big"}, r"field 'hidden_size' must be an integer, got 'big'"),
    ({"num_layers": None}, r"field 'num_layers' is missing"),
    ({"vocab_size": -5}, r"field 'vocab_size' must be in 1..1,000,000,000, got -5"),
    ({"layer_types": ["full_attention", "rwkv"]}, r"unknown kind 'rwkv'"),
    ({"layer_types": ["full_attention"]}, r"'layer_types' has 1 entries, 'num_layers' is 2"),
    ({"moe": {"num_experts": 4, "experts_per_token": 8, "expert_intermediate_size": 64}},
     r"'moe.experts_per_token' must be in 1..4, got 8"),
    ({"weight_dtype": "fp12"}, r"'weight_dtype' = 'fp12' is not one of"),
    ({"source": None}, r"field 'hidden_size' = 64 has no source"),
])
def test_bad_models_name_file_and_field(write_yaml, overrides, message) -> None:  # type: ignore[no-untyped-def]
    path = write_yaml("bad.yaml", _spec(**overrides))
    with pytest.raises(SpecError, match=message) as err:
        load_model(str(path))
    assert str(err.value).startswith(str(path))


def test_a_request_s_verified_tokens_route_with_locality() -> None:
    """By hand: the 16 tokens one request verifies count as 16^0.78 = 8.7 independent router
    draws (the median of three published distinct-expert counts), requests stay independent:
    2 requests x 8.69 = 17.39 draws touch 128 (1 - (120/128)^17.39) = 86.3 of Qwen3-30B-A3B's
    128 experts per layer, where 32 independent tokens would touch 111.8. A decoding step (1
    token per request) is independent routing unchanged."""
    from specsim.forward.ops import ROUTING_LOCALITY, pass_work
    from specsim.forward.shapes import uniform_passes
    from specsim.specs.models import load_model

    assert ROUTING_LOCALITY == 0.78
    model = load_model("qwen3-30b-a3b")
    draws = 2 * 16**0.78
    assert draws == pytest.approx(17.39, abs=0.01)
    verify = uniform_passes(16.0, np.array([2.0]), 0.0)
    up = {op.name: op for op in pass_work(model, verify)}["experts_up"]
    assert up.gemm_count is not None
    assert float(up.gemm_count[0]) == pytest.approx(128 * (1 - (120 / 128) ** draws))
    assert float(up.gemm_count[0]) == pytest.approx(86.3, abs=0.1)
    assert float(expected_distinct_experts(128, 8, np.array([32.0]))[0]) == pytest.approx(
        111.8, abs=0.1)
    decode = uniform_passes(1.0, np.array([32.0]), 0.0)
    up = {op.name: op for op in pass_work(model, decode)}["experts_up"]
    assert up.gemm_count is not None
    assert float(up.gemm_count[0]) == pytest.approx(128 * (1 - (120 / 128) ** 32))

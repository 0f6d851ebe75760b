"""`models import` across decoder families: published configs (tests/fixtures/hf_configs) come
out at their published parameter counts, family quirks (tied embeddings, head_dim, sliding
patterns, interleaved MoE) are read, and contradictory or unmodellable configs fail on the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specsim.errors import SpecError
from specsim.specs.hf_import import import_config
from specsim.specs.io import read_spec_file
from specsim.specs.models import Model, model_from_file
from specsim.specs.outputs import write_yaml
from specsim.specs.params import active_params, total_params

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"
PUBLISHED: dict[str, dict[str, Any]] = yaml.safe_load((FIXTURES / "published.yaml").read_text())


def _config(slug: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{slug}.json").read_text())
    return data


def _model(config: dict[str, Any], tmp_path: Path, name: str = "m") -> Model:
    path = tmp_path / f"{name}.yaml"
    write_yaml(path, import_config(config, name=name, source="test"), force=True)
    return model_from_file(read_spec_file(path), slug=name)


@pytest.mark.parametrize("slug", sorted(PUBLISHED))
def test_published_parameter_counts(slug: str, tmp_path: Path) -> None:
    row = PUBLISHED[slug]
    model = _model(_config(slug), tmp_path)
    assert total_params(model) == pytest.approx(float(row["params"]), rel=row["rel"])
    if "active" in row:
        active = float(row["active"])
        assert active_params(model) == pytest.approx(active, rel=max(row["rel"], 0.05))


def test_every_fixture_names_its_source() -> None:
    for path in FIXTURES.glob("*.json"):
        assert json.loads(path.read_text())["_source"].startswith("https://"), path.name


def test_gemma_quirks(tmp_path: Path) -> None:
    """Gemma 2: tied by default, head_dim 256 != 3584 / 16, even layers sliding (layer 0 local).
    Gemma 3: numbers under text_config, vocab 262208 by default, 5 local : 1 global."""
    g2 = _model(_config("gemma-2-9b"), tmp_path, "g2")
    assert g2.tie_word_embeddings and g2.head_dim == 256
    assert g2.layer_types[:2] == ("sliding_attention", "full_attention")
    assert g2.layer_counts["sliding_attention"] == 21 and g2.sliding_window == 4096
    g3 = _model(_config("gemma-3-27b-it"), tmp_path, "g3")
    assert (g3.hidden_size, g3.vocab_size, g3.num_layers) == (5376, 262208, 62)
    assert g3.qk_norm and g3.tie_word_embeddings and g3.sliding_window == 1024
    assert g3.layer_types[5] == "full_attention" and g3.layer_counts["full_attention"] == 10


def test_cohere2_and_phi3_windows(tmp_path: Path) -> None:
    """Command R7B: every 4th of 32 layers global (8), the rest sliding 4096; tied.
    Phi-3-mini: a window with no pattern applies to every layer; Phi-4: null window = none."""
    cohere = _model(_config("c4ai-command-r7b-12-2024"), tmp_path, "c")
    assert cohere.layer_counts == {"sliding_attention": 24, "full_attention": 8}
    assert cohere.tie_word_embeddings
    phi3 = _model(_config("phi-3-mini-4k-instruct"), tmp_path, "p3")
    assert phi3.layer_counts["sliding_attention"] == 32 and phi3.sliding_window == 2047
    phi4 = _model(_config("phi-4"), tmp_path, "p4")
    assert phi4.layer_counts["full_attention"] == 40


def test_llama4_interleaved_moe(tmp_path: Path) -> None:
    """Maverick: MoE every 2nd of 48 layers (24), dense ones 16384 wide, one shared expert;
    3 of 4 layers chunked-local (window 8192), every 4th global."""
    mav = _model(_config("llama-4-maverick-17b-128e-instruct"), tmp_path, "mav")
    assert mav.moe is not None and mav.num_moe_layers == 24 and mav.intermediate_size == 16384
    assert mav.moe.num_shared_experts == 1 and mav.moe.expert_intermediate_size == 8192
    assert mav.layer_counts == {"sliding_attention": 36, "full_attention": 12}
    scout = _model(_config("llama-4-scout-17b-16e-instruct"), tmp_path, "scout")
    assert scout.num_moe_layers == 48 and not scout.qk_norm  # Llama 4's QK norm has no weights


def test_glm_and_kimi(tmp_path: Path) -> None:
    air = _model(_config("glm-4.5-air"), tmp_path, "air")
    assert air.qkv_bias and air.moe is not None and air.moe.dense_layers == 1
    assert air.mtp_layers == 1 and air.moe.num_shared_experts == 1
    kimi = _model(_config("kimi-k2-instruct"), tmp_path, "kimi")
    assert kimi.mla is not None and kimi.moe is not None and kimi.moe.num_experts == 384
    assert kimi.weight_dtype == "fp8" and kimi.mtp_layers == 0


def test_olmo2_float32_config_is_served_in_bf16(tmp_path: Path) -> None:
    assert _model(_config("olmo-2-1124-7b"), tmp_path).weight_dtype == "bf16"


# Synthetic configs below (not facts about a checkpoint): they exercise the generic path.
SMALL = {"architectures": ["SomeNewForCausalLM"], "hidden_size": 512, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024,
         "vocab_size": 1000, "tie_word_embeddings": False}


def test_generic_path_for_an_unknown_architecture(tmp_path: Path) -> None:
    """Hand count: embed + head 2 * 1000 * 512; per layer q/o 2 * 512^2, k/v 2 * 512 * 128,
    MLP 3 * 512 * 1024, norms 2 * 512; final norm 512."""
    model = _model(SMALL, tmp_path)
    per_layer = 2 * 512 * 512 + 2 * 512 * 128 + 3 * 512 * 1024 + 2 * 512
    assert total_params(model) == 2 * 1000 * 512 + 4 * per_layer + 512
    assert model.head_dim == 64


def test_multimodal_text_config_is_read(tmp_path: Path) -> None:
    """A Mistral 3 style checkpoint: the decoder lives under text_config; vision is skipped."""
    config = {"architectures": ["Mistral3ForConditionalGeneration"],
              "text_config": {**SMALL, "architectures": None, "head_dim": 32},
              "vision_config": {"hidden_size": 99999, "num_hidden_layers": 99}}
    model = _model(config, tmp_path)
    assert (model.hidden_size, model.head_dim, model.architecture) == (
        512, 32, "Mistral3ForConditionalGeneration")


def test_generic_moe(tmp_path: Path) -> None:
    model = _model({**SMALL, "num_local_experts": 8, "num_experts_per_tok": 2}, tmp_path)
    assert model.moe is not None and model.moe.num_experts == 8
    assert model.moe.expert_intermediate_size == 1024


def test_moe_key_variants_of_other_families(tmp_path: Path) -> None:
    """ERNIE 4.5 names its experts moe_num_experts / moe_k / moe_num_shared_experts and places
    them with moe_layer_start_index .. moe_layer_end_index (inclusive) every
    moe_layer_interval-th layer ((i + 1) % interval == 0); Ling's num_shared_experts are each
    as wide as a routed expert; Hunyuan gives top-k per layer. Hand count of the 8-layer
    config below: layers 2..6 with (i + 1) % 1 == 0 are MoE (5), the other 3 dense."""
    ernie = {**SMALL, "num_hidden_layers": 8, "moe_num_experts": 16, "moe_k": 4,
             "moe_intermediate_size": 256, "moe_num_shared_experts": 2,
             "moe_layer_start_index": 2, "moe_layer_end_index": 6, "moe_layer_interval": 1}
    model = _model(ernie, tmp_path, "ernie")
    assert model.moe is not None and model.num_moe_layers == 5 and model.moe.dense_layers == 3
    assert (model.moe.num_experts, model.moe.experts_per_token) == (16, 4)
    assert (model.moe.num_shared_experts, model.moe.shared_expert_intermediate_size) == (2, 256)
    attention = 2 * 512 * 512 + 2 * 512 * 128 + 2 * 512
    moe_layer = attention + 512 * 16 + (16 + 2) * 3 * 512 * 256
    dense_layer = attention + 3 * 512 * 1024
    assert total_params(model) == 2 * 1000 * 512 + 5 * moe_layer + 3 * dense_layer + 512
    every_other = _model({**ernie, "moe_layer_interval": 2}, tmp_path, "every_other")
    assert every_other.num_moe_layers == 2  # layers 3 and 5
    hunyuan = _model({**SMALL, "num_experts": 8, "moe_topk": [2, 2, 2, 2],
                      "num_shared_expert": [1, 1, 1, 1], "moe_intermediate_size": 256},
                     tmp_path, "hunyuan")
    assert hunyuan.moe is not None and hunyuan.moe.experts_per_token == 2
    assert hunyuan.moe.num_shared_experts == 1


def test_low_rank_query_listed_moe_layers_and_leading_dense_layers(tmp_path: Path) -> None:
    """Hand counts on SMALL (hidden 512, 8 heads of 64, 2 KV heads, 4 layers): a low-rank query
    of rank 128 (Step-3's share_q_dim) is 512 x 128 + a norm of 128 + 128 x 512 instead of
    512 x 512; `moe_layers_enum` lists the MoE layers; Trinity's `num_dense_layers` keeps
    the first layers dense; Apertus's MLP has two matrices, not three."""
    full = _model(SMALL, tmp_path, "full")
    low = _model({**SMALL, "share_q_dim": 128}, tmp_path, "low")
    assert low.q_lora_rank == 128
    assert total_params(full) - total_params(low) == 4 * (512 * 512 - (512 * 128 + 128
                                                                        + 128 * 512))
    moe = {**SMALL, "moe_num_experts": 4, "moe_top_k": 2, "moe_intermediate_size": 256}
    listed = _model({**moe, "moe_layers_enum": "1,2"}, tmp_path, "listed")
    assert listed.num_moe_layers == 2 and listed.moe is not None
    assert listed.moe.experts_per_token == 2
    shared = _model({**moe, "share_expert_dim": 384}, tmp_path, "shared")
    assert shared.moe is not None and shared.moe.num_shared_experts == 1
    assert shared.moe.shared_expert_intermediate_size == 384
    trinity = _model({**SMALL, "num_experts": 4, "num_experts_per_tok": 2,
                      "moe_intermediate_size": 256, "num_dense_layers": 3}, tmp_path, "t")
    assert trinity.num_moe_layers == 1
    apertus = _model({**SMALL, "architectures": ["ApertusForCausalLM"], "qk_norm": True},
                     tmp_path, "apertus")
    assert not apertus.gated_mlp and apertus.qk_norm
    assert total_params(full) - total_params(apertus) == 4 * (512 * 1024 - 2 * 64)


def test_longcat_flash_layers_and_identity_experts(tmp_path: Path) -> None:
    """LongCat-Flash: 28 layers of two MLA blocks and two dense FFNs each, one MoE per layer;
    12 of 768 routed slots, 256 of them identity experts with no weights: 8 real experts a
    token. An expert split that does not give whole experts is refused on its key."""
    model = _model(_config("longcat-flash-chat"), tmp_path, "longcat")
    assert model.num_layers == 56 and model.num_moe_layers == 28 and model.mla is not None
    assert model.moe is not None and model.moe.experts_per_token == 8
    assert model.moe.num_experts == 512 and model.moe.shared_expert_intermediate_size == 12288
    odd = {**_config("longcat-flash-chat"), "zero_expert_num": 100}
    with pytest.raises(SpecError, match=r"cannot model key 'zero_expert_num'"):
        import_config(odd, name="x", source="s", where="cfg.json")
    for bad in (True, "28", 0):  # the key of the file is named, not the one it stands for
        with pytest.raises(SpecError, match=r"cfg.json: key 'num_layers' must be a positive"):
            import_config({**_config("longcat-flash-chat"), "num_layers": bad}, name="x",
                          source="s", where="cfg.json")


def test_minimax_lightning_layers_are_linear_attention(tmp_path: Path) -> None:
    """MiniMax-Text-01's shapes (its config.json at huggingface.co/MiniMaxAI/MiniMax-Text-01:
    80 layers of hidden 6144, 64 heads of 128, 8 KV heads, 32 experts of 9216, top 2,
    vocabulary 200,064; attn_type_list 1 on every eighth layer): hand count of its published
    456B. Lightning layer: q, k, v and gate 4 x 6144 x 8192, out 8192 x 6144 = 251.7M (the
    spec's linear block adds 2 x 64 gate columns and a one-tap convolution: +0.8M); softmax
    layer: 6144 x (8192 + 2 x 1024) + 8192 x 6144 = 113.2M; experts 32 x 3 x 6144 x 9216 each
    layer; embeddings 2 x 200,064 x 6144. Read as all softmax attention it was 446.5B."""
    codes = [1 if (i + 1) % 8 == 0 else 0 for i in range(80)]
    config = {"architectures": ["MiniMaxText01ForCausalLM"], "attn_type_list": codes,
              "head_dim": 128, "hidden_size": 6144, "intermediate_size": 9216,
              "num_attention_heads": 64, "num_experts_per_tok": 2, "num_hidden_layers": 80,
              "num_key_value_heads": 8, "num_local_experts": 32, "shared_intermediate_size": 0,
              "tie_word_embeddings": False, "vocab_size": 200064}
    model = _model(config, tmp_path, "minimax")
    assert model.layer_counts == {"linear_attention": 70, "full_attention": 10}
    la = model.linear_attention
    assert la is not None and (la.num_value_heads, la.key_head_dim) == (64, 128)
    assert la.state_elems == 64 * 128 * 128 and la.conv_state_elems == 0
    by_hand = (70 * (4 * 6144 * 8192 + 8192 * 6144) + 10 * (6144 * 10240 + 8192 * 6144)
               + 80 * 32 * 3 * 6144 * 9216 + 2 * 200064 * 6144)
    assert total_params(model) == pytest.approx(by_hand, rel=0.001)
    assert total_params(model) == pytest.approx(456e9, rel=0.01)
    with pytest.raises(SpecError, match=r"key 'attn_type_list' must list 80 codes"):
        import_config({**config, "attn_type_list": [0, 2] * 40}, name="x", source="s",
                      where="cfg.json")


def test_grok2_residual_moe_is_an_always_on_expert(tmp_path: Path) -> None:
    """Grok-2's shapes as listed in https://huggingface.co/xai-org/grok-2/discussions/24 (64
    layers of hidden 8192, 64 query and 8 KV heads of 128, a shared FFN of 32,768 beside 8
    experts of 16,384, top 2, vocabulary 131,072, untied): 269.5B total, 115.0B active there.
    `residual_moe` (SGLang's and sgl-jax's Grok1DecoderLayer: a Grok1MLP of intermediate_size
    added to the MoE output) is one expert every token runs; without it 218B."""
    grok2 = {"architectures": ["Grok1ForCausalLM"], "hidden_size": 8192,
             "num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8,
             "head_dim": 128, "intermediate_size": 32768, "moe_intermediate_size": 16384,
             "num_local_experts": 8, "num_experts_per_tok": 2, "residual_moe": True,
             "vocab_size": 131072, "tie_word_embeddings": False}
    model = _model(grok2, tmp_path, "grok2")
    assert model.moe is not None and model.moe.num_shared_experts == 1
    assert model.moe.shared_expert_intermediate_size == 32768
    assert total_params(model) == pytest.approx(269.5e9, rel=0.01)
    assert active_params(model) == pytest.approx(115.0e9, rel=0.01)


@pytest.mark.parametrize("change, message", [
    ({"moe_k": 4, "moe_intermediate_size": 256},
     r"cannot model key 'moe_intermediate_size' \(an expert layout without a known "
     r"expert-count key"),
    ({"num_experts": 8, "moe_topk": [2, 2, 4, 2]},
     r"cannot model key 'moe_topk' \(per-layer values that differ\)"),
    ({"num_key_value_heads": None, "num_attention_groups": 0},
     r"key 'num_attention_groups' must be a positive integer"),
    ({"moe_num_experts": 4, "moe_k": 2, "moe_layer_start_index": 9},
     r"key 'moe_layer_start_index' = 9 is past the last of 4 layers"),
    ({"num_experts": 8, "moe_topk": []}, r"key 'moe_topk' is an empty list"),
    ({"qk_norm": "rms"}, r"key 'qk_norm' must be true or false"),
    ({"num_experts": 8, "num_experts_per_tok": 2, "moe_layers_enum": "1,9"},
     r"key 'moe_layers_enum' must list layer indices in 0..3"),
    ({"num_experts": 8, "num_experts_per_tok": 2, "moe_layers_enum": "a,b"},
     r"key 'moe_layers_enum' must list layer indices"),
    ({"num_experts": 8, "num_experts_per_tok": 2, "moe_layer_end_index": -3},
     r"key 'moe_layer_end_index' must be a layer index or -1"),
    ({"num_attention_heads": 7}, r"key 'head_dim' is missing and num_attention_heads = 7 "
                                 r"does not divide hidden_size = 512"),
    ({"num_key_value_heads": 0}, r"key 'num_key_value_heads' must be a positive integer"),
    ({"num_attention_heads": 0}, r"key 'num_attention_heads' must be a positive integer"),
    ({"intermediate_size": -4}, r"key 'intermediate_size' must be a positive integer"),
    ({"hidden_size": -512}, r"key 'hidden_size' must be a positive integer"),
    ({"num_key_value_heads": 3}, r"key 'num_key_value_heads' = 3 does not divide"),
    ({"layer_types": ["full_attention", "mamba", "full_attention", "full_attention"]},
     r"cannot model key 'layer_types' \(layer kind 'mamba'\)"),
    ({"num_local_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [9]},
     r"key 'mlp_only_layers' must list layer indices in 0..3"),
    ({"num_local_experts": 8, "num_experts_per_tok": 2, "moe_layer_freq": [1, 0]},
     r"key 'moe_layer_freq' as a list must hold 4 flags of 0 or 1"),
    ({"ssm_cfg": {}}, r"cannot model key 'ssm_cfg'"),
    ({"hidden_size_per_layer_input": 256}, r"cannot model key 'hidden_size_per_layer_input'"),
    ({"compress_ratios": [0, 4, 128, 4]}, r"cannot model key 'compress_ratios' \(compressed"),
    ({"hc_mult": 4}, r"cannot model key 'hc_mult' \(hyper-connections"),
    ({"attention_k_eq_v": True}, r"cannot model key 'attention_k_eq_v'"),
    ({"head_dim": 64, "global_head_dim": 128}, r"cannot model key 'global_head_dim'"),
    ({"linear_attn_config": {"kda_layers": [1, 2, 3]}},
     r"cannot model key 'linear_attn_config' \(Kimi Delta Attention"),
])
def test_contradictory_or_unmodellable_configs(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        import_config({**SMALL, **change}, name="x", source="s", where="cfg.json")


def test_head_dim_given_resolves_indivisible_heads(tmp_path: Path) -> None:
    model = _model({**SMALL, "num_attention_heads": 6, "num_key_value_heads": 2,
                    "head_dim": 96}, tmp_path)
    assert model.q_heads_dim == 576


def test_dbrx_nested_blocks_are_read(tmp_path: Path) -> None:
    """DBRX keeps its sizes in d_model / n_layers / n_heads and the nested attn_config and
    ffn_config (transformers DbrxConfig). Hand count: 40 layers of attention 6144 x (6144 +
    2 x 1024) + 6144 x 6144, a router 6144 x 16, 16 experts of 3 x 6144 x 10752, two norms;
    embedding and untied head 100352 x 6144 each: 131.60B, 36.47B with 4 of 16 experts."""
    model = _model(_config("dbrx-instruct"), tmp_path, "dbrx")
    assert (model.hidden_size, model.num_layers, model.num_kv_heads) == (6144, 40, 8)
    assert model.moe is not None and model.moe.num_experts == 16
    assert (model.moe.experts_per_token, model.moe.expert_intermediate_size) == (4, 10752)
    d, layers, vocab = 6144, 40, 100352
    per_layer = d * (d + 2 * 1024) + d * d + d * 16 + 16 * 3 * d * 10752 + 2 * d
    assert total_params(model) == pytest.approx(layers * per_layer + d + 2 * vocab * d)
    active = layers * (per_layer - 12 * 3 * d * 10752) + d + 2 * vocab * d
    assert active_params(model) == pytest.approx(active)


def test_decilm_per_layer_blocks(tmp_path: Path) -> None:
    """Llama-3.3-Nemotron-Super-49B: 49 of 80 layers keep attention (8 KV heads: 64 heads /
    n_heads_in_group 8), 31 are FFN-only; each FFN is int(2 x ffn_mult x 8192 / 3) rounded
    up to 256 wide (ffn_mult 5.25 -> 28672, 0.5 -> 2816), read as their mean."""
    model = _model(_config("llama-3.3-nemotron-super-49b-v1"), tmp_path, "decilm")
    assert model.layer_counts == {"full_attention": 49, "mlp_only": 31}
    assert model.num_kv_heads == 8 and model.num_dense_mlp_layers == 80
    blocks = _config("llama-3.3-nemotron-super-49b-v1")["block_configs"]
    widths = [-(-int(2 * b["ffn"]["ffn_mult"] * 8192 / 3) // 256) * 256 for b in blocks]
    assert widths.count(28672) == 49 and widths.count(2816) == 6
    assert model.intermediate_size == round(sum(widths) / 80)


@pytest.mark.parametrize("change, message", [
    ({"replace_with_linear": True}, r"cannot model key 'block_configs' \(layer 1's attention "
                                    r"replaced by a linear layer\)"),
    ({"n_heads_in_group": 4}, r"attention layers with different KV-head counts"),
    ({"window_length": 4096}, r"layer 1's windowed / sink attention"),
])
def test_decilm_unmodellable_blocks(change: dict[str, Any], message: str) -> None:
    config = _config("llama-3.3-nemotron-super-49b-v1")
    config["block_configs"][1]["attention"].update(change)
    with pytest.raises(SpecError, match=message):
        import_config(config, name="x", source="s", where="cfg.json")


def test_dense_mla_minicpm3(tmp_path: Path) -> None:
    """MiniCPM3-4B's shapes (MLA without experts; values hidden / heads = 64 wide, as vLLM's
    minicpm3.py sets v_head_dim): 62 layers, hidden 2560, 40 heads, q_lora 768, kv_lora 256,
    nope 64 + rope 32, MLP 6400, vocabulary 73448, untied. Hand count per layer: q 2560 x 768
    + 768 + 768 x 40 x 96, kv 2560 x 288 + 256 + 256 x 40 x 128, o 40 x 64 x 2560, MLP 3 x
    2560 x 6400, two norms: 4.262B in all."""
    config = {"architectures": ["MiniCPM3ForCausalLM"], "hidden_size": 2560,
              "num_attention_heads": 40, "num_key_value_heads": 40, "num_hidden_layers": 62,
              "intermediate_size": 6400, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
              "q_lora_rank": 768, "kv_lora_rank": 256, "vocab_size": 73448,
              "tie_word_embeddings": False}
    model = _model(config, tmp_path, "minicpm3")
    assert model.moe is None and model.mla is not None and model.mla.v_head_dim == 64
    d = 2560
    per_layer = (d * 768 + 768 + 768 * 40 * 96 + d * 288 + 256 + 256 * 40 * 128
                 + 40 * 64 * d + 3 * d * 6400 + 2 * d)
    assert total_params(model) == pytest.approx(62 * per_layer + d + 2 * 73448 * d)
    with pytest.raises(SpecError, match=r"cannot model key 'num_experts_per_tok' \(MLA with"):
        import_config({**config, "num_experts_per_tok": 8}, name="x", source="s")

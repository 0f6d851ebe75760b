"""`models import`: Hugging Face config.json files of each supported layout become specs whose
numbers match the config and whose sizes match the model cards; unknown layouts fail clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specsim.errors import SpecError
from specsim.specs.hf_import import import_config, read_config
from specsim.specs.io import read_spec_file
from specsim.specs.models import Model, model_from_file
from specsim.specs.outputs import write_yaml
from specsim.specs.params import active_params, total_params

# Architecture keys as published in each model's config.json on the Hugging Face Hub.
QWEN3_8B = {  # https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
    "architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "intermediate_size": 12288, "vocab_size": 151936, "tie_word_embeddings": False,
    "sliding_window": None, "use_sliding_window": False, "max_window_layers": 36,
}
DEEPSEEK_V3 = {  # https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
    "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
    "vocab_size": 129280, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "first_k_dense_replace": 3,
    "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"},
}
GPT_OSS_120B = {  # https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json
    "architectures": ["GptOssForCausalLM"], "hidden_size": 2880, "num_hidden_layers": 36,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
    "intermediate_size": 2880, "vocab_size": 201088, "num_local_experts": 128,
    "num_experts_per_tok": 4, "experts_per_token": 4, "sliding_window": 128,
    "attention_bias": True, "tie_word_embeddings": False,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "quantization_config": {"quant_method": "mxfp4"},
}
QWEN3_NEXT = {  # https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json
    "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 48,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "intermediate_size": 5120, "vocab_size": 151936, "full_attention_interval": 4,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 512,
    "num_experts_per_tok": 10, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "tie_word_embeddings": False, "mlp_only_layers": [],
}
MIXTRAL = {  # https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
    "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
    "sliding_window": None, "tie_word_embeddings": False,
}


def _import(config: dict[str, Any], tmp_path: Path, name: str = "m") -> Model:
    spec = import_config(config, name=name, source="test config")
    path = tmp_path / f"{name}.yaml"
    write_yaml(path, spec, force=False)
    return model_from_file(read_spec_file(path), slug=name)


@pytest.mark.parametrize("config, total, active", [
    (QWEN3_8B, 8.2e9, 8.2e9),  # model card: 8.2B
    (DEEPSEEK_V3, 671e9, 37e9),  # README: 671B total, 37B activated
    (GPT_OSS_120B, 116.83e9, 5.13e9 + 0.58e9),  # paper: 116.83B; active + the embedding
    (QWEN3_NEXT, 80e9, 3.9e9),  # card: 80B total, 3B activated (+ embedding and head)
    (MIXTRAL, 46.7e9, 12.9e9),  # Mistral AI: 46.7B total, 12.9B per token
])
def test_imported_sizes_match_model_cards(config, total, active, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _import(config, tmp_path)
    assert total_params(model) == pytest.approx(total, rel=0.02)
    assert active_params(model) == pytest.approx(active, rel=0.05)


def test_imported_numbers_are_the_configs(tmp_path: Path) -> None:
    ds = _import(DEEPSEEK_V3, tmp_path)
    assert ds.mla is not None and ds.moe is not None
    assert (ds.mla.kv_lora_rank, ds.mla.qk_rope_head_dim, ds.mla.q_lora_rank) == (512, 64, 1536)
    assert (ds.moe.num_experts, ds.moe.experts_per_token, ds.moe.dense_layers) == (256, 8, 3)
    assert ds.weight_dtype == "fp8" and ds.mtp_layers == 1
    oss = _import(GPT_OSS_120B, tmp_path, "oss")
    assert oss.layer_counts["sliding_attention"] == 18 and oss.sliding_window == 128
    assert oss.moe is not None and oss.moe.weight_dtype == "mxfp4"
    nxt = _import(QWEN3_NEXT, tmp_path, "next")
    assert nxt.layer_counts == {"linear_attention": 36, "full_attention": 12}
    assert nxt.layer_types[3] == "full_attention" and nxt.attention_output_gate
    qwen = _import(QWEN3_8B, tmp_path, "qwen")
    assert qwen.qk_norm and qwen.layer_counts["full_attention"] == 36


def test_every_number_gets_the_given_source(tmp_path: Path) -> None:
    spec = import_config(QWEN3_8B, name="q", source="https://example/config.json")
    path = tmp_path / "q.yaml"
    write_yaml(path, spec, force=False)
    sources = read_spec_file(path).sources
    assert sources["hidden_size"] == "https://example/config.json"


@pytest.mark.parametrize("change, message", [
    ({"architectures": ["MambaForCausalLM"]}, r"cannot model key 'architectures'"),
    ({"architectures": None}, r"missing key 'architectures'"),
    ({"hidden_size": None}, r"missing key 'hidden_size' \(needed for Qwen3ForCausalLM\)"),
    ({"num_key_value_heads": 5}, r"key 'num_key_value_heads' = 5 does not divide "
                                 r"num_attention_heads = 32"),
    ({"vocab_size": "many"}, r"key 'vocab_size' must be a positive integer"),
])
def test_bad_configs_fail_with_the_key(change, message) -> None:  # type: ignore[no-untyped-def]
    config = {**QWEN3_8B, **change}
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(SpecError, match=message):
        import_config(config, name="x", source="s", where="cfg.json")


def test_moe_config_without_expert_key(tmp_path: Path) -> None:
    config = {k: v for k, v in MIXTRAL.items() if k != "num_local_experts"}
    with pytest.raises(SpecError, match="missing key 'num_local_experts'"):
        import_config(config, name="x", source="s")


def test_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 4096,')
    with pytest.raises(SpecError, match=r"config.json: malformed JSON \(line 1"):
        read_config(path)


def test_json_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps([1, 2]))
    with pytest.raises(SpecError, match="expected a JSON object"):
        read_config(path)

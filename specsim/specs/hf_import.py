"""Turn a Hugging Face config.json into a specsim model spec (a plain mapping ready for YAML).

Only architectures whose layout we know are accepted; anything else is an error that names
the architecture or the missing key, never a guess. Defaults applied are those of the
transformers config classes themselves (e.g. num_key_value_heads = num_attention_heads).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from specsim.errors import SpecError

Config = Mapping[str, Any]

_DENSE = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}
_MOE = {"MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"}
_QK_NORM = {"Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM"}
_QKV_BIAS = {"Qwen2ForCausalLM", "Qwen2MoeForCausalLM"}
_QUANT_DTYPES = {"fp8": "fp8", "mxfp4": "mxfp4"}


class _Keys:
    """Reads keys from a config, naming the file and the key when one is missing or wrong."""

    def __init__(self, config: Config, where: str, architecture: str) -> None:
        self.config, self.where, self.arch = config, where, architecture

    def int(self, key: str, default: int | None = None) -> int:
        value = self.config.get(key, default)
        if value is None:
            raise SpecError(f"{self.where}: missing key '{key}' (needed for {self.arch})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SpecError(f"{self.where}: key '{key}' must be a non-negative integer, "
                            f"got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            raise SpecError(f"{self.where}: key '{key}' must be true or false, got {value!r}")
        return value


def read_config(path: Path) -> dict[str, Any]:
    """Parse a config.json, one clear line on any problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise SpecError(f"{path}: cannot read ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise SpecError(f"{path}: malformed JSON (line {err.lineno}: {err.msg})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a JSON object")
    return data


def architecture_of(config: Config, where: str) -> str:
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise SpecError(f"{where}: missing key 'architectures' (a list naming the model class)")
    arch = archs[0]
    if arch not in _BUILDERS:
        raise SpecError(f"{where}: unsupported architecture '{arch}'; supported: "
                        f"{', '.join(sorted(_BUILDERS))}")
    return arch


def import_config(config: Config, *, name: str, source: str, where: str = "config.json"
                  ) -> dict[str, Any]:
    """The model spec mapping for a config.json; `source` is recorded for every number."""
    arch = architecture_of(config, where)
    k = _Keys(config, where, arch)
    spec: dict[str, Any] = {"name": name, "source": source, "architecture": arch}
    spec.update(_common(k))
    spec.update(_BUILDERS[arch](k))
    if spec["num_attention_heads"] % spec["num_kv_heads"]:
        raise SpecError(f"{where}: num_attention_heads = {spec['num_attention_heads']} is not "
                        f"divisible by num_key_value_heads = {spec['num_kv_heads']}")
    return spec


def _common(k: _Keys) -> dict[str, Any]:
    heads = k.int("num_attention_heads")
    hidden = k.int("hidden_size")
    if heads == 0 or hidden == 0:
        raise SpecError(f"{k.where}: 'hidden_size' and 'num_attention_heads' must be > 0")
    return {
        "hidden_size": hidden,
        "num_layers": k.int("num_hidden_layers"),
        "num_attention_heads": heads,
        "num_kv_heads": k.int("num_key_value_heads", heads),
        "head_dim": k.int("head_dim", hidden // heads),
        "intermediate_size": k.int("intermediate_size"),
        "vocab_size": k.int("vocab_size"),
        "tie_word_embeddings": k.bool("tie_word_embeddings", False),
        "weight_dtype": _weight_dtype(k.config),
    }


def _weight_dtype(config: Config) -> str:
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        method = quant.get("quant_method")
        if method == "mxfp4":
            return "bf16"  # only the experts are MXFP4; set on the moe block
        if method in _QUANT_DTYPES:
            return _QUANT_DTYPES[method]
    return "bf16"


def _dense(k: _Keys) -> dict[str, Any]:
    out: dict[str, Any] = {
        "qkv_bias": k.arch in _QKV_BIAS or k.bool("attention_bias", False),
        "qk_norm": k.arch in _QK_NORM,
    }
    out.update(_sliding(k))
    return out


def _sliding(k: _Keys) -> dict[str, Any]:
    """Sliding-window layers: only when the config actually enables them."""
    window = k.config.get("sliding_window")
    if not window or k.config.get("use_sliding_window") is False:
        return {}
    layers = k.int("num_hidden_layers")
    first_full = k.int("max_window_layers", layers)
    types = ["sliding_attention" if i >= first_full else "full_attention" for i in range(layers)] \
        if "max_window_layers" in k.config else ["sliding_attention"] * layers
    return {"sliding_window": k.int("sliding_window"), "layer_types": types}


def _moe_block(k: _Keys, *, experts_key: str, size_key: str) -> dict[str, Any]:
    return {
        "num_experts": k.int(experts_key),
        "experts_per_token": k.int("num_experts_per_tok"),
        "expert_intermediate_size": k.int(size_key),
    }


def _mixtral_like(k: _Keys) -> dict[str, Any]:
    out = _dense(k)
    if k.arch == "MixtralForCausalLM":
        out["moe"] = _moe_block(k, experts_key="num_local_experts", size_key="intermediate_size")
    else:
        out["moe"] = _moe_block(k, experts_key="num_experts", size_key="moe_intermediate_size")
        shared = k.int("shared_expert_intermediate_size", 0)
        if shared:
            out["moe"].update(num_shared_experts=1, shared_expert_intermediate_size=shared)
        if k.config.get("mlp_only_layers"):
            raise SpecError(f"{k.where}: 'mlp_only_layers' (dense layers between MoE layers) "
                            "is not supported")
    return out


def _deepseek(k: _Keys) -> dict[str, Any]:
    q_lora = k.config.get("q_lora_rank") or 0
    return {
        "mla": {
            "q_lora_rank": int(q_lora),
            "kv_lora_rank": k.int("kv_lora_rank"),
            "qk_nope_head_dim": k.int("qk_nope_head_dim"),
            "qk_rope_head_dim": k.int("qk_rope_head_dim"),
            "v_head_dim": k.int("v_head_dim"),
        },
        "moe": {
            **_moe_block(k, experts_key="n_routed_experts", size_key="moe_intermediate_size"),
            "num_shared_experts": k.int("n_shared_experts", 0),
            "shared_expert_intermediate_size": k.int("moe_intermediate_size"),
            "dense_layers": k.int("first_k_dense_replace", 0),
        },
        "mtp_layers": k.int("num_nextn_predict_layers", 0),
    }


def _gpt_oss(k: _Keys) -> dict[str, Any]:
    types = k.config.get("layer_types")
    if not isinstance(types, list):
        raise SpecError(f"{k.where}: missing key 'layer_types' (needed for {k.arch})")
    quant = k.config.get("quantization_config") or {}
    moe: dict[str, Any] = {
        **_moe_block(k, experts_key="num_local_experts", size_key="intermediate_size"),
        "expert_bias": True,
    }
    if isinstance(quant, dict) and quant.get("quant_method") == "mxfp4":
        moe["weight_dtype"] = "mxfp4"
    return {
        "qkv_bias": k.bool("attention_bias", False),
        "attention_output_bias": k.bool("attention_bias", False),
        "attention_sinks": True,
        "sliding_window": k.int("sliding_window"),
        "layer_types": list(types),
        "moe": moe,
    }


def _qwen3_next(k: _Keys) -> dict[str, Any]:
    layers = k.int("num_hidden_layers")
    interval = k.int("full_attention_interval")
    if interval == 0:
        raise SpecError(f"{k.where}: 'full_attention_interval' must be > 0")
    types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
             for i in range(layers)]
    moe = _moe_block(k, experts_key="num_experts", size_key="moe_intermediate_size")
    shared = k.int("shared_expert_intermediate_size", 0)
    if shared:
        moe.update(num_shared_experts=1, shared_expert_intermediate_size=shared)
    return {
        "qk_norm": True,
        "attention_output_gate": True,
        "layer_types": types,
        "linear_attention": {
            "num_key_heads": k.int("linear_num_key_heads"),
            "num_value_heads": k.int("linear_num_value_heads"),
            "key_head_dim": k.int("linear_key_head_dim"),
            "value_head_dim": k.int("linear_value_head_dim"),
            "conv_kernel_size": k.int("linear_conv_kernel_dim"),
        },
        "moe": moe,
    }


_BUILDERS: dict[str, Callable[[_Keys], dict[str, Any]]] = {
    **dict.fromkeys(_DENSE, _dense),
    **dict.fromkeys(_MOE, _mixtral_like),
    "DeepseekV2ForCausalLM": _deepseek,
    "DeepseekV3ForCausalLM": _deepseek,
    "GptOssForCausalLM": _gpt_oss,
    "Qwen3NextForCausalLM": _qwen3_next,
}

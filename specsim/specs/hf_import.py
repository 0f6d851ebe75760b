"""Turn a Hugging Face config.json into a specsim model spec (a plain mapping ready for YAML).

Any decoder whose config carries the standard fields (hidden_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
tie_word_embeddings, the usual MoE and sliding-window keys) imports through one generic path.
Families whose layout differs from those fields, or whose config class fills absent keys with
other defaults, have an entry in `_FAMILIES` (defaults as in the transformers config classes,
e.g. Gemma's tied embeddings). Multimodal checkpoints are read from their `text_config`; the
vision tower is not counted. What cannot be modelled is an error that names the key.

This module holds the entry points, the fields every decoder has and the family table;
the generic path's MoE and MLA blocks are read in `hf_decoder`, the families' own readers
in `hf_hybrid` (state-space and linear-attention layers) and `hf_families` (the others),
every key through `hf_keys.Keys`; `hf_hub` finds a config.json (a path or a Hub repo id).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsim.errors import SpecError
from specsim.specs.fields import show
from specsim.specs.hf_decoder import decoder, deepseek
from specsim.specs.hf_families import (
    dbrx_defaults,
    decilm,
    decilm_defaults,
    gpt_oss,
    llama4,
    longcat,
    longcat_defaults,
    mimo_v2,
    minicpm3_defaults,
)
from specsim.specs.hf_hybrid import minimax, nemotron_defaults, nemotron_h, qwen3_5, qwen3_next
from specsim.specs.hf_keys import Config, Keys, kind_list
from specsim.specs.io import read_json
from specsim.specs.names import display_name_problem, require

_QUANT_DTYPES = {"fp8": "fp8", "mxfp4": "mxfp4"}
_ATTENTION_KINDS = ("full_attention", "sliding_attention")
# Keys whose presence means a layer kind or block that the spec cannot express.
_UNMODELLED_KEYS = {
    "ssm_cfg": "state-space (Mamba) layers",
    "mamba_d_state": "state-space (Mamba) layers",
    "attn_layer_indices": "hybrid attention / state-space layers",
    "cross_attention_layers": "cross-attention layers",
    "altup_num_inputs": "AltUp per-layer inputs (Gemma 3n)",
    "dual_chunk_attention_config": "dual-chunk attention",
    "linear_attn_config": "Kimi Delta Attention (linear attention) layers",
    "compress_ratios": "compressed sparse attention (DeepSeek-V4)",
    "compress_rates": "compressed sparse attention (DeepSeek-V4)",
    "o_lora_rank": "a grouped low-rank output projection (DeepSeek-V4)",
    "hc_mult": "hyper-connections: several residual streams (DeepSeek-V4)",
}
# Keys a family's configs all carry, whose set value is a block the spec cannot express
# (Gemma 4: transformers' Gemma4TextConfig).
_UNMODELLED_WHEN_SET = {
    "hidden_size_per_layer_input": "per-layer input embeddings (Gemma 4 E-models)",
    "num_kv_shared_layers": "layers that reuse an earlier layer's KV cache",
    "attention_k_eq_v": "keys used as values in global layers (Gemma 4)",
    "enable_moe_block": "an MoE block beside the dense MLP (Gemma 4)",
}


@dataclass(frozen=True, slots=True)
class _Family:
    """How one architecture differs from the generic path.

    defaults: its config class's values for keys a published config may omit; builder: the
    function that reads its blocks (generic decoder by default); qkv_bias / qk_norm: always
    present in that family; sliding_pattern: every p-th layer global, the others sliding
    (Gemma 3, Cohere 2) when the config has no `layer_types`; alternating: even layers
    sliding (Gemma 2); derived: defaults computed from the config itself (Nemotron-H's layer
    count from its block list).
    """

    defaults: Mapping[str, Any] = field(default_factory=dict)
    builder: Callable[[Keys], dict[str, Any]] | None = None
    derived: Callable[[Config, str], dict[str, Any]] | None = None
    qkv_bias: bool = False
    qk_norm: bool = False
    sliding_pattern: int = 0
    alternating: bool = False
    required: tuple[str, ...] = ()
    gated_mlp: bool = True  # False: up -> activation -> down, no gate (Apertus)


def read_config(path: Path) -> dict[str, Any]:
    """Parse a config.json, one clear line on any problem."""
    data = read_json(path, what="config.json")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a JSON object")
    return data


def architecture_of(config: Config, where: str) -> str:
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise SpecError(f"{where}: missing key 'architectures' (a list naming the model class)")
    return archs[0]


def is_generic(config: Config, where: str = "config.json") -> bool:
    """True when the architecture has no entry of its own and imports by the standard fields."""
    return architecture_of(config, where) not in _FAMILIES


def text_config(config: Config) -> Config:
    """The decoder's keys: `text_config` of a multimodal checkpoint, else the config itself.
    Keys only at the top level (tie_word_embeddings, quantization_config) are inherited."""
    inner = config.get("text_config")
    if not isinstance(inner, dict):
        return config
    merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
    merged.update({k: v for k, v in inner.items() if v is not None})
    return merged


def import_config(config: Config, *, name: str, source: str, where: str = "config.json"
                  ) -> dict[str, Any]:
    """The model spec mapping for a config.json; `source` is recorded for every number."""
    require(name, display_name_problem, f"{where}: field 'name' of the model spec")
    arch = architecture_of(config, where)
    fam = _FAMILIES.get(arch, _Family())
    text = text_config(config)
    derived = fam.derived(text, where) if fam.derived else {}
    k = Keys(text, where, arch, {**fam.defaults, **derived})
    for key, what in _UNMODELLED_KEYS.items():
        if k.has(key):
            raise k.cannot(key, what)
    for key, what in _UNMODELLED_WHEN_SET.items():  # present in every config, set in some
        if k.get(key) not in (None, False, 0, [], {}):
            raise k.cannot(key, what)
    if k.has("global_head_dim") and k.get("global_head_dim") != k.get("head_dim"):
        raise k.cannot("global_head_dim", "global layers with heads of another size than the "
                       "sliding ones (Gemma 4)")
    if any(word in arch.lower() for word in _UNMODELLED_NAMES):
        raise k.cannot("architectures", "recurrent / state-space layers")
    for key in fam.required:
        k.int(key, minimum=1)
    spec: dict[str, Any] = {"name": name, "source": source, "architecture": arch}
    spec.update(_common(k, fam))
    spec.update((fam.builder or decoder)(k))
    return spec


def _common(k: Keys, fam: _Family) -> dict[str, Any]:
    hidden = k.int("hidden_size", minimum=1)
    heads = k.int("num_attention_heads", minimum=1)
    # Step-3 calls its KV heads attention groups
    kv_key = "num_attention_groups" if not k.has("num_key_value_heads") and \
        k.has("num_attention_groups") else "num_key_value_heads"
    kv_heads = k.int(kv_key, heads, minimum=1)
    if not k.has("head_dim") and hidden % heads:
        raise SpecError(f"{k.where}: key 'head_dim' is missing and num_attention_heads = {heads} "
                        f"does not divide hidden_size = {hidden}")
    if heads % kv_heads:
        raise SpecError(f"{k.where}: key 'num_key_value_heads' = {kv_heads} does not divide "
                        f"num_attention_heads = {heads}")
    tie_default = bool(fam.defaults.get("tie_word_embeddings", False))
    return {
        "hidden_size": hidden,
        "num_layers": k.int("num_hidden_layers", minimum=1),
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": k.int("head_dim", hidden // heads, minimum=1),
        # all-MoE configs (Qwen3.5 MoE) give no dense width; none of their layers uses one
        "intermediate_size": k.int("intermediate_size", k.get("moe_intermediate_size"),
                                   minimum=1),
        "vocab_size": k.int("vocab_size", minimum=1),
        "tie_word_embeddings": k.bool("tie_word_embeddings", tie_default),
        "weight_dtype": _weight_dtype(k.config, k.where),
        **({"qkv_bias": True} if fam.qkv_bias or k.bool("attention_bias", False) else {}),
        **({"qk_norm": True} if fam.qk_norm or (k.bool("use_qk_norm", False)
                                                 or k.bool("qk_norm", False))
           and k.arch not in _WEIGHTLESS_QK_NORM else {}),
        **({} if fam.gated_mlp else {"gated_mlp": False}),
        # Step-3's low-rank query (share_q_dim): hidden -> share_q_dim -> the heads
        **({"q_lora_rank": k.int("share_q_dim", minimum=1)} if k.has("share_q_dim") else {}),
        **_layers(k, fam),
    }


def _weight_dtype(config: Config, where: str) -> str:
    """Weights as stored: the quantization method if any, else bf16 (torch_dtype is ignored:
    OLMo 2 publishes float32 checkpoints that are served in bf16)."""
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        method = quant.get("quant_method")
        if method is not None and not isinstance(method, str):
            raise SpecError(f"{where}: key 'quantization_config.quant_method' must be a "
                            f"string, got {show(method, 40)}")
        if method == "mxfp4":
            return "bf16"  # only the experts are MXFP4; set on the moe block
        if method in _QUANT_DTYPES:
            return _QUANT_DTYPES[method]
    return "bf16"


def _layers(k: Keys, fam: _Family) -> dict[str, Any]:
    """Layer kinds and the window: `layer_types`, else the family's pattern, else Qwen's
    max_window_layers, else every layer sliding when a window is set. A null or zero window,
    or use_sliding_window = false, means no sliding layers."""
    layers = k.int("num_hidden_layers", minimum=1)
    types = k.get("layer_types")
    if types is not None and k.arch not in _OWN_LAYER_TYPES:
        if not kind_list(types, layers):
            raise SpecError(f"{k.where}: key 'layer_types' must list {layers} layer kinds")
        if k.has("index_topk"):  # a DSA layer is full MLA attention over the selected tokens
            types = ["full_attention" if t == "deepseek_sparse_attention" else t for t in types]
        bad = sorted({t for t in types if t not in _ATTENTION_KINDS}, key=str)
        if bad:
            raise k.cannot("layer_types", f"layer kind {bad[0]!r}")
        if "sliding_attention" not in types:
            return {}
        return {"sliding_window": k.int("sliding_window", minimum=1), "layer_types": list(types)}
    window = k.get("sliding_window")
    if not window or k.config.get("use_sliding_window") is False or k.arch in _OWN_LAYER_TYPES:
        return {}
    pattern = k.int("sliding_window_pattern", fam.sliding_pattern)
    if pattern:
        kinds = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                 for i in range(layers)]
    elif fam.alternating:
        kinds = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    elif k.has("max_window_layers"):
        first = k.int("max_window_layers")
        kinds = ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
    else:
        kinds = ["sliding_attention"] * layers
    if "sliding_attention" not in kinds:
        return {}
    return {"sliding_window": k.int("sliding_window", minimum=1), "layer_types": kinds}


# Gemma 3 text defaults (Gemma3TextConfig): the published 27B file omits vocab_size and more.
_GEMMA3_TEXT = {"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4,
                "head_dim": 256, "sliding_window": 4096, "tie_word_embeddings": True}
_TIED = {"tie_word_embeddings": True}
_QWEN3_5 = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
            "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM")
_UNMODELLED_NAMES = ("mamba", "rwkv", "jamba", "zamba", "recurrentgemma", "xlstm")
_WEIGHTLESS_QK_NORM = {"Llama4ForConditionalGeneration", "Llama4ForCausalLM"}  # an L2 norm
_MINIMAX = ("MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM", "MiniMaxForCausalLM")
_OWN_LAYER_TYPES = {*_MINIMAX, "Qwen3NextForCausalLM", "Llama4ForConditionalGeneration",
                    "Llama4ForCausalLM", "NemotronHForCausalLM", "MiMoV2FlashForCausalLM",
                    *_QWEN3_5}

_FAMILIES: dict[str, _Family] = {
    "Qwen2ForCausalLM": _Family(qkv_bias=True),
    "Qwen2MoeForCausalLM": _Family(qkv_bias=True, required=("num_experts",)),
    "Qwen3ForCausalLM": _Family(qk_norm=True),
    "Qwen3MoeForCausalLM": _Family(qk_norm=True, required=("num_experts",)),
    "MixtralForCausalLM": _Family(required=("num_local_experts",)),
    "Qwen3NextForCausalLM": _Family(builder=qwen3_next, qk_norm=True),
    **{arch: _Family(builder=qwen3_5, qk_norm=True) for arch in _QWEN3_5},
    "GemmaForCausalLM": _Family(defaults=_TIED),
    "Gemma2ForCausalLM": _Family(defaults={**_TIED, "head_dim": 256}, alternating=True),
    "Gemma3ForCausalLM": _Family(defaults=_GEMMA3_TEXT, qk_norm=True, sliding_pattern=6),
    "Gemma3ForConditionalGeneration": _Family(defaults=_GEMMA3_TEXT, qk_norm=True,
                                              sliding_pattern=6),
    "CohereForCausalLM": _Family(defaults=_TIED),
    "Cohere2ForCausalLM": _Family(defaults=_TIED, sliding_pattern=4),
    "Olmo2ForCausalLM": _Family(qk_norm=True),  # norms span the projection; counted per head
    "GlmForCausalLM": _Family(qkv_bias=True),
    "Glm4ForCausalLM": _Family(qkv_bias=True),
    "Glm4MoeForCausalLM": _Family(),
    "Llama4ForConditionalGeneration": _Family(builder=llama4),
    "Llama4ForCausalLM": _Family(builder=llama4),
    "DeepseekV2ForCausalLM": _Family(builder=deepseek),
    "DeepseekV3ForCausalLM": _Family(builder=deepseek),
    "DeepseekV32ForCausalLM": _Family(builder=deepseek),
    "NemotronHForCausalLM": _Family(builder=nemotron_h, derived=nemotron_defaults),
    "MiMoV2FlashForCausalLM": _Family(builder=mimo_v2),
    "GptOssForCausalLM": _Family(builder=gpt_oss),
    "LongcatFlashForCausalLM": _Family(builder=longcat, derived=longcat_defaults),
    **{arch: _Family(builder=minimax) for arch in _MINIMAX},
    "DbrxForCausalLM": _Family(derived=dbrx_defaults),
    "DeciLMForCausalLM": _Family(builder=decilm, derived=decilm_defaults),
    "MiniCPM3ForCausalLM": _Family(derived=minicpm3_defaults),
    # Apertus: up_proj -> xIELU -> down_proj, no gate (vLLM / SGLang apertus.py)
    "ApertusForCausalLM": _Family(gated_mlp=False),
}

"""Turn a Hugging Face config.json into a specsim model spec (a plain mapping ready for YAML).

Any decoder whose config carries the standard fields (hidden_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
tie_word_embeddings, the usual MoE and sliding-window keys) imports through one generic path.
Families whose layout differs from those fields, or whose config class fills absent keys with
other defaults, have an entry in `_FAMILIES` (defaults as in the transformers config classes,
e.g. Gemma's tied embeddings). Multimodal checkpoints are read from their `text_config`; the
vision tower is not counted. What cannot be modelled is an error that names the key.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from specsim.errors import SpecError
from specsim.specs.io import MAX_INTEGER, MAX_LAYERS, probe, read_json, show
from specsim.specs.names import display_name_problem, is_hub_id, require

Config = Mapping[str, Any]

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


class _Keys:
    """Reads keys from the text config, naming the file and the key when one is missing or
    wrong; `defaults` are the family's config-class defaults for absent keys."""

    def __init__(self, config: Config, where: str, architecture: str,
                 defaults: Mapping[str, Any]) -> None:
        self.config, self.where, self.arch, self.defaults = config, where, architecture, defaults

    def get(self, key: str, default: Any = None) -> Any:
        value = self.config.get(key)
        return self.defaults.get(key, default) if value is None else value

    def has(self, key: str) -> bool:
        return self.get(key) is not None

    def int(self, key: str, default: int | None = None, *, minimum: int = 0) -> int:
        """An integer key in minimum..its cap (the model spec's: MAX_LAYERS for the layer
        count, whose per-layer lists are built here, else MAX_INTEGER)."""
        value = self.get(key, default)
        if value is None:
            raise SpecError(f"{self.where}: missing key '{key}' (needed for {self.arch})")
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            what = "a positive" if minimum > 0 else "a non-negative"
            raise SpecError(f"{self.where}: key '{key}' must be {what} integer, "
                            f"got {show(value, 40)}")
        cap = MAX_LAYERS if key == "num_hidden_layers" else MAX_INTEGER
        if value > cap:
            raise SpecError(f"{self.where}: key '{key}' must be at most {cap:,}, "
                            f"got {show(value, 40)}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise SpecError(f"{self.where}: key '{key}' must be true or false, got {value!r}")
        return value

    def cannot(self, key: str, what: str) -> SpecError:
        return SpecError(f"{self.where}: cannot model key '{key}' ({what}) of {self.arch}")


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
    builder: Callable[[_Keys], dict[str, Any]] | None = None
    derived: Callable[[Config, str], dict[str, Any]] | None = None
    qkv_bias: bool = False
    qk_norm: bool = False
    sliding_pattern: int = 0
    alternating: bool = False
    required: tuple[str, ...] = ()
    gated_mlp: bool = True  # False: up -> activation -> down, no gate (Apertus)


def _kind_list(value: object, length: int) -> TypeGuard[list[str]]:
    """True when `value` is a list of `length` strings (a per-layer list of kinds); checked
    before the kinds are compared as a set, which a list or mapping in it would break."""
    return isinstance(value, list) and len(value) == length and \
        all(isinstance(v, str) for v in value)


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
    k = _Keys(text, where, arch, {**fam.defaults, **derived})
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
    spec.update((fam.builder or _decoder)(k))
    return spec


def _common(k: _Keys, fam: _Family) -> dict[str, Any]:
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


def _layers(k: _Keys, fam: _Family) -> dict[str, Any]:
    """Layer kinds and the window: `layer_types`, else the family's pattern, else Qwen's
    max_window_layers, else every layer sliding when a window is set. A null or zero window,
    or use_sliding_window = false, means no sliding layers."""
    layers = k.int("num_hidden_layers", minimum=1)
    types = k.get("layer_types")
    if types is not None and k.arch not in _OWN_LAYER_TYPES:
        if not _kind_list(types, layers):
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


def _decoder(k: _Keys) -> dict[str, Any]:
    """The generic decoder: dense MLP, or a mixture of experts from the usual keys."""
    if k.has("kv_lora_rank"):
        return _deepseek(k)
    experts_key = next((key for key in _EXPERT_COUNT_KEYS if k.int(key, 0) > 0), None)
    out: dict[str, Any] = {}
    if experts_key is not None:
        out["moe"] = _moe_block(k, experts_key)
    else:
        unread = sorted(key for key in k.config if key in _MOE_ONLY_KEYS
                        and k.config[key] not in (None, 0, [], False))
        if unread:  # an MoE config whose expert count this path does not know: not dense
            raise k.cannot(unread[0], "an expert layout without a known expert-count key "
                           f"({', '.join(_EXPERT_COUNT_KEYS)})")
    if k.int("num_nextn_predict_layers", 0):
        out["mtp_layers"] = k.int("num_nextn_predict_layers")
    return out


def _moe_layer_flags(k: _Keys) -> list[bool]:
    """Which layers hold experts, from every key the transformers MoE configs use for it:
    `first_k_dense_replace` (DeepSeek: layers before it are dense), `moe_layer_freq` (DeepSeek:
    from there, layers with i % freq == 0; MiMo-V2-Flash: a per-layer list of 0/1),
    `mlp_layer_types` (GLM-5.2: 'dense' or 'sparse' per layer), `decoder_sparse_step` (Qwen
    MoE: layers with (i + 1) % step == 0) and `mlp_only_layers` (Qwen MoE: indices kept
    dense)."""
    layers = k.int("num_hidden_layers", minimum=1)
    first = k.int("first_k_dense_replace", 0)
    if k.has("moe_layer_start_index"):  # ERNIE 4.5: experts from this layer on
        start = k.int("moe_layer_start_index")
        if start >= layers:
            raise SpecError(f"{k.where}: key 'moe_layer_start_index' = {start} is past the "
                            f"last of {layers} layers")
        first = max(first, start)
    first = max(first, k.int("num_dense_layers", 0))  # Trinity (Afmoe): the first layers dense
    freq = k.get("moe_layer_freq", 1)
    if isinstance(freq, list):
        if len(freq) != layers or not all(isinstance(v, int) and v in (0, 1) for v in freq):
            raise SpecError(f"{k.where}: key 'moe_layer_freq' as a list must hold {layers} "
                            "flags of 0 or 1")
        flags = [bool(v) for v in freq]
    else:
        step = k.int("moe_layer_freq", 1, minimum=1)
        flags = [i >= first and i % step == 0 for i in range(layers)]
    listed = _listed_moe_layers(k, layers)  # Step-3: the MoE layers by index
    if listed is not None:
        flags = [f and i in listed for i, f in enumerate(flags)]
    mlp_types = k.get("mlp_layer_types")  # GLM-5.2: 'dense' or 'sparse' per layer
    if mlp_types is not None:
        if not _kind_list(mlp_types, layers) or not set(mlp_types) <= {"dense", "sparse"}:
            raise SpecError(f"{k.where}: key 'mlp_layer_types' must list {layers} kinds, "
                            "'dense' or 'sparse'")
        flags = [f and t == "sparse" for f, t in zip(flags, mlp_types, strict=True)]
    sparse = k.int("decoder_sparse_step", 1, minimum=1)
    dense = k.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(isinstance(i, int) and 0 <= i < layers
                                              for i in dense):
        raise SpecError(f"{k.where}: key 'mlp_only_layers' must list layer indices "
                        f"in 0..{layers - 1}")
    # ERNIE 4.5: experts up to moe_layer_end_index (inclusive; -1: the last layer), on layers
    # with (i + 1) % moe_layer_interval == 0 (Ernie4_5_MoeDecoderLayer)
    last = k.get("moe_layer_end_index", -1)
    if isinstance(last, bool) or not isinstance(last, int) or last < -1:
        raise SpecError(f"{k.where}: key 'moe_layer_end_index' must be a layer index or -1, "
                        f"got {last!r}")
    last = layers - 1 if last == -1 else last
    interval = k.int("moe_layer_interval", 1, minimum=1)
    return [flag and (i + 1) % sparse == 0 and i not in dense and i <= last
            and (i + 1) % interval == 0 for i, flag in enumerate(flags)]


# Keys a generic MoE config names its routed-expert count, top-k and shared-expert count by
# (transformers config classes: Mixtral / Qwen MoE / DeepSeek; ERNIE 4.5 `moe_num_experts`,
# `moe_k`, `moe_num_shared_experts`; Ling (Bailing MoE) `num_shared_experts`; Hunyuan-A13B
# `moe_topk` and `num_shared_expert`, per layer as lists).
_EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "moe_k", "moe_topk", "moe_top_k", "num_experts_per_token")
_SHARED_COUNT_KEYS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts",
                      "num_shared_expert")
# Keys only an MoE config has: with none of _EXPERT_COUNT_KEYS set, the generic path would
# read the model as dense and miss its experts, so it refuses instead.
_MOE_ONLY_KEYS = frozenset({*_TOP_K_KEYS, "moe_intermediate_size", "zero_expert_num",
                            "n_group", "topk_group", "expert_ffn_hidden_size", "moe_layers_enum",
                            "share_expert_dim"})


def _uniform_int(k: _Keys, key: str, *, minimum: int = 1) -> int:
    """An integer key, or a per-layer list of one value (Hunyuan-A13B's `moe_topk`); a list
    whose values differ is refused, since the spec holds one value for every MoE layer."""
    value = k.get(key)
    if isinstance(value, list):
        if not value:
            raise SpecError(f"{k.where}: key '{key}' is an empty list")
        if any(v != value[0] for v in value):
            raise k.cannot(key, "per-layer values that differ")
        return _Keys({key: value[0]}, k.where, k.arch, {}).int(key, minimum=minimum)
    return k.int(key, minimum=minimum)


def _listed_moe_layers(k: _Keys, layers: int) -> set[int] | None:
    """Step-3's `moe_layers_enum`: the indices of the layers with experts, as a comma-separated
    string (or a list); None where the config has none."""
    value = k.get("moe_layers_enum")
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    try:
        indices = {int(str(i).strip()) for i in items} if isinstance(items, list) else None
    except ValueError:
        indices = None
    if not indices or not all(0 <= i < layers for i in indices):
        raise SpecError(f"{k.where}: key 'moe_layers_enum' must list layer indices in "
                        f"0..{layers - 1} (e.g. \"4,5,6\")")
    return indices


def _moe_block(k: _Keys, experts_key: str) -> dict[str, Any]:
    size_key = "moe_intermediate_size" if k.has("moe_intermediate_size") else "intermediate_size"
    top_k = next((key for key in _TOP_K_KEYS if k.has(key)), _TOP_K_KEYS[0])
    moe: dict[str, Any] = {
        "num_experts": k.int(experts_key, minimum=1),
        "experts_per_token": _uniform_int(k, top_k),
        "expert_intermediate_size": _uniform_int(k, size_key),
    }
    # one shared expert of this width (Qwen2-MoE; Step-3 calls it share_expert_dim)
    shared = k.int("shared_expert_intermediate_size", 0) or k.int("share_expert_dim", 0)
    n_key = next((key for key in _SHARED_COUNT_KEYS if k.has(key)), None)
    n_shared = _uniform_int(k, n_key, minimum=0) if n_key else 0
    if shared:
        moe.update(num_shared_experts=1, shared_expert_intermediate_size=shared)
    elif n_shared:
        # each shared expert as wide as a routed one unless the config sizes them (Ling 2.0)
        width = k.int("moe_shared_expert_intermediate_size", moe["expert_intermediate_size"],
                      minimum=1)
        moe.update(num_shared_experts=n_shared, shared_expert_intermediate_size=width)
    if k.bool("residual_moe", False):
        # Grok-2 (Grok1ForCausalLM with residual_moe): a dense MLP of intermediate_size runs
        # beside the routed experts on every token, i.e. one always-on expert of that width
        if "num_shared_experts" in moe:
            raise k.cannot("residual_moe", "a residual MLP beside shared experts")
        moe.update(num_shared_experts=1,
                   shared_expert_intermediate_size=k.int("intermediate_size", minimum=1))
    flags = _moe_layer_flags(k)
    dense = len(flags) - sum(flags)
    if dense:  # only the count matters to the costs (see specs.models.MoE)
        moe["dense_layers"] = dense
    return moe


def _mla_block(k: _Keys) -> dict[str, Any]:
    return {
        "q_lora_rank": k.int("q_lora_rank", 0),
        "kv_lora_rank": k.int("kv_lora_rank", minimum=1),
        "qk_nope_head_dim": k.int("qk_nope_head_dim", minimum=1),
        "qk_rope_head_dim": k.int("qk_rope_head_dim", minimum=1),
        "v_head_dim": k.int("v_head_dim", minimum=1),
    }


def _deepseek(k: _Keys) -> dict[str, Any]:
    """MLA attention with DeepSeek's MoE, or with a dense MLP on every layer where the config
    names no routed experts (MiniCPM3: MiniCPM3ForCausalLM has MLA and no experts)."""
    out: dict[str, Any] = {"mla": _mla_block(k),
                           "mtp_layers": k.int("num_nextn_predict_layers", 0),
                           **_sparse_attention(k)}
    if k.int("n_routed_experts", 0):
        out["moe"] = {**_moe_block(k, "n_routed_experts"),
                      "num_shared_experts": k.int("n_shared_experts", 0),
                      "shared_expert_intermediate_size": k.int("moe_intermediate_size")}
    else:
        unread = sorted(key for key in k.config if key in _MOE_ONLY_KEYS
                        and k.config[key] not in (None, 0, [], False))
        if unread:  # experts counted under a key this path does not read: not dense
            raise k.cannot(unread[0], "MLA with an expert layout without 'n_routed_experts'")
    return out


def _longcat_defaults(config: Config, where: str) -> dict[str, Any]:
    """LongCat-Flash counts `num_layers` layers of two attention blocks each and has no
    num_hidden_layers; its dense FFN width is ffn_hidden_size; MLA has no KV-head groups.
    A bad `num_layers` is named as written, not as the num_hidden_layers it stands for."""
    out: dict[str, Any] = {"intermediate_size": config.get("ffn_hidden_size"),
                           "num_key_value_heads": config.get("num_attention_heads")}
    if config.get("num_layers") is not None:
        out["num_hidden_layers"] = 2 * _Keys(config, where, "LongcatFlashForCausalLM",
                                             {}).int("num_layers", minimum=1)
    return out


def _longcat(k: _Keys) -> dict[str, Any]:
    """LongCat-Flash (LongcatFlashForCausalLM, its modeling_longcat_flash.py): each of its
    `num_layers` layers runs two MLA attention blocks, each followed by a dense FFN of
    ffn_hidden_size, and one MoE beside the first (shortcut-connected MoE) whose top
    `moe_topk` pick among `n_routed_experts` experts and `zero_expert_num` identity experts
    that hold no weights. As a spec: 2 x num_layers attention layers, the first of each pair
    with an MoE whose one always-on expert is its dense FFN; routing uniform over real and
    identity experts, a token reaches moe_topk x routed / (routed + identity) real experts
    (8 of 12 for LongCat-Flash, its ~27B average active parameters)."""
    if k.get("zero_expert_type", "identity") != "identity":
        raise k.cannot("zero_expert_type", "zero experts other than the identity")
    layers = k.int("num_layers", minimum=1)
    routed = k.int("n_routed_experts", minimum=1)
    zero = k.int("zero_expert_num", 0)
    top = k.int("moe_topk", minimum=1)
    reached = top * routed / (routed + zero)
    if reached != int(reached) or reached < 1:
        raise k.cannot("zero_expert_num", f"{top} x {routed} / ({routed} + {zero}) = "
                       f"{reached:g} real experts a token, not a whole number")
    return {
        "mla": _mla_block(k),
        "moe": {"num_experts": routed, "experts_per_token": int(reached),
                "expert_intermediate_size": k.int("expert_ffn_hidden_size", minimum=1),
                "num_shared_experts": 1,
                "shared_expert_intermediate_size": k.int("ffn_hidden_size", minimum=1)},
        "mlp_types": ["moe", "dense"] * layers,
    }


def _sparse_attention(k: _Keys) -> dict[str, Any]:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2, GLM-5), where the config
    has one; GLM-5.2's `indexer_types` marks the layers whose indexer is 'shared' with the
    layer before (no indexer of their own)."""
    if not k.has("index_n_heads"):
        return {}
    dsa = {"index_n_heads": k.int("index_n_heads", minimum=1),
           "index_head_dim": k.int("index_head_dim", minimum=1),
           "index_topk": k.int("index_topk", minimum=1)}
    kinds = k.get("indexer_types")
    if kinds is not None:
        layers = k.int("num_hidden_layers", minimum=1)
        if not _kind_list(kinds, layers) or not set(kinds) <= {"full", "shared"} or \
                "full" not in kinds:
            raise SpecError(f"{k.where}: key 'indexer_types' must list {layers} kinds, 'full' "
                            "or 'shared', at least one 'full'")
        dsa["indexer_layers"] = kinds.count("full")
    return {"dsa": dsa}


# Nemotron-H blocks by their `hybrid_override_pattern` letter (transformers NemotronHConfig
# layers_block_type): each block is ONE pre-normed mixer: a Mamba-2 layer, an attention layer,
# a dense MLP or a mixture of experts.
_NEMOTRON_BLOCKS = {"M": ("mamba", "none"), "*": ("full_attention", "none"),
                    "-": ("mlp_only", "dense"), "E": ("mlp_only", "moe")}
# The same blocks by name, as transformers 5 configs list them (`layers_block_type`).
_NEMOTRON_BLOCK_NAMES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_pattern(config: Config) -> list[str] | None:
    """The blocks of a Nemotron-H config as letters: `hybrid_override_pattern`, else its
    `layers_block_type` names spelled as letters (an unknown name kept as it is)."""
    pattern = config.get("hybrid_override_pattern")
    names = config.get("layers_block_type")
    if pattern is None and isinstance(names, list):
        return [_NEMOTRON_BLOCK_NAMES.get(str(n), str(n)) for n in names]
    return list(pattern) if isinstance(pattern, str) else None


def _nemotron_defaults(config: Config, _where: str) -> dict[str, Any]:
    """Nemotron 3 Ultra's config lists its blocks and gives no num_hidden_layers."""
    pattern = _nemotron_pattern(config)
    return {"num_hidden_layers": len(pattern)} if pattern else {}


def _nemotron_h(k: _Keys) -> dict[str, Any]:
    """Nemotron-H (NemotronHForCausalLM): Mamba-2, attention, squared-ReLU MLP (up and down
    only) and MoE blocks in the order of `hybrid_override_pattern` (or `layers_block_type`);
    Nemotron 3 Super/Ultra's experts work in a `moe_latent_size` latent."""
    for flag, what in (("use_bias", "Mamba projection biases"), ("mlp_bias", "MLP biases")):
        if k.get(flag):
            raise k.cannot(flag, what)
    blocks = [_NEMOTRON_BLOCKS[letter] for letter in _nemotron_blocks(k)]
    out: dict[str, Any] = {
        "gated_mlp": False,
        "layer_types": [mixer for mixer, _ in blocks],
        "mlp_types": [mlp for _, mlp in blocks],
        "mamba": {
            "num_heads": k.int("mamba_num_heads", minimum=1),
            "head_dim": k.int("mamba_head_dim", minimum=1),
            "state_size": k.int("ssm_state_size", minimum=1),
            "n_groups": k.int("n_groups", minimum=1),
            "conv_kernel_size": k.int("conv_kernel", minimum=1),
        },
    }
    if k.has("attention_head_dim"):
        out["head_dim"] = k.int("attention_head_dim", minimum=1)
    if ("mlp_only", "moe") in blocks:
        out["moe"] = _nemotron_moe(k)
    return out


def _nemotron_blocks(k: _Keys) -> list[str]:
    """The block letters, one per layer, each a known kind; an error naming the key else."""
    layers = k.int("num_hidden_layers", minimum=1)
    pattern = _nemotron_pattern(k.config)
    key = "hybrid_override_pattern" if k.has("hybrid_override_pattern") else "layers_block_type"
    if pattern is None or len(pattern) != layers:
        raise SpecError(f"{k.where}: key '{key}' must give {layers} blocks (letters M, *, -, E "
                        "or names mamba, attention, mlp, moe)")
    bad = sorted(set(pattern) - set(_NEMOTRON_BLOCKS))
    if bad:
        raise k.cannot(key, f"block {bad[0]!r}")
    return pattern


def _nemotron_moe(k: _Keys) -> dict[str, Any]:
    """Nemotron-H's MoE block: routed squared-ReLU experts (in a latent where the config sets
    one), a shared expert of its own width."""
    moe: dict[str, Any] = {"num_experts": k.int("n_routed_experts", minimum=1),
                           "experts_per_token": k.int("num_experts_per_tok", minimum=1),
                           "expert_intermediate_size": k.int("moe_intermediate_size", minimum=1)}
    if k.get("moe_latent_size"):
        moe["latent_size"] = k.int("moe_latent_size", minimum=1)
    if k.int("n_shared_experts", 0):
        moe.update(num_shared_experts=k.int("n_shared_experts"),
                   shared_expert_intermediate_size=k.int("moe_shared_expert_intermediate_size",
                                                         minimum=1))
    return moe


def _mimo_v2(k: _Keys) -> dict[str, Any]:
    """MiMo-V2-Flash: `hybrid_layer_pattern` marks each layer sliding-window (1) or global (0),
    `moe_layer_freq` lists which layers hold experts (read by the generic MoE block). Values
    are narrower than keys (`v_head_dim` 128 of 192); the sliding layers have KV heads of their
    own (`swa_num_key_value_heads` 8, the global layers 4) and otherwise the same geometry."""
    layers = k.int("num_hidden_layers", minimum=1)
    pattern = k.get("hybrid_layer_pattern")
    if not isinstance(pattern, list) or len(pattern) != layers or \
            not all(v in (0, 1) for v in pattern):
        raise SpecError(f"{k.where}: key 'hybrid_layer_pattern' must list {layers} flags "
                        "(1 sliding window, 0 global)")
    for swa, key in (("swa_num_attention_heads", "num_attention_heads"),
                     ("swa_head_dim", "head_dim"), ("swa_v_head_dim", "v_head_dim")):
        if k.has(swa) and k.get(swa) != k.get(key):
            raise k.cannot(swa, f"sliding layers with another {key} than the global ones")
    kinds = ["sliding_attention" if v else "full_attention" for v in pattern]
    out: dict[str, Any] = {"moe": _moe_block(k, "n_routed_experts"),
                           "v_head_dim": k.int("v_head_dim", minimum=1)}
    if "sliding_attention" in kinds:
        out.update(sliding_window=k.int("sliding_window", minimum=1), layer_types=kinds,
                   sliding_num_kv_heads=k.int("swa_num_key_value_heads",
                                              k.int("num_key_value_heads"), minimum=1))
    return out


def _llama4(k: _Keys) -> dict[str, Any]:
    """Llama 4: MoE on every `interleave_moe_layer_step`-th layer (routed experts plus one
    always-on shared expert of the same width), dense layers of `intermediate_size_mlp`; every
    4th layer global without RoPE, the others chunked-local attention, modelled as a sliding
    window of `attention_chunk_size` (an upper bound on what a chunked layer reads)."""
    layers = k.int("num_hidden_layers", minimum=1)
    step = k.int("interleave_moe_layer_step", 1, minimum=1)
    moe_layers = k.get("moe_layers")
    n_moe = len(moe_layers) if isinstance(moe_layers, list) else len(range(step - 1, layers, step))
    expert = k.int("intermediate_size", minimum=1)
    out: dict[str, Any] = {
        "intermediate_size": k.int("intermediate_size_mlp", expert, minimum=1),
        "moe": {"num_experts": k.int("num_local_experts", minimum=1),
                "experts_per_token": k.int("num_experts_per_tok", minimum=1),
                "expert_intermediate_size": expert, "num_shared_experts": 1,
                "shared_expert_intermediate_size": expert, "dense_layers": layers - n_moe},
    }
    chunk = k.int("attention_chunk_size", 0)
    if chunk:
        rope = k.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(layers)]
        if not isinstance(rope, list) or len(rope) != layers:
            raise SpecError(f"{k.where}: key 'no_rope_layers' must list {layers} flags")
        out["sliding_window"] = chunk
        out["layer_types"] = ["sliding_attention" if r else "full_attention" for r in rope]
    return out


def _gpt_oss(k: _Keys) -> dict[str, Any]:
    quant = k.get("quantization_config") or {}
    moe: dict[str, Any] = {**_moe_block(k, "num_local_experts"), "expert_bias": True}
    if isinstance(quant, dict) and quant.get("quant_method") == "mxfp4":
        moe["weight_dtype"] = "mxfp4"
    bias = k.bool("attention_bias", False)
    return {"qkv_bias": bias, "attention_output_bias": bias, "attention_sinks": True, "moe": moe}


def _gated_delta_net(k: _Keys) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5's linear-attention (gated delta net) block."""
    return {
        "num_key_heads": k.int("linear_num_key_heads", minimum=1),
        "num_value_heads": k.int("linear_num_value_heads", minimum=1),
        "key_head_dim": k.int("linear_key_head_dim", minimum=1),
        "value_head_dim": k.int("linear_value_head_dim", minimum=1),
        "conv_kernel_size": k.int("linear_conv_kernel_dim", minimum=1),
    }


def _qwen3_next(k: _Keys) -> dict[str, Any]:
    layers = k.int("num_hidden_layers")
    interval = k.int("full_attention_interval", minimum=1)
    types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
             for i in range(layers)]
    return {
        "attention_output_gate": True,
        "layer_types": types,
        "linear_attention": _gated_delta_net(k),
        "moe": _moe_block(k, "num_experts"),
    }


def _hybrid_kinds(k: _Keys, types: object, layers: int) -> list[str]:
    """A `layer_types` list of full and linear attention layers (Qwen3.5, MiniMax), checked."""
    if not _kind_list(types, layers) or \
            not set(types) <= {"full_attention", "linear_attention"}:
        raise SpecError(f"{k.where}: key 'layer_types' must list {layers} kinds, "
                        "'full_attention' or 'linear_attention'")
    return list(types)


def _minimax(k: _Keys) -> dict[str, Any]:
    """MiniMax-Text-01 / MiniMax-M1 (`attn_type_list`: 0 a lightning-attention layer, 1 softmax
    attention) and transformers' MiniMaxForCausalLM (`layer_types`). A lightning layer is linear
    attention over all `num_attention_heads` heads (modeling_minimax_text_01.py
    MiniMaxText01LightningAttention: qkv_proj to 3 x heads x head_dim, output_gate, norm,
    out_proj; a head_dim x head_dim state per head, no short convolution): in the spec, the
    linear-attention block with as many key as value heads and a one-tap convolution. Its
    parameters then count its q, k, v and gate projections; the block's two per-head gate
    columns are 0.3% more than the real layer. MiniMax-M2's list (every layer 1) is all
    softmax attention, as the generic path reads it."""
    out = _decoder(k)
    layers = k.int("num_hidden_layers", minimum=1)
    codes = k.get("attn_type_list")
    if codes is not None:
        if not isinstance(codes, list) or len(codes) != layers or \
                not all(c in (0, 1) and not isinstance(c, bool) for c in codes):
            raise SpecError(f"{k.where}: key 'attn_type_list' must list {layers} codes, 0 "
                            "(lightning attention) or 1 (softmax attention)")
        types = ["full_attention" if c else "linear_attention" for c in codes]
    else:
        types = _hybrid_kinds(k, k.get("layer_types"), layers)
    if "linear_attention" in types:
        heads = k.int("num_attention_heads", minimum=1)
        dim = k.int("head_dim", k.int("hidden_size") // heads, minimum=1)
        out.update(layer_types=list(types), linear_attention={
            "num_key_heads": heads, "num_value_heads": heads, "key_head_dim": dim,
            "value_head_dim": dim, "conv_kernel_size": 1})
    return out


def _qwen3_5(k: _Keys) -> dict[str, Any]:
    """Qwen3.5 / 3.6 (dense and MoE): Qwen3-Next's gated-delta-net linear attention and gated
    full attention, the kinds listed per layer in `layer_types` (else every
    `full_attention_interval`-th layer full), an MTP module of `mtp_num_hidden_layers`."""
    layers = k.int("num_hidden_layers", minimum=1)
    types = k.get("layer_types")
    if types is None:
        interval = k.int("full_attention_interval", minimum=1)
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                 for i in range(layers)]
    out: dict[str, Any] = {"layer_types": _hybrid_kinds(k, types, layers),
                           "linear_attention": _gated_delta_net(k),
                           "attention_output_gate": k.bool("attn_output_gate", True)}
    if k.int("num_experts", 0):
        out["moe"] = _moe_block(k, "num_experts")
    if k.int("mtp_num_hidden_layers", 0):
        out["mtp_layers"] = k.int("mtp_num_hidden_layers")
    return out


def _nested(config: Config, where: str, key: str) -> Config:
    """A nested block of the config (DBRX's attn_config / ffn_config): a mapping or absent."""
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{where}: key '{key}' must be an object, got {show(value, 40)}")
    return value


def _dbrx_defaults(config: Config, where: str) -> dict[str, Any]:
    """DBRX (transformers DbrxConfig) names its sizes d_model, n_layers, n_heads and keeps the
    rest in two nested blocks: attn_config.kv_n_heads, ffn_config.ffn_hidden_size (each
    expert's width), ffn_config.moe_num_experts and moe_top_k. Read as the standard keys;
    the blocks are the generic ones (fused Wqkv and out_proj without biases, gated SiLU
    experts w1 / v1 / w2, a bias-free router)."""
    attn, ffn = _nested(config, where, "attn_config"), _nested(config, where, "ffn_config")
    return {key: value for key, value in (
        ("hidden_size", config.get("d_model")), ("num_hidden_layers", config.get("n_layers")),
        ("num_attention_heads", config.get("n_heads")),
        ("num_key_value_heads", attn.get("kv_n_heads")),
        ("intermediate_size", ffn.get("ffn_hidden_size")),
        ("num_local_experts", ffn.get("moe_num_experts")),
        ("num_experts_per_tok", ffn.get("moe_top_k"))) if value is not None}


def _decilm_blocks(config: Config, where: str) -> list[tuple[Config, Config]]:
    """DeciLM's `block_configs`: one {attention, ffn} pair per layer, checked."""
    blocks = config.get("block_configs")
    if not isinstance(blocks, list) or not blocks or not all(
            isinstance(b, dict) and isinstance(b.get("attention"), dict)
            and isinstance(b.get("ffn"), dict) for b in blocks):
        raise SpecError(f"{where}: key 'block_configs' must list one object with 'attention' "
                        "and 'ffn' per layer")
    for i, b in enumerate(blocks):
        for part in ("attention", "ffn"):
            # a flag read for its truth: 'no_op: "false"' made the block a no-op
            flags = [k for k in _DECILM_FLAGS if b[part].get(k) not in (None, True, False)]
            if flags:
                raise SpecError(f"{where}: key 'block_configs' layer {i}'s {part}.{flags[0]} "
                                f"must be true or false, got {show(b[part][flags[0]], 40)}")
        group = b["attention"].get("n_heads_in_group")
        if group is not None and (isinstance(group, bool) or not isinstance(group, int)):
            # a list or mapping here broke the set of groups (unhashable)
            raise SpecError(f"{where}: key 'block_configs' has an n_heads_in_group that is not "
                            f"a positive integer: {show(group, 40)}")
    return [(b["attention"], b["ffn"]) for b in blocks]


# The true/false keys of a DeciLM block config (transformers' DeciLM AttentionConfig and
# FFNConfig); `sparsify` holds a list of parameter names or null, read for its truth.
_DECILM_FLAGS = ("no_op", "replace_with_linear", "unshifted_sink",
                 "use_prefill_window_in_sink_attention")


def _decilm_width(ffn_mult: object, hidden: int, where: str) -> int:
    """A DeciLM FFN's width from its ffn_mult, as the model code computes it
    (_ffn_mult_to_intermediate_size in vLLM / SGLang nemotron_nas.py): int(2 * mult * hidden
    / 3), rounded up to a multiple of 256."""
    if isinstance(ffn_mult, bool) or not isinstance(ffn_mult, (int, float)) \
            or not 0 < ffn_mult < math.inf:
        raise SpecError(f"{where}: key 'block_configs' has an ffn_mult that is not a positive "
                        f"number: {show(ffn_mult, 40)}")
    width = 2 * ffn_mult * hidden / 3
    if width > MAX_INTEGER:  # 1e308 overflowed int(); the FFN width is capped as any other
        raise SpecError(f"{where}: key 'block_configs' has an ffn_mult of {show(ffn_mult, 40)}: "
                        f"an FFN wider than {MAX_INTEGER:,}")
    return -(-int(width) // 256) * 256


def _decilm_defaults(config: Config, where: str) -> dict[str, Any]:
    """Llama-Nemotron (DeciLMForCausalLM, model_type nemotron-nas) gives no layer count, KV
    heads or FFN width at the top level: every layer has its own block config. The KV heads
    are num_attention_heads / n_heads_in_group (one value for all attention layers, else
    refused by the builder); the FFN width is the mean of the layers' widths, which keeps the
    FFN weights and FLOPs of the whole model exact (both are linear in the width) though
    specsim holds one width for every layer."""
    blocks = _decilm_blocks(config, where)
    out: dict[str, Any] = {"num_hidden_layers": len(blocks)}
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    groups = {a.get("n_heads_in_group") for a, _ in blocks if not a.get("no_op")}
    if len(groups) > 1:
        raise _Keys(config, where, "DeciLMForCausalLM", {}).cannot(
            "block_configs", "attention layers with different KV-head counts (n_heads_in_group)")
    group = next(iter(groups), None)
    if groups and (isinstance(group, bool) or not isinstance(group, int) or group <= 0):
        raise SpecError(f"{where}: key 'block_configs' has an n_heads_in_group that is not a "
                        f"positive integer: {show(group, 40)}")
    if isinstance(heads, int) and isinstance(group, int):
        out["num_key_value_heads"] = heads // group
    # a hidden size past the cap is refused with its key later (10**400 overflowed a float)
    if isinstance(hidden, int) and not isinstance(hidden, bool) and 0 < hidden <= MAX_INTEGER:
        widths = [_decilm_width(f.get("ffn_mult"), hidden, where) for _, f in blocks
                  if not f.get("no_op")]
        if widths:
            out["intermediate_size"] = round(sum(widths) / len(widths))
    return out


def _decilm(k: _Keys) -> dict[str, Any]:
    """Llama-Nemotron (DeciLMForCausalLM; vLLM / SGLang nemotron_nas.py): a Llama stack pruned
    per layer by `block_configs`. An attention block is Llama attention with
    num_attention_heads / n_heads_in_group KV heads, or no_op (no attention, no input norm:
    the layer is MLP-only); an FFN block is a gated MLP of its ffn_mult's width, or no_op.
    Blocks replaced by a linear layer, windowed attention or per-layer KV-head counts are
    refused."""
    blocks = _decilm_blocks(k.config, k.where)
    layer_types, mlp_types = [], []
    for i, (attn, ffn) in enumerate(blocks):
        for part, block in (("attention", attn), ("ffn", ffn)):
            if block.get("replace_with_linear"):
                raise k.cannot("block_configs", f"layer {i}'s {part} replaced by a linear layer")
            if block.get("sparsify"):
                raise k.cannot("block_configs", f"layer {i}'s sparsified {part}")
        if not attn.get("no_op"):
            if attn.get("window_length") or attn.get("num_sink_tokens"):
                raise k.cannot("block_configs", f"layer {i}'s windowed / sink attention")
        if attn.get("no_op") and ffn.get("no_op"):
            raise k.cannot("block_configs", f"layer {i} with neither attention nor FFN")
        layer_types.append("mlp_only" if attn.get("no_op") else "full_attention")
        mlp_types.append("none" if ffn.get("no_op") else "dense")
    return {"layer_types": layer_types, "mlp_types": mlp_types}


def _minicpm3_defaults(config: Config, _where: str) -> dict[str, Any]:
    """MiniCPM3's config gives no v_head_dim: its MLA values are hidden_size /
    num_attention_heads wide (vLLM / SGLang minicpm3.py)."""
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
        return {"v_head_dim": hidden // heads}
    return {}


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
    "Qwen3NextForCausalLM": _Family(builder=_qwen3_next, qk_norm=True),
    **{arch: _Family(builder=_qwen3_5, qk_norm=True) for arch in _QWEN3_5},
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
    "Llama4ForConditionalGeneration": _Family(builder=_llama4),
    "Llama4ForCausalLM": _Family(builder=_llama4),
    "DeepseekV2ForCausalLM": _Family(builder=_deepseek),
    "DeepseekV3ForCausalLM": _Family(builder=_deepseek),
    "DeepseekV32ForCausalLM": _Family(builder=_deepseek),
    "NemotronHForCausalLM": _Family(builder=_nemotron_h, derived=_nemotron_defaults),
    "MiMoV2FlashForCausalLM": _Family(builder=_mimo_v2),
    "GptOssForCausalLM": _Family(builder=_gpt_oss),
    "LongcatFlashForCausalLM": _Family(builder=_longcat, derived=_longcat_defaults),
    **{arch: _Family(builder=_minimax) for arch in _MINIMAX},
    "DbrxForCausalLM": _Family(derived=_dbrx_defaults),
    "DeciLMForCausalLM": _Family(builder=_decilm, derived=_decilm_defaults),
    "MiniCPM3ForCausalLM": _Family(derived=_minicpm3_defaults),
    # Apertus: up_proj -> xIELU -> down_proj, no gate (vLLM / SGLang apertus.py)
    "ApertusForCausalLM": _Family(gated_mlp=False),
}


@dataclass(frozen=True, slots=True)
class LocatedConfig:
    """Where a config.json was found: its local path, the name it suggests, its source URL,
    and the Hub repo it was read from (None for a local file)."""

    path: Path
    name: str
    source: str
    repo: str | None = None


def locate_config(where: str, *, cache_dir: Path | None = None) -> LocatedConfig:
    """A config.json path as given, or a Hugging Face repo id fetched through huggingface_hub's
    cache (offline from the cache when HF_HUB_OFFLINE=1). One line on any failure."""
    path = Path(where)
    if probe(path, "is_dir"):
        path = path / "config.json"
    if probe(path, "exists") or "/" not in where or not is_hub_id(where):
        if not probe(path, "exists"):
            raise SpecError(f"{where}: cannot read (no such file, and not a Hub repo id "
                            "such as Org/Name)")
        folder = path.resolve().parent.name
        name = folder if path.name == "config.json" and folder else path.stem
        return LocatedConfig(path, name, f"config.json at {path}")
    return _download(where, cache_dir)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _download(repo_id: str, cache_dir: Path | None) -> LocatedConfig:
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import (
            EntryNotFoundError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
        )
    except ImportError:
        raise SpecError(f"{repo_id}: reading a Hub repo id needs huggingface_hub "
                        "(pip install huggingface_hub), or pass a config.json path") from None
    offline = _offline()
    try:
        local = hf_hub_download(repo_id, "config.json", cache_dir=cache_dir,
                                local_files_only=offline)
    except RepositoryNotFoundError:
        raise SpecError(f"{repo_id}: repository not found on the Hugging Face Hub "
                        "(or gated: log in with `hf auth login`)") from None
    except LocalEntryNotFoundError:
        why = "offline (HF_HUB_OFFLINE=1)" if offline else "the Hub is unreachable"
        raise SpecError(f"{repo_id}: config.json is not in the Hugging Face cache and "
                        f"{why}") from None
    except EntryNotFoundError:
        raise SpecError(f"{repo_id}: the repository has no config.json") from None
    except (HfHubHTTPError, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise SpecError(f"{repo_id}: cannot download config.json ({first})") from None
    path = Path(local)
    revision = path.parent.name
    return LocatedConfig(path, repo_id.split("/", 1)[1],
                         f"https://huggingface.co/{repo_id}/blob/{revision}/config.json",
                         repo=repo_id)

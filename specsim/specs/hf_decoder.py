"""The generic decoder's blocks from a config.json: a dense MLP or a mixture of experts (which
layers hold experts, how many, how wide, shared experts) and DeepSeek's attention (MLA and the
sparse-attention indexer).

Split from `specs.hf_import`, which reads the fields every decoder has; the family readers
(`hf_hybrid`, `hf_families`) build on `moe_block`, `mla_block` and `decoder`.
"""

from __future__ import annotations

from typing import Any

from specsim.errors import SpecError
from specsim.specs.hf_keys import Keys, kind_list


def decoder(k: Keys) -> dict[str, Any]:
    """The generic decoder: dense MLP, or a mixture of experts from the usual keys."""
    if k.has("kv_lora_rank"):
        return deepseek(k)
    experts_key = next((key for key in _EXPERT_COUNT_KEYS if k.int(key, 0) > 0), None)
    out: dict[str, Any] = {}
    if experts_key is not None:
        out["moe"] = moe_block(k, experts_key)
    else:
        unread = sorted(key for key in k.config if key in _MOE_ONLY_KEYS
                        and k.config[key] not in (None, 0, [], False))
        if unread:  # an MoE config whose expert count this path does not know: not dense
            raise k.cannot(unread[0], "an expert layout without a known expert-count key "
                           f"({', '.join(_EXPERT_COUNT_KEYS)})")
    if k.int("num_nextn_predict_layers", 0):
        out["mtp_layers"] = k.int("num_nextn_predict_layers")
    return out


def _moe_layer_flags(k: Keys) -> list[bool]:
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
        if not kind_list(mlp_types, layers) or not set(mlp_types) <= {"dense", "sparse"}:
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


def _uniform_int(k: Keys, key: str, *, minimum: int = 1) -> int:
    """An integer key, or a per-layer list of one value (Hunyuan-A13B's `moe_topk`); a list
    whose values differ is refused, since the spec holds one value for every MoE layer."""
    value = k.get(key)
    if isinstance(value, list):
        if not value:
            raise SpecError(f"{k.where}: key '{key}' is an empty list")
        if any(v != value[0] for v in value):
            raise k.cannot(key, "per-layer values that differ")
        return Keys({key: value[0]}, k.where, k.arch, {}).int(key, minimum=minimum)
    return k.int(key, minimum=minimum)


def _listed_moe_layers(k: Keys, layers: int) -> set[int] | None:
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


def moe_block(k: Keys, experts_key: str) -> dict[str, Any]:
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


def mla_block(k: Keys) -> dict[str, Any]:
    return {
        "q_lora_rank": k.int("q_lora_rank", 0),
        "kv_lora_rank": k.int("kv_lora_rank", minimum=1),
        "qk_nope_head_dim": k.int("qk_nope_head_dim", minimum=1),
        "qk_rope_head_dim": k.int("qk_rope_head_dim", minimum=1),
        "v_head_dim": k.int("v_head_dim", minimum=1),
    }


def deepseek(k: Keys) -> dict[str, Any]:
    """MLA attention with DeepSeek's MoE, or with a dense MLP on every layer where the config
    names no routed experts (MiniCPM3: MiniCPM3ForCausalLM has MLA and no experts)."""
    out: dict[str, Any] = {"mla": mla_block(k),
                           "mtp_layers": k.int("num_nextn_predict_layers", 0),
                           **_sparse_attention(k)}
    if k.int("n_routed_experts", 0):
        out["moe"] = {**moe_block(k, "n_routed_experts"),
                      "num_shared_experts": k.int("n_shared_experts", 0),
                      "shared_expert_intermediate_size": k.int("moe_intermediate_size")}
    else:
        unread = sorted(key for key in k.config if key in _MOE_ONLY_KEYS
                        and k.config[key] not in (None, 0, [], False))
        if unread:  # experts counted under a key this path does not read: not dense
            raise k.cannot(unread[0], "MLA with an expert layout without 'n_routed_experts'")
    return out

def _sparse_attention(k: Keys) -> dict[str, Any]:
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
        if not kind_list(kinds, layers) or not set(kinds) <= {"full", "shared"} or \
                "full" not in kinds:
            raise SpecError(f"{k.where}: key 'indexer_types' must list {layers} kinds, 'full' "
                            "or 'shared', at least one 'full'")
        dsa["indexer_layers"] = kinds.count("full")
    return {"dsa": dsa}

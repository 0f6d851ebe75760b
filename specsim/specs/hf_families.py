"""Families whose config.json differs from the standard fields in layout or key names: MiMo-V2
and Llama 4 (their own sliding / chunked layers), gpt-oss, LongCat-Flash (two attention blocks
a layer, identity experts), DBRX (nested blocks), Llama-Nemotron (DeciLM: a block config per
layer) and MiniCPM3.

Split from `specs.hf_import`, whose family table names these readers and default-fillers; the
MoE and MLA blocks are the generic ones (`hf_decoder`).
"""

from __future__ import annotations

import math
from typing import Any

from specsim.errors import SpecError
from specsim.specs.fields import MAX_INTEGER, show
from specsim.specs.hf_decoder import mla_block, moe_block
from specsim.specs.hf_keys import Config, Keys


def mimo_v2(k: Keys) -> dict[str, Any]:
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
    out: dict[str, Any] = {"moe": moe_block(k, "n_routed_experts"),
                           "v_head_dim": k.int("v_head_dim", minimum=1)}
    if "sliding_attention" in kinds:
        out.update(sliding_window=k.int("sliding_window", minimum=1), layer_types=kinds,
                   sliding_num_kv_heads=k.int("swa_num_key_value_heads",
                                              k.int("num_key_value_heads"), minimum=1))
    return out


def llama4(k: Keys) -> dict[str, Any]:
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


def gpt_oss(k: Keys) -> dict[str, Any]:
    quant = k.get("quantization_config") or {}
    moe: dict[str, Any] = {**moe_block(k, "num_local_experts"), "expert_bias": True}
    if isinstance(quant, dict) and quant.get("quant_method") == "mxfp4":
        moe["weight_dtype"] = "mxfp4"
    bias = k.bool("attention_bias", False)
    return {"qkv_bias": bias, "attention_output_bias": bias, "attention_sinks": True, "moe": moe}

def longcat_defaults(config: Config, where: str) -> dict[str, Any]:
    """LongCat-Flash counts `num_layers` layers of two attention blocks each and has no
    num_hidden_layers; its dense FFN width is ffn_hidden_size; MLA has no KV-head groups.
    A bad `num_layers` is named as written, not as the num_hidden_layers it stands for."""
    out: dict[str, Any] = {"intermediate_size": config.get("ffn_hidden_size"),
                           "num_key_value_heads": config.get("num_attention_heads")}
    if config.get("num_layers") is not None:
        out["num_hidden_layers"] = 2 * Keys(config, where, "LongcatFlashForCausalLM",
                                             {}).int("num_layers", minimum=1)
    return out


def longcat(k: Keys) -> dict[str, Any]:
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
        "mla": mla_block(k),
        "moe": {"num_experts": routed, "experts_per_token": int(reached),
                "expert_intermediate_size": k.int("expert_ffn_hidden_size", minimum=1),
                "num_shared_experts": 1,
                "shared_expert_intermediate_size": k.int("ffn_hidden_size", minimum=1)},
        "mlp_types": ["moe", "dense"] * layers,
    }

def _nested(config: Config, where: str, key: str) -> Config:
    """A nested block of the config (DBRX's attn_config / ffn_config): a mapping or absent."""
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{where}: key '{key}' must be an object, got {show(value, 40)}")
    return value


def dbrx_defaults(config: Config, where: str) -> dict[str, Any]:
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


def decilm_defaults(config: Config, where: str) -> dict[str, Any]:
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
        raise Keys(config, where, "DeciLMForCausalLM", {}).cannot(
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


def decilm(k: Keys) -> dict[str, Any]:
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


def minicpm3_defaults(config: Config, _where: str) -> dict[str, Any]:
    """MiniCPM3's config gives no v_head_dim: its MLA values are hidden_size /
    num_attention_heads wide (vLLM / SGLang minicpm3.py)."""
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
        return {"v_head_dim": hidden // heads}
    return {}

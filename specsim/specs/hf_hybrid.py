"""Families whose layers are not all softmax attention, from their config.json: Nemotron-H
(Mamba-2, attention, MLP and MoE blocks), Qwen3-Next and Qwen3.5 (gated delta net linear
attention) and MiniMax (lightning attention).

Split from `specs.hf_import`, whose family table names these readers; each lists its layer
kinds itself and builds its MoE with the generic block (`hf_decoder`).
"""

from __future__ import annotations

from typing import Any

from specsim.errors import SpecError
from specsim.specs.hf_decoder import decoder, moe_block
from specsim.specs.hf_keys import Config, Keys, kind_list

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


def nemotron_defaults(config: Config, _where: str) -> dict[str, Any]:
    """Nemotron 3 Ultra's config lists its blocks and gives no num_hidden_layers."""
    pattern = _nemotron_pattern(config)
    return {"num_hidden_layers": len(pattern)} if pattern else {}


def nemotron_h(k: Keys) -> dict[str, Any]:
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


def _nemotron_blocks(k: Keys) -> list[str]:
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


def _nemotron_moe(k: Keys) -> dict[str, Any]:
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

def _gated_delta_net(k: Keys) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5's linear-attention (gated delta net) block."""
    return {
        "num_key_heads": k.int("linear_num_key_heads", minimum=1),
        "num_value_heads": k.int("linear_num_value_heads", minimum=1),
        "key_head_dim": k.int("linear_key_head_dim", minimum=1),
        "value_head_dim": k.int("linear_value_head_dim", minimum=1),
        "conv_kernel_size": k.int("linear_conv_kernel_dim", minimum=1),
    }


def qwen3_next(k: Keys) -> dict[str, Any]:
    layers = k.int("num_hidden_layers")
    interval = k.int("full_attention_interval", minimum=1)
    types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
             for i in range(layers)]
    return {
        "attention_output_gate": True,
        "layer_types": types,
        "linear_attention": _gated_delta_net(k),
        "moe": moe_block(k, "num_experts"),
    }


def _hybrid_kinds(k: Keys, types: object, layers: int) -> list[str]:
    """A `layer_types` list of full and linear attention layers (Qwen3.5, MiniMax), checked."""
    if not kind_list(types, layers) or \
            not set(types) <= {"full_attention", "linear_attention"}:
        raise SpecError(f"{k.where}: key 'layer_types' must list {layers} kinds, "
                        "'full_attention' or 'linear_attention'")
    return list(types)


def minimax(k: Keys) -> dict[str, Any]:
    """MiniMax-Text-01 / MiniMax-M1 (`attn_type_list`: 0 a lightning-attention layer, 1 softmax
    attention) and transformers' MiniMaxForCausalLM (`layer_types`). A lightning layer is linear
    attention over all `num_attention_heads` heads (modeling_minimax_text_01.py
    MiniMaxText01LightningAttention: qkv_proj to 3 x heads x head_dim, output_gate, norm,
    out_proj; a head_dim x head_dim state per head, no short convolution): in the spec, the
    linear-attention block with as many key as value heads and a one-tap convolution. Its
    parameters then count its q, k, v and gate projections; the block's two per-head gate
    columns are 0.3% more than the real layer. MiniMax-M2's list (every layer 1) is all
    softmax attention, as the generic path reads it."""
    out = decoder(k)
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


def qwen3_5(k: Keys) -> dict[str, Any]:
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
        out["moe"] = moe_block(k, "num_experts")
    if k.int("mtp_num_hidden_layers", 0):
        out["mtp_layers"] = k.int("mtp_num_hidden_layers")
    return out

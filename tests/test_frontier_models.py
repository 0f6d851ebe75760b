"""Frontier layouts modelled, not only counted: Nemotron-H's Mamba-2 / attention / MLP blocks,
per-layer MoE lists, DeepSeek-V3.2's sparse attention, and the one check of a parallel layout.
Expected values are hand arithmetic from the config files (tests/fixtures/hf_configs), never
the code under test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.ops import Op, pass_work
from specsim.forward.shapes import decode_passes
from specsim.specs.cache import attention_layer_kv_bytes_per_token, kv_layout
from specsim.specs.hf_import import import_config
from specsim.specs.io import read_spec_file
from specsim.specs.models import Model, check_parallel, load_model, model_from_file
from specsim.specs.outputs import write_yaml
from specsim.specs.params import param_breakdown, total_params

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"


def _config(slug: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{slug}.json").read_text())
    return data


def _model(config: dict[str, Any], tmp_path: Path, name: str = "m") -> Model:
    path = tmp_path / f"{name}.yaml"
    write_yaml(path, import_config(config, name=name, source="test"), force=True)
    return model_from_file(read_spec_file(path), slug=name)


def _ops(model: Model, batch: float, context: float, tp: int = 1) -> dict[str, Op]:
    return {op.name: op for op in pass_work(model, decode_passes(np.array([batch]), context),
                                            tp=tp)}


# Nemotron-H-8B-Base-8K (config.json): hidden 4096, 52 blocks "M-M-M-M*-..." (24 Mamba, 4
# attention, 24 MLP), Mamba 128 heads x 64, state 128, 8 groups, conv 4; attention 32 heads,
# 8 KV heads x 128; squared-ReLU MLP 21504; vocabulary 131072, untied.
def test_nemotron_h_8b_by_hand(tmp_path: Path) -> None:
    d, vocab = 4096, 131072
    pattern = _config("nemotron-h-8b-base-8k")["hybrid_override_pattern"]
    assert (pattern.count("M"), pattern.count("*"), pattern.count("-")) == (24, 4, 24)
    inner, conv_dim, heads = 128 * 64, 128 * 64 + 2 * 8 * 128, 128
    mamba = (d * (inner + conv_dim + heads)  # in_proj to z, x, B, C, dt
             + conv_dim * 4 + conv_dim  # depthwise conv weight and bias
             + 3 * heads  # dt_bias, A_log, D
             + inner  # gated RMSNorm
             + inner * d)  # out_proj
    attention = d * 32 * 128 + 2 * d * 8 * 128 + 32 * 128 * d
    mlp = 2 * d * 21504  # up and down, no gate
    norms = (52 + 1) * d  # one per block, one final
    total = 24 * mamba + 4 * attention + 24 * mlp + norms + 2 * vocab * d
    model = _model(_config("nemotron-h-8b-base-8k"), tmp_path)
    assert total_params(model) == total
    assert total == pytest.approx(8.1e9, rel=0.01)  # the 8B size class


def test_nemotron_3_nano_blocks_cache_and_state() -> None:
    """52 blocks: 23 Mamba, 23 MoE, 6 attention (pattern MEMEM*E...), one pre-norm each. Cache:
    6 attention layers x 2 (K, V) x 2 KV heads x 128 x 2 bytes per token; fixed state per request:
    23 x (64 heads x 64 x 128 fp32 SSM state + (4096 + 2 x 8 x 128) x 3 bf16 conv taps)."""
    model = load_model("nemotron-3-nano-30b-a3b")
    assert model.layer_counts == {"mamba": 23, "mlp_only": 23, "full_attention": 6}
    assert model.num_moe_layers == 23 and model.num_dense_mlp_layers == 0
    assert model.num_sublayers == 52
    layout = kv_layout(model)
    assert layout.bytes_per_token == 6 * 2 * 2 * 128 * 2
    ssm, conv = 64 * 64 * 128 * 4, (4096 + 2 * 8 * 128) * 3 * 2
    assert layout.fixed_bytes_per_request == 23 * (ssm + conv)
    # the state does not grow with the context; K/V does
    per_request = layout.bytes_per_request(np.array([1_000.0, 100_000.0]))
    assert per_request[1] - per_request[0] == 99_000 * 6 * 2 * 2 * 128 * 2


@pytest.mark.parametrize("tp", [1, 2])
def test_mamba_decode_reads_and_writes_the_state_once_per_request(tp: int) -> None:
    """Decode of 8 requests: each Mamba layer reads and writes every request's state (its heads
    split over TP) whatever the context; the scan costs 5 flops per state element and token,
    the conv 2 per tap and channel; in_proj maps 2688 to z, x, B, C and dt."""
    model = load_model("nemotron-3-nano-30b-a3b")
    state = (64 * 64 * 128 * 4 + (4096 + 2 * 8 * 128) * 3 * 2) / tp
    short, long = _ops(model, 8, 1_000, tp), _ops(model, 8, 100_000, tp)
    for ops in (short, long):
        scan = ops["mamba_scan"]
        assert scan.layers == 23
        assert float(scan.kv_read_bytes[0]) == pytest.approx(8 * state)
        assert float(scan.kv_write_bytes[0]) == pytest.approx(8 * state)
        assert float(scan.flops[0]) == pytest.approx(
            8 * (5 * 64 * 64 * 128 + 2 * (4096 + 2 * 8 * 128) * 4) / tp)
        assert ops["mamba_in_proj"].gemm_n == pytest.approx((4096 + 6144 + 64) / tp)
        assert ops["mamba_in_proj"].gemm_k == 2688
        assert ops["norm_residual"].layers == 52  # one pre-norm per block, not two
    # attention reads its K/V, which grows with the context
    assert float(long["attention"].kv_read_bytes[0]) == pytest.approx(
        100 * float(short["attention"].kv_read_bytes[0]))


def test_dsa_cache_and_indexer_params_by_hand() -> None:
    """DeepSeek-V3.2 caches the 512 + 64 latent (bf16) and its indexer's 128 FP8 keys with one
    FP32 scale per 128 (132 bytes) per token and layer; the indexer adds wq_b (1536 -> 64 x 128),
    wk (7168 -> 128), k_norm (weight and bias) and weights_proj (7168 -> 64) per layer."""
    v32, v3 = load_model("deepseek-v3.2"), load_model("deepseek-v3")
    assert attention_layer_kv_bytes_per_token(v32) == (512 + 64) * 2 + 128 + 4
    assert kv_layout(v32).bytes_per_token == 61 * 1284
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert total_params(v32) - total_params(v3) == 61 * indexer


def test_dsa_decode_reads_top_k_latents_and_every_index_key() -> None:
    """Decode of 4 requests at 100,000 cached tokens: attention reads the 2048 selected latents
    (1152 bytes each) per request, not 100,000; the indexer reads all 100,000 index keys (132
    bytes) and scores each (query, key) pair with 64 heads x (2 x 128 + 3) flops. Below top-k
    the attention reads what DeepSeek-V3 reads."""
    v32, v3 = load_model("deepseek-v3.2"), load_model("deepseek-v3")
    ops = _ops(v32, 4, 100_000)
    assert float(ops["attention"].kv_read_bytes[0]) == pytest.approx(4 * 2048 * 1152)
    indexer = ops["sparse_indexer"]
    assert float(indexer.kv_read_bytes[0]) == pytest.approx(4 * 100_000 * 132)
    assert float(indexer.kv_write_bytes[0]) == pytest.approx(4 * 132)
    assert float(indexer.flops[0]) == pytest.approx(4 * 100_001 * 64 * (2 * 128 + 3))
    assert float(_ops(v3, 4, 100_000)["attention"].kv_read_bytes[0]) == pytest.approx(
        4 * 100_000 * 1152)
    short_v32, short_v3 = _ops(v32, 4, 1_000), _ops(v3, 4, 1_000)
    assert float(short_v32["attention"].kv_read_bytes[0]) == pytest.approx(
        float(short_v3["attention"].kv_read_bytes[0]))
    # replicated on every TP rank: the indexer's work per GPU does not shrink with TP
    assert float(_ops(v32, 4, 100_000, tp=8)["sparse_indexer"].kv_read_bytes[0]) == \
        pytest.approx(4 * 100_000 * 132)


def test_mimo_per_layer_moe_list_and_hybrid_pattern(tmp_path: Path) -> None:
    """MiMo-V2-Flash: moe_layer_freq lists 0 then 47 ones; hybrid_layer_pattern marks 39
    sliding-window (1) and 9 global (0) layers, the first global. Keys 192 wide, values 128;
    global layers 4 KV heads, sliding ones 8. Attention parameters by hand: q 4096 x 64 x 192,
    k and v 4096 x kv x (192 + 128), o 64 x 128 x 4096; cache per token (bf16): 9 x 4 x 320 x 2
    bytes, and 39 x 8 x 320 x 2 for at most 128 tokens."""
    model = _model(_config("mimo-v2-flash"), tmp_path)
    assert model.num_moe_layers == 47 and model.num_dense_mlp_layers == 1
    assert model.layer_counts == {"sliding_attention": 39, "full_attention": 9}
    assert model.layer_types[0] == "full_attention" and model.sliding_window == 128
    q_o = 4096 * 64 * 192 + 64 * 128 * 4096
    attention = 9 * (q_o + 4096 * 4 * 320) + 39 * (q_o + 4096 * 8 * 320)
    assert param_breakdown(model)["attention"] == attention
    full, sliding = kv_layout(model).segments
    assert (full.bytes_per_token, sliding.bytes_per_token, sliding.window) == (
        9 * 4 * 320 * 2, 39 * 8 * 320 * 2, 128)
    ops = _ops(model, 1, 1_000)
    assert ops["qkv_proj"].layers == 9 and ops["qkv_proj_sliding"].layers == 39
    assert ops["qkv_proj_sliding"].gemm_n == 64 * 192 + 8 * 320
    assert ops["o_proj"].gemm_k == 64 * 128


# Synthetic configs below (not facts about a checkpoint): the MoE layer keys of the generic path.
SMALL_MOE = {"architectures": ["SomeMoeForCausalLM"], "hidden_size": 512, "num_hidden_layers": 4,
             "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024,
             "vocab_size": 1000, "tie_word_embeddings": False, "num_local_experts": 8,
             "num_experts_per_tok": 2}


@pytest.mark.parametrize("keys, moe_layers", [
    ({}, 4),
    ({"decoder_sparse_step": 2, "mlp_only_layers": [1]}, 1),  # (i + 1) % 2 == 0: 1, 3; not 1
    ({"first_k_dense_replace": 1, "moe_layer_freq": 2}, 1),  # i >= 1 and i % 2 == 0: 2
    ({"moe_layer_freq": [0, 1, 0, 1]}, 2),
])
def test_moe_layer_keys(keys: dict[str, Any], moe_layers: int, tmp_path: Path) -> None:
    """Hand count: per layer attention 2 x 512^2 + 2 x 512 x 128 and 2 norms; a dense layer's
    MLP 3 x 512 x 1024; an MoE layer's 8 experts of 3 x 512 x 1024 and a 512 x 8 router."""
    model = _model({**SMALL_MOE, **keys}, tmp_path)
    assert model.num_moe_layers == moe_layers
    dense, moe = 3 * 512 * 1024, 8 * 3 * 512 * 1024 + 512 * 8
    per_layer = 2 * 512 * 512 + 2 * 512 * 128 + 2 * 512
    expected = 4 * per_layer + (4 - moe_layers) * dense + moe_layers * moe + 2 * 1000 * 512 + 512
    assert total_params(model) == expected


NEMOTRON_SMALL = {"architectures": ["NemotronHForCausalLM"], "hidden_size": 256,
                  "num_hidden_layers": 4, "hybrid_override_pattern": "M*M-",
                  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                  "intermediate_size": 512, "vocab_size": 1000, "mamba_num_heads": 8,
                  "mamba_head_dim": 32, "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4}


@pytest.mark.parametrize("change, message", [
    ({"hybrid_override_pattern": "M*MX"}, r"cannot model key 'hybrid_override_pattern' "
                                          r"\(block 'X'\)"),
    ({"hybrid_override_pattern": "M*M"}, r"key 'hybrid_override_pattern' must give 4 blocks"),
    ({"use_bias": True}, r"cannot model key 'use_bias' \(Mamba projection biases\)"),
    ({"mamba_num_heads": None}, r"missing key 'mamba_num_heads'"),
    ({"n_groups": 3}, r"'mamba.n_groups' = 3 does not divide 'mamba.num_heads' = 8"),
])
def test_unmodellable_nemotron_configs(change: dict[str, Any], message: str,
                                       tmp_path: Path) -> None:
    config = {k: v for k, v in {**NEMOTRON_SMALL, **change}.items() if v is not None}
    with pytest.raises(SpecError, match=message):
        _model(config, tmp_path)


@pytest.mark.parametrize("overrides, message", [
    ({"layer_types": ["mamba", "full_attention"]}, r"field 'mamba' is missing"),
    ({"mlp_types": ["dense", "experts"]}, r"'mlp_types' has unknown kind 'experts'"),
    ({"mlp_types": ["dense"]}, r"'mlp_types' has 1 entries, 'num_layers' is 2"),
    ({"layer_types": ["mlp_only", "full_attention"], "mlp_types": ["none", "dense"]},
     r"layer 0 is 'mlp_only' in 'layer_types' and 'none' in 'mlp_types'"),
    ({"mlp_types": ["moe", "dense"]}, r"field 'moe' is missing but mlp_types has moe layers"),
    ({"dsa": {"index_n_heads": 4, "index_head_dim": 16, "index_topk": 8}},
     r"'dsa' \(sparse attention\) needs the 'mla' block"),
])
def test_bad_hybrid_specs_name_the_field(write_yaml, overrides, message) -> None:  # type: ignore[no-untyped-def]
    spec = {"name": "Tiny", "source": "test", "architecture": "X", "hidden_size": 64,
            "num_layers": 2, "num_attention_heads": 4, "num_kv_heads": 2, "head_dim": 16,
            "intermediate_size": 128, "vocab_size": 1000, **overrides}
    with pytest.raises(SpecError, match=message):
        load_model(str(write_yaml("bad.yaml", spec)))


@pytest.mark.parametrize("model, tp, ep, option, message", [
    ("qwen3-8b", 3, 1, "tp", "tensor parallel degree 3 must divide the 32 attention heads"),
    # 32 heads, 2 KV heads and 64 Mamba heads split over 16, its 8 B/C groups do not
    ("nemotron-3-nano-30b-a3b", 16, 1, "tp",
     "tensor parallel degree 16 must divide the 8 Mamba groups"),
    ("deepseek-v3", 1, 3, "ep", "expert parallel degree 3 must divide the 256 routed experts"),
    ("qwen3-8b", 1, 2, "ep", "has no experts"),
])
def test_parallel_layout_names_the_dimension(model: str, tp: int, ep: int, option: str,
                                             message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        check_parallel(load_model(model), tp=tp, ep=ep)
    assert err.value.parameter == option


@pytest.mark.parametrize("args, line", [
    (["--model", "nemotron-3-nano-30b-a3b", "--tp", "16"],
     "option --tp: tensor parallel degree 16 must divide the 8 Mamba groups"),
    (["--model", "deepseek-v3", "--ep", "3"],
     "option --ep: expert parallel degree 3 must divide the 256 routed experts"),
])
def test_cli_refuses_a_layout_in_one_line(args: list[str], line: str) -> None:
    result = subprocess.run([sys.executable, "-m", "specsim", "roofline", "--hardware", "h200",
                             *args], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"specsim: error: {line} of "
                                                  f"{load_model(args[1]).name}"]


def test_qwen3_5_gated_delta_net_moe(tmp_path: Path) -> None:
    """Qwen3.5-397B-A17B: `layer_types` lists 45 linear-attention and 15 full-attention layers
    (every 4th full), 512 experts top-10 with a shared expert, one MTP layer; no dense MLP
    width is given and none is used."""
    model = _model(_config("qwen3.5-397b-a17b"), tmp_path)
    assert model.layer_counts == {"linear_attention": 45, "full_attention": 15}
    assert model.layer_types[3] == "full_attention" and model.attention_output_gate
    assert model.moe is not None and (model.moe.num_experts, model.moe.experts_per_token) == \
        (512, 10)
    assert model.num_dense_mlp_layers == 0 and model.mtp_layers == 1
    assert model.linear_attention is not None and model.linear_attention.num_value_heads == 64


def test_glm5_indexers_own_and_shared(tmp_path: Path) -> None:
    """GLM-5 runs a lightning indexer (32 heads x 128) in each of its 78 MLA layers. GLM-5.2
    marks 57 of them 'shared' (`indexer_types`), reusing the layer before's top-k: 21 indexers
    and their keys remain; its `mlp_layer_types` keeps the first 3 layers dense. Cache per token
    (bf16 latent 512 + 64): 78 x 1152 + 21 x (128 + 4) bytes."""
    glm5, glm52 = _model(_config("glm-5"), tmp_path, "g5"), _model(_config("glm-5.2"), tmp_path,
                                                                    "g52")
    assert glm5.dsa is not None and glm5.num_indexer_layers == 78
    assert glm52.num_indexer_layers == 21 and glm52.num_moe_layers == 75
    assert kv_layout(glm52).bytes_per_token == 78 * 1152 + 21 * 132
    indexer = 2048 * 32 * 128 + 6144 * 128 + 2 * 128 + 6144 * 32  # wq_b, wk, k_norm, weights
    assert total_params(glm5) - total_params(glm52) == (78 - 21) * indexer
    ops = _ops(glm52, 2, 10_000)
    assert ops["sparse_indexer"].layers == 21 and ops["attention"].layers == 78
    # a config that names its layers 'deepseek_sparse_attention' reads them as MLA layers
    named = _model({**_config("glm-5"), "layer_types": ["deepseek_sparse_attention"] * 78},
                   tmp_path, "named")
    assert named.layer_counts == {"full_attention": 78}


def test_nemotron_3_latent_moe(tmp_path: Path) -> None:
    """Nemotron 3 Super: the router reads the 4096-wide token, fc1_latent_proj takes it to the
    1024 latent where 512 squared-ReLU experts (up and down, 2688 wide) work, fc2_latent_proj
    brings it back; the shared expert (5376) works at full width. Under EP the dispatch carries
    the latent: 22 copies of 1024 bf16 values per token, (EP - 1)/EP of them away."""
    model = _model(_config("nvidia-nemotron-3-super-120b-a12b-fp8"), tmp_path)
    moe_layers = _config("nvidia-nemotron-3-super-120b-a12b-fp8")[
        "hybrid_override_pattern"].count("E")
    assert model.num_moe_layers == moe_layers == 40
    parts = param_breakdown(model)
    assert parts["experts"] == 40 * 512 * 2 * 1024 * 2688
    assert parts["latent_projections"] == 40 * 2 * 4096 * 1024
    assert parts["shared_experts"] == 40 * 2 * 4096 * 5376
    ops = {op.name: op for op in pass_work(model, decode_passes(np.array([4.0]), 1_000), ep=8)}
    assert ops["experts_up"].gemm_k == 1024 and ops["experts_down"].gemm_n == 1024
    assert ops["moe_latent_in"].gemm_k == 4096 and ops["moe_latent_in"].gemm_n == 1024
    assert float(ops["all_to_all"].activation_bytes[0]) == pytest.approx(
        4 * 1024 * 2 * 22 * 7 / 8)


def test_nemotron_block_list_without_layer_count(tmp_path: Path) -> None:
    """Nemotron 3 Ultra lists its 108 blocks by name (`layers_block_type`) and gives no
    num_hidden_layers."""
    config = _config("nvidia-nemotron-3-ultra-550b-a55b-bf16")
    assert "num_hidden_layers" not in config
    names = config["layers_block_type"]
    model = _model(config, tmp_path)
    assert model.num_layers == len(names) == 108
    assert model.layer_counts["mamba"] == names.count("mamba")
    assert model.num_moe_layers == names.count("moe")
    assert model.layer_counts["full_attention"] == names.count("attention")


@pytest.mark.parametrize("change, message", [
    ({"indexer_types": ["full", "reuse"] * 39},
     r"key 'indexer_types' must list 78 kinds, 'full' or 'shared'"),
    ({"mlp_layer_types": ["dense"] * 77}, r"key 'mlp_layer_types' must list 78 kinds"),
])
def test_bad_glm5_layer_lists(change: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=message):
        _model({**_config("glm-5"), **change}, tmp_path)


def test_unknown_nemotron_block_name(tmp_path: Path) -> None:
    config = {k: v for k, v in NEMOTRON_SMALL.items() if k != "hybrid_override_pattern"}
    config["layers_block_type"] = ["mamba", "attention", "mamba", "cross"]
    with pytest.raises(SpecError, match=r"cannot model key 'layers_block_type' "
                                        r"\(block 'cross'\)"):
        _model(config, tmp_path)

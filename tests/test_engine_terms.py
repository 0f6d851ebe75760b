"""Engine terms of a step with a physical source: the all-reduce of tensor parallelism (the
engines' measured custom all-reduce per TP degree, hardware/*.yaml interconnect.allreduce_us; a
ring over the link where a degree is not measured; a link time kept out of the engines'
HBM-efficiency division), SGLang's activation-quantization kernels before fp8 GEMMs, its prefill
passes that decoding waits for, and the kernels of a hybrid (Mamba) block.

Expected values are read off the published tables and engine sources (as copied into
hardware/*.yaml and engines/*.yaml) and counted or interpolated by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.cost import RING_BANDWIDTH_FRACTION, collective_time_s, pass_cost
from specsim.forward.shapes import uniform_passes
from specsim.specs.engines import load_engine
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from specsim.speculation import engine_time
from tests.conftest import VIDUR_DIR, requires_vidur


def test_h100_all_reduce_is_the_measured_custom_all_reduce_per_tp_degree() -> None:
    hw = load_hardware("h100-sxm")
    sizes = np.array([512.0, 16384.0, 2 * 1048576.0, 100.0])
    us = collective_time_s(sizes, hw, 8) * 1e6
    # TP 8: 5.9 us at 512 B (measured); 16 KiB lies 12,288 / 28,672 of the way from 4 KiB
    # (5.7 us) to 32 KiB (7.8 us); past the largest measured size (1 MiB, 33.8 us) the extra
    # MiB of a 2 MiB message goes at NCCL's ring rate, 2 x 7/8 of it over 0.538 x 450 GB/s
    # (7.58 us); below the smallest size: 5.9.
    ring_mib = 2 * 7 / 8 * 1048576 / (0.538 * 450e9) * 1e6
    assert us == pytest.approx([5.9, 5.7 + 12288 / 28672 * 2.1, 33.8 + ring_mib, 5.9])
    # TP 2 and 4 are their own measurements, not TP 8's
    assert collective_time_s(np.array([32768.0]), hw, 2)[0] * 1e6 == pytest.approx(4.5)
    assert collective_time_s(np.array([32768.0]), hw, 4)[0] * 1e6 == pytest.approx(4.8)
    # no all-reduce at TP 1
    assert collective_time_s(np.array([32768.0]), hw, 1)[0] == 0.0


def test_an_unmeasured_degree_is_a_ring_over_the_link() -> None:
    """A degree with no measured table within one scale-up domain: the NCCL latency + 2 (tp - 1)
    / tp x bytes / (0.538 x link bandwidth), NCCL's ring rate (MI300X TP 8: 14.87 us, 448 GB/s;
    the A100 has no table). TP 16 on the 8-GPU H100 board crosses the network:
    tests/test_multinode.py."""
    hw = load_hardware("mi300x")
    got = collective_time_s(np.array([1e6]), hw, 8)[0]
    assert got == pytest.approx(14.87e-6 + 2 * 7 / 8 * 1e6 / (0.538 * 448e9))
    a100 = load_hardware("a100-80g-sxm")
    assert not a100.allreduce_s
    assert collective_time_s(np.array([0.0]), a100, 8)[0] == pytest.approx(
        a100.interconnect_latency_s)


def _verify_rounds(model: str, factor: float, batch: list[int]) -> tuple[Any, Any]:
    """(speedup table, its setup) of plain decoding and a chain of 3 on an H100 at 2,048
    cached tokens, SGLang's terms with the given verify_attention_factor."""
    from specsim.speculation.speedup import Candidates, Setup, speedup_table

    cands = Candidates(nodes=np.array([0.0, 3.0]), depth=np.array([0.0, 3.0]),
                       tau=np.array([1.0, 2.5]), max_width=np.array([1.0, 1.0]),
                       shape=("chain", "chain"))
    engine = load_engine("sglang:sync").with_terms(verify_attention_factor=factor)
    setup = Setup(target=load_model(model), hardware=load_hardware("h100-sxm"),
                  drafter=None, draft_cost=0.1, context=2048.0, engine=engine)
    return speedup_table(setup, batch, cands), setup


def test_verification_attention_pays_the_engines_factor_on_gqa_attention_only() -> None:
    """A verification pass's attention costs verify_attention_factor x a decoding kernel's:
    at factor 3 each round's verification grows by 2 x the softmax attention of that pass
    (timed here on its own from pass_cost: 4 queries a request over 2,048 cached tokens), and a
    plain step not at all; an MLA target (DeepSeek-V3) is left alone, its decode kernels
    holding the heads in the query tile."""
    from specsim.forward.cost import pass_cost
    from specsim.forward.shapes import batch_mix_passes
    from specsim.speculation import engine_time

    one, setup = _verify_rounds("llama-3.1-8b", 1.0, [2, 32])
    three, _ = _verify_rounds("llama-3.1-8b", 3.0, [2, 32])
    hw = engine_time.timing_hardware(setup.engine, setup.hardware)
    cost = pass_cost(setup.target, hw, batch_mix_passes(4.0, np.array([2.0, 32.0]),
                                                        np.array([2048.0])))
    attention = cost.by_op()["attention"]
    assert three.verify_s[:, 1] - one.verify_s[:, 1] == pytest.approx(2 * attention, rel=1e-9)
    assert np.asarray(three.verify_attention_s)[:, 1] == pytest.approx(attention, rel=1e-9)
    assert three.baseline_s == pytest.approx(one.baseline_s, rel=1e-12)
    assert three.verify_s[:, 0] == pytest.approx(one.verify_s[:, 0], rel=1e-12)
    mla_one, _ = _verify_rounds("deepseek-v3", 1.0, [8])
    mla_three, _ = _verify_rounds("deepseek-v3", 3.0, [8])
    assert mla_three.verify_s == pytest.approx(mla_one.verify_s, rel=1e-12)


def test_a_factor_below_one_names_the_file_and_field(tmp_path: Path) -> None:
    import yaml

    data = yaml.safe_load((Path(__file__).parent.parent / "engines" / "vllm.yaml").read_text())
    data["priors"]["verify_attention_factor"]["value"] = 0.5
    path = tmp_path / "engine.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match="engine.yaml: field 'priors.verify_attention_factor'"):
        load_engine(str(path))


def test_a_mesh_gives_a_group_of_n_gpus_n_minus_1_links(tmp_path: Path) -> None:
    """AMD's 8-GPU platform links each GPU to each peer once (7 x 64 GB/s per direction on an
    MI300X): a TP group of n gets n - 1 links; NVSwitch gives any group the whole 450 GB/s.
    Past SGLang PR #6619's measured TP 4 all-reduce (its 1-8 MiB points, 22.91 -> 118.31 us:
    13.6 us per MiB) a ring over 3 links at NCCL's 0.538 takes 2 x 3/4 MiB / (0.538 x 192
    GB/s) = 15.2 us per MiB, within 15% (over all 7 links it would be 6.5 us, half)."""
    mi300x, h100 = load_hardware("mi300x"), load_hardware("h100-sxm")
    assert [mi300x.group_bandwidth(n) for n in (2, 4, 8)] == pytest.approx([64e9, 192e9, 448e9])
    assert {h100.group_bandwidth(n) for n in (2, 4, 8)} == {450e9}
    mib = 1048576
    measured = (118.31 - 22.91) / 7  # us per MiB, the table's 1 to 8 MiB
    ring = 2 * 3 / 4 * mib / (0.538 * 192e9) * 1e6
    assert ring == pytest.approx(measured, rel=0.15)
    assert collective_time_s(np.array([4.0 * mib]), mi300x, 4)[0] * 1e6 == pytest.approx(63.86)
    # past 8 MiB the extra bytes go over the 3 links
    got = collective_time_s(np.array([9.0 * mib]), mi300x, 4)[0] * 1e6
    assert got == pytest.approx(118.31 + ring)
    text = (Path(__file__).parent.parent / "hardware" / "mi300x.yaml").read_text()
    path = tmp_path / "gpu.yaml"
    path.write_text(text.replace("  mesh_links:\n    value: 7", "  mesh_links:\n    value: -1"))
    with pytest.raises(SpecError, match="gpu.yaml.*'interconnect.mesh_links'"):
        load_hardware(str(path))


@requires_vidur
def test_the_ring_rate_is_nccls_measured_on_a_dgx_a100() -> None:
    """RING_BANDWIDTH_FRACTION against Vidur's NCCL all-reduce table (one DGX A100, 8 GPUs,
    1-67 MB, the median of each size's repeats): a brute-force grid over the latency (1 us
    steps) and the fraction (0.001 steps) of time = latency + 2 x 7/8 x bytes / (fraction x
    300 GB/s), least squares on the log time, lands within 0.005 of the constant."""
    import pandas as pd

    table = pd.read_csv(VIDUR_DIR / "network" / "all_reduce_a100.csv")
    rows = table[(table["num_workers"] == 8) & (table["devices_per_node"] == 8)
                 & (table["size_bytes"] >= 1 << 20)]
    median = rows.groupby("size_bytes")["time_ms"].median()
    size, time = median.index.to_numpy(float), median.to_numpy() * 1e-3
    latency = np.arange(0.0, 120.0, 1.0)[:, None, None] * 1e-6
    fraction = np.arange(0.30, 0.90, 0.001)[None, :, None]
    model = latency + 2 * 7 / 8 * size[None, None, :] / (fraction * 300e9)
    loss = np.sum(np.log(model / time[None, None, :]) ** 2, axis=2)
    _, best = np.unravel_index(np.argmin(loss), loss.shape)
    assert fraction[0, best, 0] == pytest.approx(RING_BANDWIDTH_FRACTION, abs=0.005)


def test_engines_keep_a_measured_link_time_out_of_the_kernel_efficiency() -> None:
    """An engine's kernels run at the GPU's kernel efficiency; the all-reduces of a TP-2 step
    are measured times and come out as measured, scaled by no efficiency."""
    engine, hw = load_engine("sglang"), load_hardware("h100-sxm")
    model = load_model("llama-3.1-8b")
    shape = uniform_passes(np.array(1.0), np.array([1.0]), 2048.0)
    cost = pass_cost(model, engine_time.timing_hardware(engine, hw), shape, tp=2)
    link = sum(c.total_time_s[0] for c in cost.ops if c.op.op_class == "communication")
    # 2 all-reduces per layer x 32 layers of one token's 4,096 bf16 activations (8,192 B),
    # between 4 KiB (3.9 us) and 32 KiB (4.5 us) on TP 2: 3.9 + 4096 / 28672 x 0.6 us each
    each = 3.9e-6 + 4096 / 28672 * 0.6e-6
    # (the logits gather that closes the pass is a link time too, on the ring formula)
    gather = [c for c in cost.ops if c.op.name == "logits_gather"][0].total_time_s[0]
    assert link == pytest.approx(64 * each + gather, rel=1e-6)
    others = sum(c.total_time_s[0] for c in cost.ops if c.op.op_class != "communication")
    kernel = engine_time.kernel_pass_s(engine, hw, model, shape, tp=2)[0]
    assert kernel == pytest.approx(others + link, rel=1e-9)


def _profile(allreduce: object) -> dict[str, object]:
    return {
        "name": "Test GPU", "vendor": "test",
        "memory": {"hbm_capacity_GB": 80, "hbm_bandwidth_GB_per_s": 3000, "source": "s"},
        "compute": {"dense_TFLOPS": {"bf16": 900}, "source": "s"},
        "interconnect": {"name": "link", "bandwidth_GB_per_s": 400, "latency_us": 10,
                         "allreduce_us": allreduce, "source": "s"},
        "pcie": {"bandwidth_GB_per_s": 64, "source": "s"},
    }


@pytest.mark.parametrize("allreduce, message", [
    ({"tp1": [[512, 3.0], [4096, 4.0]]}, "allreduce_us.tp1' must be tp<N> with N >= 2"),
    ({"eight": [[512, 3.0], [4096, 4.0]]}, "allreduce_us.eight' must be tp<N>"),
    ({"tp8": [[512, 3.0]]}, "allreduce_us.tp8' must list at least two"),
    ({"tp8": [[512, 3.0], [4096, -4.0]]}, "allreduce_us.tp8' has [4096, -4.0]"),
    ({"tp8": [[512, 3.0], [512, 4.0]]}, "allreduce_us.tp8' lists a message size twice"),
    ({"tp8": [[512, 3.0], [4096]]}, "each point must be [message bytes, microseconds]"),
])
def test_a_bad_all_reduce_table_names_file_and_field(write_yaml: Any, allreduce: object,
                                                      message: str) -> None:
    path = write_yaml("gpu.yaml", _profile(allreduce))
    with pytest.raises(SpecError, match=r"gpu\.yaml") as err:
        load_hardware(str(path))
    assert message in str(err.value)


def test_sglang_runs_a_quantization_kernel_before_each_fp8_dense_gemm() -> None:
    """SGLang 0.5.23 quantizes a W8A8 GEMM's activations in a kernel of its own (engines/
    sglang.yaml quant_kernels_per_gemm); vLLM 0.33's compile passes fuse it (0). DeepSeek-V3
    (61 layers, the first 3 dense, 58 with one shared expert) counted by hand: 4 fp8 GEMMs of
    MLA per layer (q_a/kv_a down, q up, the absorbed k/v up, o) = 244, the shared expert's 2 x
    58 = 116, the dense MLP's 2 x 3 = 6: 366; the router, LM head and the experts (inside the
    fused-MoE kernels) take none. Llama-3.1-8B served in fp8: 4 x 32 = 128; bf16, int4 (Marlin
    dequantizes inside the GEMM) and mxfp4 take none."""
    sglang, vllm = load_engine("sglang"), load_engine("vllm")
    deepseek, llama = load_model("deepseek-v3"), load_model("llama-3.1-8b")
    extra = engine_time.model_kernels(sglang, deepseek) - engine_time.model_kernels(
        sglang, deepseek, "bf16")
    assert extra == 366
    assert engine_time.model_kernels(vllm, deepseek) == engine_time.model_kernels(
        vllm, deepseek, "bf16")
    assert engine_time.model_kernels(sglang, llama, "fp8") - engine_time.model_kernels(
        sglang, llama) == 128
    assert engine_time.quantized_gemms(llama, "int4") == 0
    assert engine_time.quantized_gemms(load_model("gpt-oss-120b")) == 0


def test_sglang_prompts_are_passes_of_their_own_that_decoding_waits_for() -> None:
    """SGLang runs arriving prompts as a prefill pass before the next decoding step
    (prefill_mixed false); vLLM mixes them into the step (true). The wait per step: below one
    arrival a step, that share of one prompt's pass; from one on, one pass of all of them."""
    from specsim.speculation.setup import load_setup
    from specsim.speculation.speedup import prefill_pass_s, prefill_stall_s

    assert load_engine("sglang").prefill_mixed is False
    assert load_engine("vllm").prefill_mixed is True
    setup, _ = load_setup(model="llama-3.1-8b", hardware="h100-sxm", engine="sglang",
                          alpha=0.8)
    one, three = prefill_pass_s(setup, 1000.0, np.array([1.0, 3.0]))
    stall = prefill_stall_s(setup, 1000.0, np.array([0.0, 0.25, 3.0]))
    assert stall == pytest.approx([0.0, 0.25 * one, three])
    # a pass of 1,000 prompt tokens streams the weights once and computes 1,000 tokens:
    # longer than a one-token step, shorter than three such prompts' pass
    step = prefill_pass_s(setup, 1.0, np.array([1.0]))[0]
    assert step < one < three


def test_a_sglang_concurrency_row_waits_for_the_arriving_prompts_passes() -> None:
    """The plain step of an SGLang concurrency row (TPOT, its own prefill left out) is the
    closed-batch step plus (C - 1) / O arriving prompts' passes per step."""
    from specsim.measurement import validate_rows as V
    from specsim.measurement.published import load_published
    from specsim.speculation.speedup import prefill_stall_s

    row = next(r for r in load_published(["plain-decode-moe-amd"])
               if r.id == "sglcookbook-b200-dsr1-8k1k-tp8-c16")
    engine = load_engine("sglang")
    closed = V.row_parts(dataclasses.replace(row, benchmark="batch"), engine)
    concurrent = V.row_parts(row, engine)
    assert row.input_tokens and row.output_tokens
    arrivals = (row.batch - 1) / row.output_tokens
    setup, _ = V.row_setup(row, engine)
    wait = prefill_stall_s(setup, float(row.input_tokens), np.array([arrivals]))[0]
    assert concurrent.baseline_s == pytest.approx(closed.baseline_s + wait, rel=1e-9)


def test_an_engine_whose_prefill_mixing_is_not_a_boolean_names_the_field(tmp_path: Any) -> None:
    text = (Path(__file__).parents[1] / "engines" / "sglang.yaml").read_text()
    bad = tmp_path / "eng.yaml"
    bad.write_text(text.replace("prefill_mixed:\n  value: false", "prefill_mixed:\n  value: 3"))
    with pytest.raises(SpecError, match=r"eng\.yaml: field 'prefill_mixed' must be true or false"):
        load_engine(str(bad))


def test_a_hybrid_block_counts_its_one_mixer_and_one_norm() -> None:
    """Nemotron-3-Nano-30B-A3B: 52 blocks of one mixer each (23 Mamba-2, 23 MoE, 6 attention)
    and one fused add+RMSNorm each. On SGLang (engines/sglang.yaml): Mamba 1 + 5, MoE 1 + its
    router (the shared expert is fused into the routed kernels), attention 1 + 6 (8 less the
    two norms of a decoder layer), plus 8 a pass: 23 x 6 + 23 x 2 + 6 x 7 + 8 = 234. A Llama
    layer keeps its 8 + 3: 32 x 11 + 8 = 360."""
    sglang = load_engine("sglang")
    assert engine_time.model_kernels(sglang, load_model("nemotron-3-nano-30b-a3b")) == 234
    assert engine_time.model_kernels(sglang, load_model("llama-3.1-8b")) == 360

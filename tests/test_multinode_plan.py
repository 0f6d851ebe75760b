"""Plans past one node: layouts over nodes for a model that fits none, the answer in nodes, the
engines' per-node commands (flags as recorded from their wheels), and prefill/decode
disaggregation with the KV cache priced over the network.

Hand numbers (hardware/h100-sxm.yaml: 50e9 bytes/s per GPU over its ConnectX-7, 21.27 us):

- DeepSeek-V3 caches MLA latents, (kv_lora_rank 512 + rope 64) x 61 layers x 2 bytes = 70,272
  bytes per token on EVERY GPU of a TP group (the latent is not split by heads). A 1,000-token
  prompt: 70,272,000 bytes per decode GPU; from a TP-16 prefill replica to a TP-16 decode one
  each GPU sends its own copy: 21.27 us + 70,272,000 / 50e9 s = 1.42671 ms.
- Llama-3.1-70B: 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 327,680 bytes per token,
  40,960 per GPU at TP 8. From a TP-4 prefill replica to a TP-8 decode replica the 4 senders
  carry 8 x 40,960,000 bytes: twice a receiver's share each, 81,920,000 / 50e9 s + 21.27 us =
  1.65967 ms.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from specsim.engines import adapter
from specsim.engines.base import EngineCommand
from specsim.engines.parallel import HEAD_ADDRESS, nodes_of, parallel_commands
from specsim.present.report_answer import answer_text, nodes_text
from specsim.serving.capacity import prompt_prefill_s, serving_table
from specsim.serving.disaggregate import kv_transfer_s
from specsim.serving.plan import make_plan
from specsim.serving.scenarios import load_scenario
from specsim.specs.engine_args import engine_args
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from specsim.speculation.speedup import Candidates, Setup

NIC = 50e9
NET = 21.27e-6


def _plain() -> Candidates:
    return Candidates(nodes=np.zeros(1), depth=np.zeros(1), tau=np.ones(1),
                      max_width=np.zeros(1), shape=("chain",))


def _table(model: str, tp: int, ep: int = 1):  # type: ignore[no-untyped-def]
    setup = Setup(target=load_model(model), hardware=load_hardware("h100-sxm"), context=1000.0,
                  ep=ep, draft_cost=0.0)
    return serving_table(setup, load_scenario("chat"), _plain(), batch=[1], tp=tp)


def test_kv_transfer_by_hand() -> None:
    assert 512 * 61 * 2 + 64 * 61 * 2 == 70_272
    got = kv_transfer_s(_table("deepseek-v3", 16), 16, 1000.0)
    assert got == pytest.approx(NET + 70_272_000 / NIC, rel=1e-12)
    assert got * 1e3 == pytest.approx(1.42671, abs=1e-5)
    assert 80 * 8 * 128 * 2 * 2 == 327_680
    llama = kv_transfer_s(_table("llama-3.1-70b", 8), 4, 1000.0)
    assert llama == pytest.approx(NET + 2 * 40_960_000 / NIC, rel=1e-12)


def test_nodes_in_words() -> None:
    h100, gb200 = load_hardware("h100-sxm"), load_hardware("gb200")
    assert nodes_text(h100, 16, 16).startswith("2 nodes of 8 NVIDIA H100 SXM5 80GB (16 GPUs), "
                                                "each replica across 2 nodes over ConnectX-7")
    assert nodes_text(h100, 24, 8) == "3 nodes of 8 NVIDIA H100 SXM5 80GB (24 GPUs)"
    assert "in one 72-GPU NVLink 5" in nodes_text(gb200, 16, 16)  # 4 trays, one NVLink domain
    assert nodes_text(load_hardware("a100-80g-sxm"), 16, 16) == ""
    assert nodes_of(8, 32, 8) == 4 and nodes_of(1, 1, 8) == 1


def _command(engine: str, argv: tuple[str, ...]) -> EngineCommand:
    return EngineCommand(engine=engine, version="x", argv=argv)


def test_vllm_per_node_commands_use_its_recorded_flags() -> None:
    """vLLM 0.33.0 (engines/vllm.yaml speculative.parallel, read in the wheel's arg_utils.py):
    TP 8 x EP 16 over 2 nodes is --tensor-parallel-size 8 --data-parallel-size 2
    --enable-expert-parallel; every node --nnodes 2 --node-rank r --master-addr, all but the
    first --headless; the batch cap stays each DP rank's, last."""
    vllm = adapter("vllm")
    cap = ("--max-num-seqs", "43")
    base = ("vllm", "serve", "m", "--tensor-parallel-size", "8", *cap)
    out = parallel_commands(vllm, _command("vllm", base), tp=8, ep=16, gpus_per_node=8, tail=cap)
    assert [c.argv for c in out] == [
        ("vllm", "serve", "m", "--tensor-parallel-size", "8", "--data-parallel-size", "2",
         "--enable-expert-parallel", "--nnodes", "2", "--node-rank", str(rank),
         "--master-addr", HEAD_ADDRESS, *(("--headless",) if rank else ()), *cap)
        for rank in (0, 1)]
    rules = engine_args("vllm").rules["parallel"]
    assert {rules[k] for k in ("data_parallel_flag", "expert_parallel_switch", "nodes_flag",
                               "node_rank_flag", "address_flag", "worker_switch")} == {
        "--data-parallel-size", "--enable-expert-parallel", "--nnodes", "--node-rank",
        "--master-addr", "--headless"}
    # one node, TP 8: nothing to add
    one = _command("vllm", base)
    assert parallel_commands(vllm, one, tp=8, ep=1, gpus_per_node=8, tail=cap) == [one]


def test_sglang_per_node_commands_count_the_replica() -> None:
    """SGLang 0.5.23 (fields/parallel.py): --tp-size is every GPU of the replica (16), the
    experts over --ep-size 16, attention in --attention-data-parallel-size 2 groups of 8;
    --max-running-requests counts both groups (moe_hook.py:669): 2 x 43 = 86; the CUDA-graph
    batch stays one group's."""
    sglang = adapter("sglang")
    cap = ("--cuda-graph-max-bs-decode", "43", "--max-running-requests", "43")
    base = ("python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "8", *cap)
    out = parallel_commands(sglang, _command("sglang", base), tp=8, ep=16, gpus_per_node=8,
                            tail=cap)
    assert [c.argv for c in out] == [
        ("python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "16",
         "--ep-size", "16", "--attention-data-parallel-size", "2", "--nnodes", "2",
         "--node-rank", str(rank), "--dist-init-addr", f"{HEAD_ADDRESS}:25000",
         "--cuda-graph-max-bs-decode", "43", "--max-running-requests", "86")
        for rank in (0, 1)]
    # TP 16 without EP: the TP flag alone, over 2 nodes
    plain = ("python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "16",
             *cap)
    two = parallel_commands(sglang, _command("sglang", plain), tp=16, ep=1, gpus_per_node=8,
                            tail=cap)
    assert [c.argv[-8:-4] for c in two] == [("--node-rank", "0", "--dist-init-addr",
                                             f"{HEAD_ADDRESS}:25000"),
                                            ("--node-rank", "1", "--dist-init-addr",
                                             f"{HEAD_ADDRESS}:25000")]


def test_trtllm_runs_one_mpi_world_over_the_nodes() -> None:
    """TensorRT-LLM (engines/trtllm.yaml speculative.parallel, after trtllm-serve.rst's
    multi-node example): --tp_size is the whole replica, --ep_size the experts (replacing the
    one-replica command's), and two nodes are one command started once under mpirun with 16
    ranks over HEAD_IP:8,NODE1_IP:8 through trtllm-llmapi-launch; the cap stays last."""
    trtllm = adapter("trtllm")
    cap = ("--max_batch_size", "8")
    base = ("trtllm-serve", "m", "--tp_size", "8", "--ep_size", "8",
            "--extra_llm_api_options", "f.yaml", *cap)
    got = parallel_commands(trtllm, _command("trtllm", base), tp=16, ep=16, gpus_per_node=8,
                            tail=cap)
    assert [c.argv for c in got] == [(
        "mpirun", "-np", "16", "-H", f"{HEAD_ADDRESS}:8,NODE1_IP:8", "trtllm-llmapi-launch",
        "trtllm-serve", "m", "--tp_size", "16", "--ep_size", "16",
        "--extra_llm_api_options", "f.yaml", *cap)]
    # TP 8 groups beside 16 expert GPUs: its attention data parallelism runs at TP 1 only
    refused = parallel_commands(trtllm, _command("trtllm", base), tp=8, ep=16,
                                gpus_per_node=8, tail=cap)
    assert len(refused) == 1 and not refused[0].argv
    assert "attention data-parallel at TP 1 only" in refused[0].reason


def test_an_engine_without_parallel_flags_refuses(tmp_path: Path) -> None:
    trtllm = adapter("trtllm")
    spec = yaml.safe_load(Path(trtllm.args.path).read_text())
    del spec["speculative"]["parallel"]
    (tmp_path / "trtllm.yaml").write_text(yaml.safe_dump(spec))
    bare = dataclasses.replace(trtllm, spec_path=tmp_path / "trtllm.yaml")
    cap = ("--max_batch_size", "8")
    got = parallel_commands(bare, _command("trtllm", ("trtllm-serve", "m", *cap)), tp=16,
                            ep=1, gpus_per_node=8, tail=cap)
    assert len(got) == 1 and not got[0].argv and "speculative.parallel" in got[0].reason


@pytest.fixture(scope="module")
def deepseek_plan():  # type: ignore[no-untyped-def]
    return make_plan(hardware="h100-sxm", model="deepseek-v3", drafters=[], engine="sglang",
                     workload="chat", users=64.0, disaggregate=True)


def test_a_model_that_fits_no_node_is_planned_over_nodes(deepseek_plan) -> None:  # type: ignore[no-untyped-def]
    """DeepSeek-V3 (fp8, ~690 GB) fits no 8 x 80 GB H100 node: the plan tries TP 16 and 32 and
    TP 8 with the experts over 16 and 32 GPUs, and answers with a replica over nodes."""
    plan = deepseek_plan
    layouts = {(t.tp, t.ep) for t in plan.drafters[-1].tables}
    assert {(16, 1), (32, 1), (8, 16), (8, 32)} <= layouts
    assert not any(t.weights_fit for t in plan.drafters[-1].tables if max(t.tp, t.ep) <= 8)
    s = plan.best_plain
    assert s is not None and s.unit_gpus > 8 and s.gpus % s.unit_gpus == 0
    text = answer_text(plan)
    assert f"{s.gpus // 8} nodes of 8 NVIDIA H100 SXM5 80GB ({s.gpus} GPUs)" in text
    ranks = [c.argv[c.argv.index("--node-rank") + 1] for c in plan.answer_commands
             if c.engine == "vllm"]
    assert ranks == [str(r) for r in range(s.unit_gpus // 8)]
    # TensorRT-LLM runs attention data-parallel at TP 1 only: no command for TP 8 groups beside
    # 32 expert GPUs, and a note that says why (a TP 16 replica gets one mpirun command)
    assert (s.tp, s.ep) == (8, 32) and all(c.argv for c in plan.answer_commands)
    assert not any(c.engine == "trtllm" for c in plan.answer_commands)
    assert any(n.startswith(f"No command for {s.layout}: TensorRT-LLM") and
               "attention data-parallel at TP 1 only" in n for n in plan.notes)


def test_disaggregation_puts_both_pools_in_the_plan(deepseek_plan) -> None:  # type: ignore[no-untyped-def]
    split = deepseek_plan.disaggregated
    assert split is not None
    pre, dec = split.prefill, split.decode
    assert split.total_gpus == pre.gpus + dec.gpus
    # the pool carries the arrivals: one replica less would not
    per_replica = pre.pass_tokens / load_scenario("chat").prompt.mean / pre.pass_s
    assert pre.prompts_per_s <= pre.replicas * per_replica
    assert pre.prompts_per_s > (pre.replicas - 1) * per_replica
    assert pre.utilization == pytest.approx(pre.prompts_per_s / (pre.replicas * per_replica))
    # TTFT at the median prompt: its prefill alone + its KV transfer + one decode round
    scenario = load_scenario("chat")
    median = scenario.prompt.quantile(0.5)
    prefill = next(t for t in deepseek_plan.drafters[-1].tables if t.weights_fit)
    decode = next(t for t in deepseek_plan.drafters[-1].tables
                  if (t.tp, t.ep) == (dec.tp, dec.ep))
    expected = (prompt_prefill_s(prefill.setup, median)
                + NET + 70_272 * median * max(1, dec.tp / pre.tp) / NIC + dec.round_s)
    assert dec.latency.ttft_s[0] == pytest.approx(expected, rel=1e-9)
    assert dec.latency.itl_s == (dec.round_s,) * 3
    # the decode pool's rounds carry no prompt
    plain_decode = serving_table(decode.setup, decode.scenario, decode.candidates,
                                 batch=[dec.batch], tp=dec.tp, prefill=False)
    assert float(plain_decode.prefill_s[0, 0]) == 0.0
    assert dec.round_s == pytest.approx(float(plain_decode.round_s[0, 0]))


def test_pass_time_of_the_prefill_pool_is_bounded_by_its_gemm_flops() -> None:
    """Independent bound on the datasheet roofline (no engine): a pass of 8,192 prompt tokens of
    Llama-3.1-8B on one H100 cannot be faster than its layers' weight GEMMs at peak, 32 x
    (4096 x 6144 + 4096 x 4096 + 3 x 4096 x 14336) = 6,979,321,856 parameters, 2 x that x
    8,192 tokens / 989.4e12 flop/s = 0.11557 s, and the rest of the pass (LM head, sampling,
    norms, attention over ~161-token prompts) adds less than a fifth."""
    from specsim.serving.disaggregate import prefill_pool
    params = 32 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336)
    assert params == 6_979_321_856
    table = _table("llama-3.1-8b", 1)
    assert table.setup.engine is None
    pool = prefill_pool(table, table, load_scenario("chat"), 1.0)
    gemm_s = 2 * params * 8192 / 989.4e12
    assert gemm_s <= pool.pass_s <= 1.2 * gemm_s
    assert pool.pass_tokens == pytest.approx(8192)


def test_cli_refuses_a_layout_in_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for args, line in (
            (["--model", "qwen3-8b", "--ep", "2"], "option --ep: expert parallel degree 2: "
             "Qwen3-8B has no experts (not MoE)"),
            (["--hardware", "a100-80g-sxm", "--model", "deepseek-v3", "--tp", "8", "--ep", "16"],
             "option --ep: a layout of 16 GPUs (TP 8, EP 16) spans nodes"),
            (["--hardware", "a100-80g-sxm", "--disaggregate"], "option --disaggregate: ")):
        result = subprocess.run([sys.executable, "-m", "specsim", "plan", *args, "--out",
                                 str(tmp_path / "report")], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"specsim: error: {line}")


def test_the_per_batch_commands_of_a_two_node_replica_carry_each_flag_once() -> None:
    """DeepSeek-V3 at TP 16 on 8-GPU H100 nodes: the engine commands the plan lists per batch
    range are the replica's, one per node, spread once: each names --nnodes / --node-rank
    once, rank 0 then 1 (they were spread twice, by `recommend`'s commands and again by the
    plan, and carried both ranks)."""
    from specsim.serving.plan import make_plan

    plan = make_plan(hardware="h100-sxm", model="deepseek-v3", drafters=None, engine="vllm",
                     workload="chat", tps=(16,))
    vllm = [c for d in plan.drafters for c in d.commands if c.engine == "vllm" and c.argv]
    assert vllm
    for c in vllm:
        assert c.argv.count("--nnodes") == 1 and c.argv.count("--node-rank") == 1
        assert c.argv.count("--max-num-seqs") == 1
    assert [c.argv[c.argv.index("--node-rank") + 1] for c in vllm] == ["0", "1"]
    assert [c.node_label for c in vllm] == ["node 1 of 2", "node 2 of 2"]

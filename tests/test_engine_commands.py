"""Engine commands reach the batch sizes they were computed for: an engine that fixes its
speculative setting when the server starts (SGLang 0.5.23: the EAGLE triple, the DFLASH block,
the DSPARK gamma) gets one command per range of consecutive batch sizes sharing a setting,
capped at the range's largest batch; one that switches per batch size inside a server (vLLM's
num_speculative_tokens_per_batch_size) gets one command; a setting that holds at every batch
is one command either way. Expected commands are written out by hand from the rows."""

from __future__ import annotations

import json

import pytest

from specsim.engines import BatchRange, EngineCommand, adapter, batch_ranges
from specsim.speculation.recommend import (
    Choice,
    Recommendation,
    engine_commands,
    limit_depth,
    recommend,
)
from specsim.speculation.setup import load_setup

SGLANG = adapter("sglang")
SGLANG_HEAD = ["python", "-m", "sglang.launch_server", "--model-path"]



def _graphs(batch: int) -> list[str]:
    """SGLang 0.5.23 captures decode CUDA graphs as far as a GPU-memory default (as few as 8
    requests): a command for more states its batch."""
    return ["--cuda-graph-max-bs-decode", str(batch)]

def _choice(batch: int, nodes: int, depth: int, width: int, fits: bool = True) -> Choice:
    shape = "none" if nodes == 0 else "chain" if width <= 1 else "tree"
    return Choice(batch=batch, shape=shape, nodes=nodes, depth=depth, max_width=width,
                  tau=2.0, round_s=0.01, speedup=1.5, tokens_per_s_per_user=200.0,
                  throughput=200.0 * batch, fits=fits)


def _rec(rows: list[Choice]) -> Recommendation:
    chains = [c for c in rows if c.max_width <= 1]
    return Recommendation(best=rows, best_chain=chains, objective="speedup",
                          engine_trees=rows, schedule_chain=[])


def _sglang(rows: list[Choice], drafter: str, engine: str = "sglang") -> list[EngineCommand]:
    setup, _ = load_setup(drafter=drafter, engine=engine)
    return [c for c in engine_commands(_rec(rows), setup) if c.engine == "sglang"]


# ------------------------------------------------------------------ grouping


def test_batch_ranges_by_hand() -> None:
    # sorted by batch; 1 and 8 share A, 64 is B, 128 is A again: a new range, because a server
    # with A capped at 128 would also run A at 9-64, where B is the setting
    ranges = batch_ranges([64, 1, 128, 8], ["B", "A", "A", "A"])
    assert ranges == [BatchRange(first=1, last=8, batches=(1, 8), setting="A"),
                      BatchRange(first=9, last=64, batches=(64,), setting="B"),
                      BatchRange(first=65, last=128, batches=(128,), setting="A")]
    assert batch_ranges([4], [()]) == [BatchRange(first=1, last=4, batches=(4,), setting=())]
    assert batch_ranges([], []) == []


def test_batch_labels() -> None:
    def label(batch_range: tuple[int, int] | None) -> str:
        return EngineCommand(engine="e", version="1", batch_range=batch_range).batch_label

    assert (label((1, 8)), label((64, 64)), label(None)) == ("batches 1-8", "batch 64", "")


# ------------------------------------------------------------------ SGLang: one per range


EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
TARGET = "meta-llama/Llama-3.1-8B-Instruct"


def _eagle3(steps: int, topk: int, tokens: int) -> list[str]:
    return ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", str(steps),
            "--speculative-eagle-topk", str(topk), "--speculative-num-draft-tokens",
            str(tokens), "--speculative-draft-model-path", EAGLE3]


def test_sglang_gets_one_command_per_range_with_its_flags_and_cap() -> None:
    # a tree of 63 drafted nodes, 3 deep, topk 8 at batches 1-4 (draft tokens 63 + 1 = 64),
    # a 4-chain at 16 and 32 (steps 4, topk 1, draft tokens 5), a 6-chain at 64, no
    # speculation at 128, and 256 does not fit: four servers, capped at 4, 32, 64 and 128
    rows = [_choice(1, 63, 3, 8), _choice(4, 63, 3, 8), _choice(16, 4, 4, 1),
            _choice(32, 4, 4, 1), _choice(64, 6, 6, 1), _choice(128, 0, 0, 0),
            _choice(256, 6, 6, 1, fits=False)]
    head = [*SGLANG_HEAD, TARGET]
    expected = [
        ((1, 4), (1, 4), [*head, *_eagle3(3, 8, 64), "--max-running-requests", "4"]),
        ((5, 32), (16, 32), [*head, *_eagle3(4, 1, 5), *_graphs(32),
                             "--max-running-requests", "32"]),
        ((33, 64), (64,), [*head, *_eagle3(6, 1, 7), *_graphs(64),
                           "--max-running-requests", "64"]),
        ((65, 128), (128,), [*head, *_graphs(128), "--max-running-requests", "128"]),
    ]
    commands = _sglang(rows, "eagle3-llama-3.1-8b")
    assert [(c.batch_range, c.batches, list(c.argv)) for c in commands] == expected
    assert [c.batch_label for c in commands] == [
        "batches 1-4", "batches 5-32", "batches 33-64", "batches 65-128"]


def test_a_setting_that_returns_after_another_is_its_own_command() -> None:
    # 5-chain at 1, 3-chain at 8, 5-chain again at 64: grouping by setting alone gave the
    # 5-chain one server capped at 64 that would also run at 2-8
    rows = [_choice(1, 5, 5, 1), _choice(8, 3, 3, 1), _choice(64, 5, 5, 1)]
    commands = _sglang(rows, "eagle3-llama-3.1-8b")
    assert [(c.batch_range, c.argv[c.argv.index("--speculative-num-steps") + 1],
             c.argv[-1]) for c in commands] == [((1, 1), "5", "1"), ((2, 8), "3", "8"),
                                                ((9, 64), "5", "64")]


def test_a_constant_setting_is_one_command() -> None:
    rows = [_choice(b, 4, 4, 1) for b in (1, 2, 8, 64)]
    (command,) = _sglang(rows, "eagle3-llama-3.1-8b")
    assert command.batch_range == (1, 64) and command.batches == (1, 2, 8, 64)
    assert list(command.argv) == [*SGLANG_HEAD, TARGET, *_eagle3(4, 1, 5), *_graphs(64),
                                  "--max-running-requests", "64"]


def test_the_sync_flag_goes_on_speculative_servers_only() -> None:
    # timed without the overlap (--engine sglang:sync): the speculative server says so; the
    # plain one is exactly the plain-decoding command
    rows = [_choice(1, 4, 4, 1), _choice(64, 0, 0, 0)]
    spec, plain = _sglang(rows, "eagle3-llama-3.1-8b", engine="sglang:sync")
    assert "--disable-overlap-schedule" in spec.argv
    setup, _ = load_setup(drafter="eagle3-llama-3.1-8b", engine="sglang:sync")
    assert plain.argv == SGLANG.plain_command(setup, 64).argv


def test_nothing_pays_is_one_reason() -> None:
    rows = [_choice(1, 0, 0, 0), _choice(8, 4, 4, 1, fits=False)]
    (command,) = _sglang(rows, "eagle3-llama-3.1-8b")
    assert command.argv == () and "does not pay" in command.reason


# ------------------------------------------------------------------ block drafters


def test_a_dflash_block_per_range() -> None:
    # DFLASH's block is the anchor plus the drafted tokens: 15 drafts -> block 16 at 1-8,
    # 6 drafts -> block 7 at 9-64 (sglang-0.5.23 --speculative-dflash-block-size, a start-up
    # flag the worker sizes the drafter to)
    rows = [_choice(1, 15, 15, 1), _choice(8, 15, 15, 1), _choice(64, 6, 6, 1)]
    commands = _sglang(rows, "dflash-qwen3-8b")
    flags = ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size"]
    draft = ["--speculative-draft-model-path", "z-lab/Qwen3-8B-DFlash-b16"]
    head = [*SGLANG_HEAD, "Qwen/Qwen3-8B"]
    assert [list(c.argv) for c in commands] == [
        [*head, *flags, "16", *draft, "--max-running-requests", "8"],
        [*head, *flags, "7", *draft, *_graphs(64), "--max-running-requests", "64"]]


def test_measured_dflash_recommendation_reaches_batch_64() -> None:
    """The issue's case: `specsim recommend --drafter dflash-qwen3-8b --batch 1,8,64` printed
    one SGLang line with block 16 for batches 1, 8 and 64. Each SGLang command now runs the
    block the table shows for its batches, capped at its range's largest batch; a range the
    table serves without speculation (block 1) is a plain server, with no block flag."""
    setup, profile = load_setup(drafter="dflash-qwen3-8b")
    rec = recommend(setup, profile, [1, 8, 64])
    assert rec.engine_trees is not None
    block = {c.batch: c.nodes + 1 for c in rec.engine_trees}
    commands = [c for c in engine_commands(rec, setup) if c.engine == "sglang"]
    assert len({block[1], block[8], block[64]}) == len(commands) > 1
    for c in commands:
        argv = list(c.argv)
        flag = "--speculative-dflash-block-size"
        runs = int(argv[argv.index(flag) + 1]) if flag in argv else 1
        assert {block[b] for b in c.batches} == {runs}
        assert ("--speculative-algorithm" in argv) == (runs > 1)
        assert argv[-2:] == ["--max-running-requests", str(max(c.batches))]
    # vLLM switches per batch size inside one server: still one command, capped at 64
    (vllm,) = [c for c in engine_commands(rec, setup) if c.engine == "vllm"]
    config = json.loads(vllm.argv[vllm.argv.index("--speculative-config") + 1])
    assert config["num_speculative_tokens_per_batch_size"][-1][1] == 64
    assert vllm.argv[-2:] == ("--max-num-seqs", "64") and vllm.batch_range == (1, 64)


@pytest.mark.parametrize(("nodes", "shape", "builds"), [
    (15, "chain", True), (6, "chain", True), (16, "chain", False), (6, "tree", False)])
def test_sglang_builds_any_block_up_to_the_drafters(nodes: int, shape: str,
                                                    builds: bool) -> None:
    setup, profile = load_setup(drafter="dflash-qwen3-8b")
    block = limit_depth(setup, profile, 64, None, [])
    assert block == 15  # block_size 16: the anchor and 15 drafted tokens
    choice = _choice(8, nodes, nodes if shape == "chain" else 3, 1 if shape == "chain" else 2)
    assert SGLANG.builds_setting(setup.drafter, choice, block) is builds


# ------------------------------------------------------------------ data parallelism (vLLM)


def _vllm_command(config: dict[str, object], cap: int) -> EngineCommand:
    argv = ("vllm", "serve", "moonshotai/Kimi-K2-Instruct", "--speculative-config",
            json.dumps(config, separators=(",", ":")), "--tensor-parallel-size", "8",
            "--max-num-seqs", str(cap))
    return EngineCommand(engine="vllm", version="0.33.0", argv=argv, batches=(cap,),
                         batch_range=(1, cap))


@pytest.mark.parametrize("cap, spec", [
    # the cap's range runs k = 2: the schedule goes, num_speculative_tokens states the 2
    (256, ["--speculative-config",
           '{"method":"eagle3","model":"AQ-MedAI/Kimi-K2-Instruct-eagle3",'
           '"num_speculative_tokens":2}']),
    # the cap's range runs no speculation: the whole flag goes
    (300, [])])
def test_vllm_data_parallel_drops_the_per_batch_schedule(cap: int, spec: list[str]) -> None:
    """vLLM 0.33.0 sets num_speculative_tokens_per_batch_size to None when
    --data-parallel-size > 1 (vllm/config/vllm.py:1110-1127, a warning, not an error) and runs
    num_speculative_tokens at every batch: a data-parallel command (EP 16 over TP 8: DP 2)
    states the chain of its batch cap instead; without data parallelism the schedule stays."""
    from specsim.engines.parallel import parallel_commands
    vllm = adapter("vllm")
    config = {"method": "eagle3", "model": "AQ-MedAI/Kimi-K2-Instruct-eagle3",
              "num_speculative_tokens": 3,
              "num_speculative_tokens_per_batch_size": [[1, 141, 3], [142, 256, 2],
                                                        [257, 300, 0]]}
    command = _vllm_command(config, cap)
    tail = ("--max-num-seqs", str(cap))
    got = parallel_commands(vllm, command, tp=8, ep=16, gpus_per_node=8, tail=tail)
    layout = ["--tensor-parallel-size", "8", "--data-parallel-size", "2",
              "--enable-expert-parallel", "--nnodes", "2"]
    assert [list(c.argv) for c in got] == [
        ["vllm", "serve", "moonshotai/Kimi-K2-Instruct", *spec, *layout,
         "--node-rank", "0", "--master-addr", "HEAD_IP", "--max-num-seqs", str(cap)],
        ["vllm", "serve", "moonshotai/Kimi-K2-Instruct", *spec, *layout,
         "--node-rank", "1", "--master-addr", "HEAD_IP", "--headless", "--max-num-seqs",
         str(cap)]]
    # EP 8 over TP 8: no data parallelism, the schedule is honoured and kept as it was
    same = parallel_commands(vllm, command, tp=8, ep=8, gpus_per_node=8, tail=tail)
    assert [list(c.argv) for c in same] == [
        [*command.argv[:7], "--enable-expert-parallel", *tail]]


def test_recommend_commands_start_the_layout_they_were_timed_for() -> None:
    """`recommend --tp 8 --ep 16` on 8-GPU H100 nodes is timed on 16 GPUs: its commands carry
    the layout as the plan's do, one per node (vLLM: DP 2 of TP 8 with expert parallelism;
    SGLang: TP 16 with its experts over 16 and 2 attention-DP groups, its cap counting both),
    where they had carried `--tensor-parallel-size 8` alone and started 8 GPUs. TensorRT-LLM
    runs attention-DP at TP 1 only, so it has no command for TP 8 groups beside 16 expert GPUs.
    Written out by hand."""
    chain = [Choice(batch=64, shape="chain", nodes=1, depth=1, max_width=1, tau=1.8,
                    round_s=0.01, speedup=1.5, tokens_per_s_per_user=50.0, throughput=3200.0,
                    fits=True)]
    rec = Recommendation(best=chain, best_chain=chain, objective="speedup",
                         engine_trees=chain, schedule_chain=chain)
    setup, _ = load_setup(hardware="h100-sxm", model="deepseek-v3", drafter="mtp-deepseek-v3",
                          engine="sglang", tp=8, ep=16)
    got = {}
    for c in engine_commands(rec, setup):
        got.setdefault(c.engine, []).append(list(c.argv) if c.argv else c.reason)
    spec = ["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']
    vllm_layout = ["--tensor-parallel-size", "8", "--data-parallel-size", "2",
                   "--enable-expert-parallel", "--nnodes", "2"]
    assert got["vllm"] == [
        ["vllm", "serve", "deepseek-ai/DeepSeek-V3", *spec, *vllm_layout, "--node-rank", "0",
         "--master-addr", "HEAD_IP", "--max-num-seqs", "64"],
        ["vllm", "serve", "deepseek-ai/DeepSeek-V3", *spec, *vllm_layout, "--node-rank", "1",
         "--master-addr", "HEAD_IP", "--headless", "--max-num-seqs", "64"]]
    eagle = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1",
             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2"]
    assert got["sglang"] == [
        [*SGLANG_HEAD, "deepseek-ai/DeepSeek-V3", "--tp-size", "16", *eagle, "--ep-size", "16",
         "--attention-data-parallel-size", "2", "--nnodes", "2", "--node-rank", str(rank),
         "--dist-init-addr", "HEAD_IP:25000", *_graphs(64), "--max-running-requests", "128"]
        for rank in (0, 1)]
    (reason,) = got["trtllm"]
    assert isinstance(reason, str) and "TP 8 groups beside 16 expert GPUs" in reason


def test_a_command_per_node_says_which_node_it_is_for() -> None:
    """The commands of a replica over two nodes carry their rank (as in --node-rank) and the
    label a user reads to paste each on the right machine; one MPI world (TensorRT-LLM) and a
    one-node command carry none."""
    from specsim.engines.parallel import parallel_commands

    vllm = adapter("vllm")
    tail = ("--max-num-seqs", "64")
    one = EngineCommand(engine="vllm", version=vllm.version,
                        argv=("vllm", "serve", "m", *tail), batches=(64,))
    two = parallel_commands(vllm, one, tp=16, ep=1, gpus_per_node=8, tail=tail)
    assert [(c.node, c.node_label) for c in two] == [((0, 2), "node 1 of 2"),
                                                      ((1, 2), "node 2 of 2")]
    assert [c.argv[c.argv.index("--node-rank") + 1] for c in two] == ["0", "1"]
    (same,) = parallel_commands(vllm, one, tp=8, ep=1, gpus_per_node=8, tail=tail)
    assert same.node is None and same.node_label == ""


# ------------------------------------------------------------------ KV-cache dtype


@pytest.mark.parametrize("kv, flag", [("bf16", []), ("fp16", []),
                                      ("fp8", ["--kv-cache-dtype", "fp8_e4m3"])])
def test_an_fp8_cache_is_stored_as_timed_by_every_engine(kv: str, flag: list[str]) -> None:
    """The KV cache a recommendation was timed with is the one its commands start: SGLang
    0.5.23 `--kv-cache-dtype fp8_e4m3` (its choices: auto, fp8_e5m2, fp8_e4m3, ...), vLLM
    0.33.0 `--kv-cache-dtype fp8` (CacheDType), TensorRT-LLM `kv_cache_config: {dtype: fp8}`
    in its extra-options file; a 16-bit cache is each engine's default ('auto'), no flag."""
    from specsim.specs.dtypes import Precision

    setup, _ = load_setup(drafter="eagle3-llama-3.1-8b", precision=Precision(kv_dtype=kv))
    rows = [_choice(1, 4, 4, 1), _choice(8, 4, 4, 1)]
    sglang = [c for c in engine_commands(_rec(rows), setup) if c.engine == "sglang"]
    assert [list(c.argv) for c in sglang] == [
        [*SGLANG_HEAD, TARGET, *flag, *_eagle3(4, 1, 5), "--max-running-requests", "8"]]
    vllm = adapter("vllm").plain_command(setup, 8)
    assert list(vllm.argv) == ["vllm", "serve", TARGET,
                               *(["--kv-cache-dtype", "fp8"] if flag else []),
                               "--max-num-seqs", "8"]
    trtllm = adapter("trtllm").plain_command(setup, 8)
    (_, text), = trtllm.files
    assert ("kv_cache_config:\n  dtype: fp8\n" in text) == bool(flag)
    assert "kv-cache-dtype" not in " ".join(trtllm.argv)


def test_a_cache_dtype_an_engine_cannot_store_is_its_one_line() -> None:
    """specsim's int8 cache has no name in any engine's recorded choices (vLLM's
    int8_per_token_head adds per-token scales): each engine says so instead of printing a
    command that would start a 16-bit cache."""
    from specsim.specs.dtypes import Precision

    setup, _ = load_setup(drafter="eagle3-llama-3.1-8b", precision=Precision(kv_dtype="int8"))
    for slug in ("vllm", "sglang", "trtllm"):
        plain = adapter(slug).plain_command(setup, 8)
        spec = adapter(slug).commands(_rec([_choice(1, 4, 4, 1)]), setup)
        for command in (plain, *spec):
            assert command.command is None
            assert command.reason.startswith("stores no int8 KV cache")
            assert "give --kv-dtype fp8 or bf16" in command.reason


# ------------------------------------------------------------------ weight dtype


def test_fp8_weights_of_a_16_bit_checkpoint_are_quantized_at_load_where_an_engine_can() -> None:
    """`--weight-dtype fp8` on Llama-3.1-8B (a bf16 checkpoint) is timed with W8A8 GEMMs;
    vLLM 0.33.0 and SGLang 0.5.23 quantize the checkpoint when they load it (`--quantization
    fp8`, in both wheels' choices), TensorRT-LLM reads only checkpoints quantized beforehand
    (ModelOpt), so it says so. fp16 on a bf16 checkpoint is the same bytes: no flag."""
    from specsim.specs.dtypes import Precision

    rows = [_choice(1, 4, 4, 1), _choice(8, 4, 4, 1)]
    setup, _ = load_setup(drafter="eagle3-llama-3.1-8b",
                          precision=Precision(weight_dtype="fp8"))
    sglang = [c for c in engine_commands(_rec(rows), setup) if c.engine == "sglang"]
    assert [list(c.argv) for c in sglang] == [
        [*SGLANG_HEAD, TARGET, "--quantization", "fp8", *_eagle3(4, 1, 5),
         "--max-running-requests", "8"]]
    assert list(adapter("vllm").plain_command(setup, 8).argv) == [
        "vllm", "serve", TARGET, "--quantization", "fp8", "--max-num-seqs", "8"]
    trtllm = adapter("trtllm").plain_command(setup, 8)
    assert trtllm.command is None and trtllm.reason.startswith(
        f"serves {TARGET} as stored (bf16 weights); fp8 weights need a checkpoint stored in fp8")
    half, _ = load_setup(drafter="eagle3-llama-3.1-8b", precision=Precision(weight_dtype="fp16"))
    assert list(adapter("vllm").plain_command(half, 8).argv) == [
        "vllm", "serve", TARGET, "--max-num-seqs", "8"]


def test_an_fp8_checkpoint_is_served_as_stored_and_not_upcast() -> None:
    """DeepSeek-V3's checkpoint stores fp8 weights: served as stored it needs no flag, and
    bf16 weights (timed at twice the bytes) would need another checkpoint, which every engine
    says instead of printing a command that serves fp8."""
    from specsim.specs.dtypes import Precision

    stored, _ = load_setup(hardware="h200", drafter="mtp-deepseek-v3", tp=8)
    assert "--quantization" not in adapter("vllm").plain_command(stored, 8).argv
    upcast, _ = load_setup(hardware="h200", drafter="mtp-deepseek-v3", tp=8,
                           precision=Precision(weight_dtype="bf16"))
    for slug in ("vllm", "sglang", "trtllm"):
        command = adapter(slug).plain_command(upcast, 8)
        assert command.command is None
        assert command.reason.startswith("serves deepseek-ai/DeepSeek-V3 as stored (fp8 "
                                         "weights); bf16 weights need a checkpoint")


def test_an_fp8_cache_of_an_mla_model_notes_what_sglang_does_with_it() -> None:
    """SGLang 0.5.23's fa3 MLA decode converts each layer's whole FP8 cache pool to bf16 every
    pass (issue #35291), which is not priced: DeepSeek-V3 with --kv-dtype fp8 gets that note
    from the engine's YAML; a bf16 cache, or a GQA model's FP8 cache, gets none."""
    from specsim.specs.dtypes import Precision

    def notes(drafter: str, kv: str, hardware: str = "h100-sxm", tp: int = 1
              ) -> tuple[str, ...]:
        setup, _ = load_setup(drafter=drafter, precision=Precision(kv_dtype=kv),
                              hardware=hardware, tp=tp)
        return tuple(n for n in setup.notes if "cache pool" in n)

    (note,) = notes("mtp-deepseek-v3", "fp8", hardware="h200", tp=8)
    assert note.startswith("SGLang 0.5.23: its fa3 and flashinfer_mla decode")
    assert "issue #35291" in note and "--attention-backend flashmla" in note
    assert notes("mtp-deepseek-v3", "bf16", hardware="h200", tp=8) == ()
    assert notes("eagle3-llama-3.1-8b", "fp8") == ()

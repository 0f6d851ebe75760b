"""Commands reach their batch with CUDA graphs: the capture flags each engine needs beyond its
default (vLLM 0.33.0 captures up to 512 tokens a step by default, SGLang 0.5.23 as few as 8
requests on small GPUs), before the cap on concurrent requests."""

from __future__ import annotations

import dataclasses
import json

from specsim.engines import adapter
from specsim.speculation.recommend import engine_commands, recommend
from specsim.speculation.setup import load_setup


def test_plain_commands_capture_graphs_up_to_their_batch() -> None:
    setup, _ = load_setup(model="qwen3-8b", hardware="h100-sxm", draft_cost=0.0, alpha=0.5)
    plain = dataclasses.replace(setup, drafter=None)
    vllm, sglang = adapter("vllm"), adapter("sglang")
    assert vllm.plain_command(plain, 512).argv[-2:] == ("--max-num-seqs", "512")
    assert "--max-cudagraph-capture-size" not in vllm.plain_command(plain, 512).argv
    # 600 one-token requests a step: 600 tokens, above vLLM's default 512
    assert vllm.plain_command(plain, 600).argv[-4:] == (
        "--max-cudagraph-capture-size", "600", "--max-num-seqs", "600")
    assert sglang.plain_command(plain, 8).argv[-2:] == ("--max-running-requests", "8")
    assert "--cuda-graph-max-bs-decode" not in sglang.plain_command(plain, 8).argv
    assert sglang.plain_command(plain, 300).argv[-4:] == (
        "--cuda-graph-max-bs-decode", "300", "--max-running-requests", "300")


def test_a_vllm_schedule_captures_its_largest_step() -> None:
    """The capture size is the largest step of the printed schedule: each range's top batch
    times 1 + its chain length (none where that fits vLLM's default 512 tokens)."""
    setup, profile = load_setup(drafter="eagle3-llama-3.1-8b", hardware="h100-sxm",
                                alpha=0.8, engine="vllm")
    for batches in ([1, 8, 32, 128], [1, 64, 256], [256, 512]):
        rec = recommend(setup, profile, batches)
        (c,) = [c for c in engine_commands(rec, setup) if c.engine == "vllm"]
        argv = list(c.argv)
        config = json.loads(argv[argv.index("--speculative-config") + 1])
        k = config["num_speculative_tokens"]
        ranges = config.get("num_speculative_tokens_per_batch_size", [[1, max(c.batches), k]])
        step = max(last * (1 + kk) for _, last, kk in ranges)
        if step > 512:
            assert argv[-4:-2] == ["--max-cudagraph-capture-size", str(step)]
        else:
            assert "--max-cudagraph-capture-size" not in argv
        assert argv[-2:] == ["--max-num-seqs", str(max(c.batches))]

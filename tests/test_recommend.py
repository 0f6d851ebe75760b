"""The optimizer's output as an engine reads it: vLLM's --speculative-config and SGLang's
flags, and the memory limit."""

from __future__ import annotations

import dataclasses
from typing import Any

from specsim.engines.sglang import flags_per_row, speculative_args
from specsim.engines.vllm import config_flag, speculative_config
from specsim.specs.acceptance import constant_profile
from specsim.specs.drafters import load_drafter
from specsim.specs.hardware import load_hardware
from specsim.speculation.recommend import Choice, Recommendation, recommend
from specsim.speculation.speedup import Setup

H100 = load_hardware("h100-sxm")


def _choice(batch: int, nodes: int, depth: int, width: int) -> Choice:
    return Choice(batch=batch, shape="chain" if width <= 1 else "tree", nodes=nodes,
                  depth=depth, max_width=width, tau=2.0, round_s=0.01, speedup=1.5,
                  tokens_per_s_per_user=200.0, throughput=200.0 * batch, fits=True)


def test_sglang_triple_for_a_chain_and_a_tree() -> None:
    # A chain: topk 1, draft tokens = steps + 1 (the root is the last verified token).
    eagle3 = load_drafter("eagle3-llama-3.1-8b")
    assert speculative_args(eagle3, _choice(1, 5, 5, 1)) == {
        "--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 5,
        "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 6}
    assert speculative_args(eagle3, _choice(1, 39, 12, 3)) == {
        "--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 12,
        "--speculative-eagle-topk": 3, "--speculative-num-draft-tokens": 40}
    none = [_choice(1, 0, 0, 0)]
    rec = Recommendation(best=none, best_chain=none, objective="speedup")
    assert flags_per_row(rec, eagle3) == ["(no speculation)"]


def test_vllm_schedule_merges_equal_ranges() -> None:
    chains = [_choice(1, 7, 7, 1), _choice(8, 7, 7, 1), _choice(32, 4, 4, 1),
              _choice(128, 2, 2, 1)]
    rec = Recommendation(best=chains, best_chain=chains, objective="speedup")
    config = speculative_config(rec, load_drafter("eagle3-llama-3.1-8b"))
    assert config == {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                      "num_speculative_tokens": 7,
                      "num_speculative_tokens_per_batch_size": [[1, 8, 7], [9, 32, 4],
                                                                [33, 128, 2]]}
    assert config_flag(config).startswith("--speculative-config '{\"method\":\"eagle3\"")


def test_vllm_config_without_schedule_when_load_does_not_matter() -> None:
    chains = [_choice(1, 3, 3, 1), _choice(64, 3, 3, 1)]
    rec = Recommendation(best=chains, best_chain=chains, objective="speedup")
    assert speculative_config(rec, load_drafter("dflash-qwen3-8b")) == {
        "method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 3}
    assert speculative_config(rec, load_drafter("hspec-qwen3-8b")) is None  # no vLLM method


def test_p_eagle_turns_on_parallel_drafting() -> None:
    chains = [_choice(1, 8, 8, 1)]
    rec = Recommendation(best=chains, best_chain=chains, objective="speedup")
    assert speculative_config(rec, load_drafter("p-eagle-gpt-oss-120b")) == {
        "method": "eagle3", "model": "amazon/gpt-oss-120b-p-eagle", "num_speculative_tokens": 8,
        "parallel_drafting": True}


def test_recommendation_shrinks_with_load_and_respects_draft_limits() -> None:
    drafter = load_drafter("dflash-qwen3-8b")
    setup = Setup(target=drafter.target, hardware=H100, drafter=drafter, context=1024)
    rec = recommend(setup, constant_profile(0.8), [1, 8, 32, 128], max_nodes=64)
    nodes = [c.nodes for c in rec.best]
    assert nodes == sorted(nodes, reverse=True) and nodes[0] > nodes[-1]
    assert all(c.depth <= 15 for c in rec.best)  # a block of 16 drafts at most 15 deep
    assert all(c.nodes <= 15 for c in rec.best_chain)


def test_throughput_objective_never_loses_throughput() -> None:
    drafter = load_drafter("eagle3-llama-3.1-8b")
    setup = Setup(target=drafter.target, hardware=H100, drafter=drafter, context=1024)
    by_speed = recommend(setup, constant_profile(0.7), [64], max_nodes=32)
    by_tput = recommend(setup, constant_profile(0.7), [64], max_nodes=32,
                        objective="throughput")
    assert by_tput.best[0].throughput >= by_speed.best[0].throughput - 1e-9


def test_sglang_flags_name_the_algorithm_where_sglang_has_one() -> None:
    best = [_choice(1, 5, 5, 1), _choice(256, 0, 0, 0)]
    rec = Recommendation(best=best, best_chain=best, objective="speedup")
    triple = "--speculative-num-steps 5 --speculative-eagle-topk 1 " \
        "--speculative-num-draft-tokens 6"
    # DFLASH: SGLang forces steps = topk = 1; the block (anchor + drafts) is the one flag
    assert flags_per_row(rec, load_drafter("dflash-qwen3-8b")) == [
        "--speculative-algorithm DFLASH --speculative-dflash-block-size 6", "(no speculation)"]
    assert flags_per_row(rec, load_drafter("eagle3-llama-3.1-8b"))[0] == \
        "--speculative-algorithm EAGLE3 " + triple
    # no SGLang algorithm for Medusa, nor without a drafter: the tree shape alone
    cannot = ["(SGLang cannot run it)", "(no speculation)"]
    assert flags_per_row(rec, load_drafter("medusa-vicuna-7b")) == cannot
    assert flags_per_row(rec, None) == cannot


def test_serving_batch_is_the_most_throughput_above_the_floor_that_fits() -> None:
    from dataclasses import replace

    from specsim.speculation.recommend import serving_batch

    # per-user speed falls with batch while throughput (batch x per-user) rises: by hand,
    # 1 x 400 = 400, 8 x 300 = 2,400, 32 x 150 = 4,800, 128 x 60 = 7,680 tokens/s
    rates = {1: 400.0, 8: 300.0, 32: 150.0, 128: 60.0}
    choices = [replace(_choice(b, 4, 4, 1), tokens_per_s_per_user=r, throughput=b * r)
               for b, r in rates.items()]
    assert serving_batch(choices).batch == 128           # no floor: the most throughput
    assert serving_batch(choices, 100.0).batch == 32     # 128 x 60 breaks a 100 tokens/s floor
    assert serving_batch(choices, 350.0).batch == 1
    assert serving_batch(choices, 500.0) is None         # no batch keeps users that fast
    unfit = [replace(c, fits=False) if c.batch == 32 else c for c in choices]
    assert serving_batch(unfit, 100.0).batch == 8        # batch 32 does not fit in memory


def test_plain_rate_is_the_speculative_rate_over_the_speedup() -> None:
    """300 tokens/s per user at speedup 1.5: plain decoding gives 200; no fit or no speedup:
    no plain rate (NaN), as the recommend table shows it."""
    import math

    choice = Choice(batch=8, shape="chain", nodes=3, depth=3, max_width=1, tau=2.4,
                    round_s=0.008, speedup=1.5, tokens_per_s_per_user=300.0, throughput=2400.0,
                    fits=True)
    assert choice.plain_tokens_per_s_per_user == 200.0
    assert math.isnan(dataclasses.replace(choice, fits=False).plain_tokens_per_s_per_user)
    assert math.isnan(dataclasses.replace(choice, speedup=0.0).plain_tokens_per_s_per_user)


# Dense GQA targets vLLM runs (Llama-3.1-8B, Qwen3-8B, Vicuna-7B's EAGLE) and their drafters.
DENSE_ON_VLLM = ("eagle-llama-3.1-8b", "eagle3-llama-3.1-8b", "eagle3-qwen3-8b",
                 "eagle-vicuna-7b", "qwen3-0.6b-for-qwen3-8b", "dflash-qwen3-8b",
                 "dspark-qwen3-8b")


def _vllm_schedule(drafter: str, context: float, engine: str = "vllm") -> list[int]:
    from specsim.speculation.setup import load_setup

    setup, profile = load_setup(drafter=drafter, context=context, engine=engine)
    rec = recommend(setup, profile, [1, 2, 4, 8, 16, 32, 64, 128, 256], shape="chain")
    return [c.nodes for c in rec.schedule_chain if c.fits]


def _vllm_schedule_notes(drafter: str, context: float) -> tuple[list[int], tuple[str, ...]]:
    from specsim.speculation.setup import load_setup

    setup, profile = load_setup(drafter=drafter, context=context, engine="vllm")
    rec = recommend(setup, profile, [1, 2, 4, 8, 16, 32, 64, 128, 256], shape="chain")
    return [c.nodes for c in rec.schedule_chain if c.fits], rec.notes


def test_a_dense_target_never_lengthens_its_chain_with_batch() -> None:
    """For every dense target vLLM runs, at short and chat contexts, the per-batch chain of
    the vLLM command shortens or stays as the batch grows (vLLM PR #32374: 'dense will have
    monotonically decreasing optimal K'), or a note names the physical reason where it grows:
    for the sequential drafters (EAGLE, EAGLE-3, a small model) it never grows."""
    sequential = {"eagle-llama-3.1-8b", "eagle3-llama-3.1-8b", "eagle3-qwen3-8b",
                  "eagle-vicuna-7b", "qwen3-0.6b-for-qwen3-8b"}
    for drafter in DENSE_ON_VLLM:
        for context in (512.0, 2048.0):
            ks, notes = _vllm_schedule_notes(drafter, context)
            assert ks, (drafter, context)
            grows = [i + 2 for i, (a, b) in enumerate(zip(ks, ks[1:], strict=False)) if b > a]
            if drafter in sequential:
                assert not grows, (drafter, context, grows)
            elif grows:
                assert any(n.startswith(f"the per-batch chain lengthens from batch {grows[0]}:")
                           for n in notes), (drafter, context, notes)


def test_a_chain_that_lengthens_at_a_token_tile_says_so() -> None:
    """DFlash for Qwen3-8B drafts a whole block in one pass, so its chain is set by what the
    verification pass costs: at batch 16 (512 cached tokens) the best chain, 7, verifies
    16 x 8 = 128 tokens, one 128-token GEMM tile; at batch 17 a chain of 7 verifies 136, past
    it, into the 256-token tile, where a longer chain costs little more: the best chain at 17
    is longer, and the note names tile quantization, not the KV cache. The per-batch schedule
    a vLLM command carries is chosen without the tiles and does not lengthen."""
    from specsim.speculation.setup import load_setup

    setup, profile = load_setup(drafter="dflash-qwen3-8b", context=512.0, engine="vllm")
    rec = recommend(setup, profile, [16, 17], shape="chain")
    at16, at17 = rec.best_chain
    assert at16.nodes == 7 and 16 * (at16.nodes + 1) == 128
    assert at17.nodes > 7 and 17 * (at17.nodes + 1) <= 256
    note = next(n for n in rec.notes
                if n.startswith("the per-batch chain lengthens from batch 17"))
    assert "GEMM tile quantization" in note and "KV cache" not in note
    ks, _ = _vllm_schedule_notes("dflash-qwen3-8b", 512.0)
    assert all(a >= b for a, b in zip(ks, ks[1:], strict=False))


def test_the_published_per_batch_schedule_of_llama_8b_eagle() -> None:
    """vLLM PR #32374 (dynamic speculative decoding) schedules Llama-3.1-8B with EAGLE on its
    GPU as K = 3 for batch 1-16, 2 for 64-128 and 0 from 256 (the author's schedule from his
    measured curves, MT-Bench-like short contexts). At 512 cached tokens on an H100, specsim's
    vLLM schedule is 3 at batch 1-14 (2 from batch 15, within the 0.5% that picks the shorter
    chain: the published schedule has its switch between 16 and 64), shorter at 128 than at
    1-14, and at most 1 at 256."""
    ks = _vllm_schedule("eagle-llama-3.1-8b", 512.0)
    assert ks[:14] == [3] * 14 and ks[15] >= 2
    assert ks[127] < 3 and ks[255] <= 1


def test_a_kv_bound_dense_target_lengthens_its_chain_and_says_why() -> None:
    """Llama-2-7B has no GQA: 32 layers x 2 (K and V) x 4,096 x 2 bytes = 512 KiB of cache per
    token, so at 2,048 cached tokens a batch of 8 reads 8 x 2,048 x 0.5 MiB = 8 GiB of KV per
    step beside 12.6 GiB of weights (6.74e9 params x 2 bytes): a round reads it once for all
    its drafted tokens, and the chain lengthens there (3 at batch 1, 4 at batch 8), with that
    reason in a note."""
    from specsim.speculation.setup import load_setup

    setup, profile = load_setup(drafter="llama-68m-for-llama-2-7b", context=2048.0,
                                engine="vllm")
    rec = recommend(setup, profile, [1, 8, 32, 128], shape="chain")
    grows = [b for a, b in zip(rec.best_chain, rec.best_chain[1:], strict=False)
             if b.nodes > a.nodes]
    assert grows
    kv_gib = grows[0].batch * 2048 * 0.5 / 1024
    assert kv_gib >= 0.25 * 6.74e9 * 2 / 2**30
    assert any("lengthens" in n and "KV cache" in n for n in rec.notes)


def test_a_lengthening_chain_says_why() -> None:
    """An MoE target's chain lengthens with batch (its steps already read most experts), and
    the recommendation says so in a note."""
    from specsim.speculation.setup import load_setup

    setup, profile = load_setup(drafter="eagle3-gpt-oss-20b", context=512.0, engine="vllm")
    rec = recommend(setup, profile, [1, 4, 16, 64], shape="chain")
    ks = [c.nodes for c in rec.schedule_chain if c.fits]
    assert any(b > a for a, b in zip(ks, ks[1:], strict=False))
    assert any("lengthens" in n and "mixture of experts" in n for n in rec.notes)


def test_every_command_carries_the_batch_cap_it_was_computed_for() -> None:
    """SGLang resets its cap to 48 requests whenever speculation is on unless
    --max-running-requests is given (sglang-0.5.23 speculative_hook.py), and vLLM admits up to
    1,024 sequences by default: each command recommend prints ends with its engine's cap at
    the largest batch it is the setting for."""
    from specsim.speculation.recommend import engine_commands
    from specsim.speculation.setup import load_setup

    setup, profile = load_setup(drafter="eagle3-llama-3.1-8b")
    rec = recommend(setup, profile, [1, 8, 64])
    commands = [c for c in engine_commands(rec, setup) if c.argv]
    assert {c.engine for c in commands} == {"vllm", "sglang", "trtllm"}
    for c in commands:
        # trtllm-serve --max_batch_size (tensorrt_llm/commands/serve.py)
        flag = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests",
                "trtllm": "--max_batch_size"}[c.engine]
        assert c.argv[-2:] == (flag, str(max(c.batches)))
    assert any(c.engine == "sglang" and c.argv[-1] == "64" for c in commands)


def test_the_vllm_schedule_is_timed_with_vllms_own_terms() -> None:
    """The vLLM command's per-batch chains are vLLM's, whichever engine the question names:
    the schedule recommended with --engine sglang is the one --engine vllm gives."""
    from specsim.speculation.setup import load_setup

    def schedule(engine: str) -> list[int]:
        setup, profile = load_setup(drafter="eagle3-llama-3.1-8b", engine=engine)
        return [c.nodes for c in recommend(setup, profile, [1, 16, 64]).schedule_chain]

    assert schedule("sglang") == schedule("vllm")


def test_a_variant_of_the_drafters_target_is_accepted_with_a_note(tmp_path: Any) -> None:
    """Qwen3-8B stored in fp8 under another name has Qwen3-8B's architecture: the Qwen3-8B
    EAGLE-3 drafter runs on it, and the answer says the acceptance is carried over."""
    from pathlib import Path

    from specsim.speculation.setup import load_setup

    text = (Path(__file__).parents[1] / "workloads" / "models" / "qwen3-8b.yaml").read_text()
    variant = tmp_path / "qwen3-8b-fp8.yaml"
    variant.write_text(text.replace("name: Qwen3-8B\n", "name: Qwen3-8B-FP8\n", 1)
                       .replace("weight_dtype: bf16", "weight_dtype: fp8", 1))
    setup, profile = load_setup(model=str(variant), drafter="eagle3-qwen3-8b")
    assert setup.target.weight_dtype == "fp8"
    rec = recommend(setup, profile, [1, 8])
    assert any("architecture of qwen3-8b" in n and "variant" in n for n in rec.notes)
    own, _ = load_setup(drafter="eagle3-qwen3-8b")
    assert own.notes == ()

"""Engine settings as the engines read them: every emitted setting satisfies the rules
recorded from vLLM 0.33.0 and SGLang 0.5.23 (engines/*.yaml), trees are the ones the engine
builds, and the Sequoia-style optimum agrees with an independent dynamic program."""

from __future__ import annotations

import importlib.util
import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from specsim.engines import adapter
from specsim.engines.sglang import pool as sglang_pool
from specsim.errors import SpecError
from specsim.specs.drafters import load_drafter
from specsim.specs.dtypes import Precision
from specsim.specs.paths import builtin_names
from specsim.speculation.recommend import engine_commands, recommend
from specsim.speculation.setup import load_setup
from specsim.speculation.trees import best_first_tree, sglang_tree
from tests.test_cli import run

BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
VLLM, SGLANG = adapter("vllm"), adapter("sglang")
DRAFTERS = builtin_names("drafters")


# Large targets on 8 GPUs (DeepSeek-V3 in fp8 on H200s, as DeepSeek serves it).
LARGE = {"mtp-deepseek-v3": ("h200", 8, "fp8"), "p-eagle-gpt-oss-120b": ("h100-sxm", 8, ""),
         "mtp-deepseek-r1": ("h200", 8, "fp8"), "mtp-deepseek-v3.2": ("h200", 8, "fp8"),
         "mtp-glm-4.5": ("h200", 8, ""), "eagle3-llama-4-maverick": ("h200", 8, "fp8"),
         # Kimi-K2 (1.03T parameters in fp8) fits 8 GPUs of 180 GB, not of 141 GB
         "eagle3-kimi-k2": ("b200", 8, "fp8"), "mtp-glm-5": ("h200", 8, "fp8"),
         "mtp-qwen3.5-397b-a17b": ("h200", 8, "fp8")}
# Families neither engine runs (vLLM 0.33.0, SGLang 0.5.23), per engine.
# LayerSkip, MagicDec and QuantSpec self-speculation, ReDrafter and LongSpec have a method in
# neither. Prompt lookup runs as vLLM's `ngram` and SGLang's NGRAM.
SELF_SPEC = {"layerskip-llama-2-7b", "magicdec-llama-2-7b-32k", "magicdec-llama-3.1-8b",
             "quantspec-llama-2-7b-32k", "redrafter-vicuna-7b", "longspec-llama-3.1-8b"}
NO_VLLM = {"medusa-vicuna-7b", "dedit-qwen3-4b", "hspec-qwen3-8b"} | SELF_SPEC
NO_SGLANG = NO_VLLM | {"p-eagle-gpt-oss-120b"}
# TensorRT-LLM's PyTorch backend (engines/trtllm.yaml families): no EAGLE-1 checkpoints (it
# runs decoding_type Eagle as EAGLE-3), no Medusa or P-EAGLE; DFlash / DSpark not emitted.
NO_TRTLLM = NO_SGLANG | {"eagle-llama-3.1-8b", "eagle-vicuna-7b", "dflash-qwen3-8b",
                         "dspark-qwen3-8b"}


# Drafters with no published acceptance (the MTP modules of DeepSeek-R1, DeepSeek-V3.2, GLM-4.5,
# GLM-5 and Qwen3.5-397B-A17B) are checked at a stated alpha: the recorded rules hold for any
# setting emitted.
NO_ACCEPTANCE_ALPHA = 0.8


@cache
def _commands(slug: str) -> tuple[Any, Any, tuple[Any, ...]]:
    hardware, tp, weights = LARGE.get(slug, ("h100-sxm", 1, ""))
    alpha = None if load_drafter(slug).acceptance is not None else NO_ACCEPTANCE_ALPHA
    setup, profile = load_setup(hardware=hardware, drafter=slug, tp=tp, alpha=alpha,
                                precision=Precision(weight_dtype=weights))
    rec = recommend(setup, profile, BATCHES, max_nodes=64)
    return rec, setup, tuple(engine_commands(rec, setup))


def vllm_problems(config: dict[str, Any]) -> list[str]:
    return VLLM.problems(config)


def sglang_problems(flags: dict[str, Any], *, target_architecture: str = "") -> list[str]:
    return SGLANG.problems(flags, target_architecture)


def _flags(command: str) -> dict[str, object]:
    words = command.split()
    flags: dict[str, object] = {}
    for i, w in enumerate(words):
        if w.startswith("--speculative") and i + 1 < len(words):
            value = words[i + 1]
            flags[w] = int(value) if value.isdigit() else value
    return flags


@pytest.mark.parametrize("slug", DRAFTERS)
def test_every_emitted_setting_satisfies_the_recorded_rules(slug: str) -> None:
    rec, setup, commands = _commands(slug)
    checked = 0
    for command in commands:
        if command.command is None:  # the engine cannot run it: said plainly
            assert "cannot run" in command.reason or "checkpoint" in command.reason \
                or "does not pay" in command.reason
            continue
        if command.engine == "vllm":
            config = json.loads(command.command.split("--speculative-config '")[1].split("'")[0])
            assert vllm_problems(config) == []
            schedule = config.get("num_speculative_tokens_per_batch_size",
                                  [[1, len(rec.schedule_chain), config["num_speculative_tokens"]]])
            # covers batch 1 .. the largest batch that fits, and agrees with the table
            assert schedule[0][0] == 1 and schedule[-1][1] == len(rec.schedule_chain)
            for c in rec.schedule_chain:
                k = next(k for lo, hi, k in schedule if lo <= c.batch <= hi)
                assert k == c.nodes
            checked += len(rec.schedule_chain)
        elif command.engine == "trtllm":
            ((_, text),) = command.files
            spec = yaml.safe_load(text).get("speculative_config")
            chains = {c.batch: c.nodes for c in rec.schedule_chain or rec.best_chain}
            # each batch the command serves runs the table's chain length
            assert [_trtllm_k(spec, b) for b in command.batches] == [
                chains[b] for b in command.batches]
            checked += len(command.batches)
        else:
            assert command.command.startswith("python -m sglang.launch_server --model-path ")
            flags = _flags(command.command)
            rows = [c for c in rec.engine_trees if c.batch in command.batches]
            if flags:
                assert sglang_problems(flags, target_architecture=setup.target.architecture) \
                    == []
            # a range where speculation does not pay gets the plain server
            assert all(bool(c.nodes) == bool(flags) for c in rows)
            checked += len(command.batches)
    sglang = [c.batch_range for c in commands if c.engine == "sglang" and c.argv]
    # SGLang's commands, one per range, cover batch 1 .. the largest that fits without a gap
    assert [r[0] for r in sglang] == [1, *(r[1] + 1 for r in sglang[:-1])][:len(sglang)]
    # fp8 weights of a 16-bit checkpoint (the large targets that fit 8 GPUs only so): vLLM and
    # SGLang quantize at load, TensorRT-LLM reads only checkpoints quantized beforehand
    weights = setup.precision.weight_dtype
    quantized = bool(weights) and weights != setup.target.weight_dtype
    runs = {"vllm": slug not in NO_VLLM, "sglang": slug not in NO_SGLANG,
            "trtllm": slug not in NO_TRTLLM and not quantized}
    for command in commands:
        assert (command.command is not None) == runs[command.engine], command.reason
        if command.command is not None and command.engine != "trtllm":
            assert ("--quantization fp8" in command.command) == quantized
    assert (checked > 0) == any(runs.values())


def _trtllm_k(spec: dict[str, Any] | None, batch: int) -> int:
    """The draft length TensorRT-LLM runs at `batch` (llm_args.py DecodingBaseConfig, by hand
    from its docs: draft_len_schedule {4: 4, 8: 2, 32: 1} runs 4 at batch 1-4, 2 at 5-8, 1 at
    9-32 and none above; max_concurrency N runs max_draft_len up to N and none above)."""
    if spec is None:
        return 0
    schedule = spec.get("draft_len_schedule")
    if schedule is not None:
        return next((schedule[key] for key in sorted(schedule) if batch <= key), 0)
    cutoff = spec.get("max_concurrency")
    return 0 if cutoff is not None and batch > cutoff else int(spec["max_draft_len"])


def test_engines_cannot_run_what_they_lack() -> None:
    _, _, commands = _commands("medusa-vicuna-7b")
    assert [c.command for c in commands] == [None, None, None]
    assert "vLLM 0.33.0 cannot run the medusa family" in commands[0].reason
    _, _, commands = _commands("eagle3-llama-3.1-8b")
    vllm = commands[0].command
    assert vllm.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config")
    assert '"model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"' in vllm


def test_sglang_rules_catch_what_used_to_be_emitted() -> None:
    # the README's old 10 / 3 / 129: the pool holds 3 + 9 * 9 = 84 candidates
    assert sglang_pool(10, 3) == 84
    bad = {"--speculative-algorithm": "EAGLE3", "--speculative-draft-model-path": "x/y",
           "--speculative-num-steps": 10, "--speculative-eagle-topk": 3,
           "--speculative-num-draft-tokens": 129}
    assert any("draft tokens 129" in p for p in sglang_problems(bad))
    assert sglang_problems({"--speculative-algorithm": "MEDUSA"})
    assert vllm_problems({"method": "eagle3", "num_speculative_tokens": 4})  # no model
    assert vllm_problems({"method": "medusa", "num_speculative_tokens": 4})


def test_sglang_tree_by_hand() -> None:
    # a = (0.6, 0.3); steps 2, topk 2: depth 1 holds 0.6, 0.3; both expand (beam 2):
    # 0.36, 0.18, 0.18, 0.09; the best 4 of the pool: 0.6, 0.36, 0.3, 0.18 -> tau 2.44
    tree = sglang_tree([0.6, 0.3], 2, 2, 5)
    assert tree.tau == pytest.approx(1 + 0.6 + 0.36 + 0.3 + 0.18)
    assert tree.num_nodes == 4 and tree.depth == 2
    # topk 2 per node and only the 2 best of each depth expand: with steps 3, depth 3 has
    # children of 0.36 and one of the 0.18s only (4 nodes), not of all four depth-2 nodes
    deep = sglang_tree([0.6, 0.3], 3, 2, 1 + 2 + 4 + 4)
    assert list(deep.width_per_level()) == [2, 4, 4]


SEQUOIA_STYLE = (0.52, 0.11, 0.05, 0.03, 0.012, 0.015, 0.008, 0.009, 0.004, 0.006)


def ordered_rank_oracle(a: tuple[float, ...], budget: int, depth: int) -> float:
    """Independent DP (plain recursion): best 1 + sum of path probabilities with at most
    `budget` nodes, at most `depth` levels, each node's children its ranks 0..k-1."""

    @cache
    def below(n: int, d: int) -> float:  # best value under one node
        return siblings(0, n, d)

    @cache
    def siblings(j: int, n: int, d: int) -> float:  # ranks j, j+1, ... share n nodes
        if n == 0 or d == 0 or j >= len(a):
            return 0.0
        best = 0.0
        for m in range(1, n + 1):
            best = max(best, a[j] * (1.0 + below(m - 1, d - 1)) + siblings(j + 1, n - m, d))
        return best

    return 1.0 + below(budget, depth)


@pytest.mark.parametrize(("budget", "depth"), [(8, 3), (16, 4), (24, 6), (32, 5)])
def test_depth_limited_optimum_matches_independent_dp(tmp_path: Path, budget: int,
                                                      depth: int) -> None:
    ranks = tmp_path / "acceptance-vector.txt"
    ranks.write_text("tensor([" + ", ".join(map(str, SEQUOIA_STYLE)) + "])\n")
    out = tmp_path / "tree.json"
    result = run("recommend", "--drafter", "eagle-vicuna-7b", "--ranks", str(ranks),
                 "--max-nodes", str(budget), "--max-depth", str(depth), "--batch", "1",
                 "--tree-out", str(out))
    assert result.returncode == 0, result.stderr
    optimum = json.loads(out.read_text())["optimum"]
    assert optimum["tau"] == pytest.approx(ordered_rank_oracle(SEQUOIA_STYLE, budget, depth),
                                           abs=1e-12)
    nodes = optimum["nodes"]
    assert max(n["depth"] for n in nodes) <= depth and len(nodes) <= budget
    for i, node in enumerate(nodes):  # a node's children are its top ranks
        siblings = sorted(n["rank"] for n in nodes if n["parent"] == node["parent"])
        assert siblings == list(range(len(siblings))), i


def test_children_never_skip_a_rank() -> None:
    tree = best_first_tree([0.5, 0.01, 0.2], 6)
    for parent in set(tree.parents.tolist()):
        ranks = sorted(tree.ranks[tree.parents == parent].tolist())
        assert ranks == list(range(len(ranks)))


@pytest.mark.parametrize(("content", "message"), [
    ("[]", "ranks list is empty"),
    ("[0.5, -0.1]", "entry 1 = -0.1"),
    ("[0.5, NaN]", "entry 1 = nan"),
    ("[0.7, 0.6]", "sum to 1.3"),
    ('{"ranks": 0.5}', "must be a list"),
    ("0.5, abc", "entry 1 = 'abc'"),
])
def test_bad_ranks_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "ranks.json"
    path.write_text(content)
    result = run("recommend", "--ranks", str(path), "--batch", "1")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and message in lines[0]


@pytest.mark.parametrize("content", ["[0.6, 0.2, 0.1]", "a\n0.6\n0.2\n0.1\n",
                                     "- 0.6\n- 0.2\n- 0.1\n",
                                     "tensor([0.6000, 0.2000, 0.1000])"])
def test_ranks_formats(tmp_path: Path, content: str) -> None:
    from specsim.speculation.rank_files import read_ranks

    path = tmp_path / "r"
    path.write_text(content)
    assert read_ranks(path) == (0.6, 0.2, 0.1)


def test_tree_out_is_not_overwritten_without_force(tmp_path: Path) -> None:
    out = tmp_path / "tree.json"
    out.write_text("keep")
    args = ["recommend", "--alpha", "0.8", "--batch", "1", "--tree-out", str(out)]
    result = run(*args)
    assert result.returncode == 2 and "--force" in result.stderr and out.read_text() == "keep"
    assert run(*args, "--force").returncode == 0
    document = json.loads(out.read_text())
    tree = document["recommended"][0]["tree"]
    assert tree["tau"] == pytest.approx(1 + sum(n["path_probability"] for n in tree["nodes"]))


def test_auto_scores_chains_per_position_and_notes_extrapolation() -> None:
    setup, profile = load_setup(hardware="h100-sxm", drafter="eagle3-qwen3-8b")
    rec = recommend(setup, profile, [1, 64], max_nodes=64)
    for c in rec.best:
        if c.shape == "chain":
            assert c.tau == pytest.approx(profile.tau(c.nodes))
    assert all(c.depth <= 6 for c in rec.best)  # measured over 6 positions
    assert any("trees left out" in n for n in rec.notes)
    assert any("measured over 6 positions" in n for n in rec.notes)


def test_mismatched_drafter_names_both() -> None:
    with pytest.raises(SpecError, match="eagle3-llama-3.1-8b .* llama-3.1-70b"):
        load_setup(drafter="eagle3-llama-3.1-8b", model="llama-3.1-70b")


def test_engine_config_objects_where_importable() -> None:
    if importlib.util.find_spec("vllm") is None and importlib.util.find_spec("sglang") is None:
        pytest.skip("neither vllm nor sglang is importable here (they need torch and a GPU "
                    "stack); engines/*.yaml rules are checked instead")
    if importlib.util.find_spec("vllm") is not None:  # pragma: no cover - needs vllm
        from vllm.config.speculative import SpeculativeConfig

        _, _, commands = _commands("eagle3-llama-3.1-8b")
        config = json.loads(commands[0].command.split("--speculative-config '")[1].split("'")[0])
        fields = set(SpeculativeConfig.__dataclass_fields__)
        assert set(config) <= fields
    assert math.isfinite(float(np.float64(1.0)))

"""The speculation commands as a user runs them: drafters, speedup (with the figure),
recommend on built-in defaults, and acceptance fit from vLLM's counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.test_cli import ok, run

METRICS = """\
vllm:spec_decode_num_drafts_total{engine="0"} 200
vllm:spec_decode_num_draft_tokens_total{engine="0"} 600
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 300
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 160
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 100
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="2"} 40
"""


def test_drafters_list_and_show() -> None:
    rows = json.loads(ok("drafters", "list", "--json"))
    families = {r["family"] for r in rows}
    assert {"small_llm", "eagle", "eagle3", "mtp", "medusa", "p_eagle", "dflash", "dspark",
            "dedit", "hspec"} <= families
    assert "fused_target_layers" in ok("drafters", "show", "dflash-qwen3-8b")


def test_recommend_on_defaults() -> None:
    out = ok("recommend")
    assert "vllm serve Qwen/Qwen3-8B --speculative-config" in out
    assert "--speculative-draft-model-path z-lab/Qwen3-8B-DFlash-b16" in out
    assert "--speculative-dflash-block-size 16" in out
    data = json.loads(ok("recommend", "--batch", "1,64", "--json"))
    assert [r["batch"] for r in data["rows"]] == [1, 64]
    assert data["vllm_speculative_config"]["method"] == "dflash"
    assert set(data["rows"][0]) >= {"batch", "shape", "nodes", "depth", "tau", "speedup",
                                    "tokens_per_s_per_user", "plain_tokens_per_s_per_user",
                                    "throughput_tokens_per_s", "vllm_k", "sglang"}
    assert data["setup"].startswith("setup: qwen3-8b on h100-sxm")


def test_speedup_table_and_plot(tmp_path: Path) -> None:
    png = tmp_path / "speedup.png"
    rows = json.loads(ok("speedup", "--model", "llama-3.1-8b", "--alpha", "0.8",
                         "--draft-cost", "0.05", "--context", "0", "--batch", "8",
                         "--nodes", "0,8,36", "--engine", "roofline", "--plot", str(png),
                         "--json"))["rows"]
    assert [r["nodes"] for r in rows] == [0, 8, 36]
    assert rows[0]["speedup"] == pytest.approx(1.0)
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


def test_acceptance_fit_writes_a_workload(tmp_path: Path) -> None:
    """Counters are unconditional: alpha_1 = 160 / 200, alpha_2 = 100 / 160, alpha_3 = 40 / 100."""
    metrics = tmp_path / "metrics.txt"
    metrics.write_text(METRICS)
    out = tmp_path / "mine.yaml"
    result = run("acceptance", "fit", str(metrics), "--out", str(out), "--context", "1000")
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(out.read_text())
    assert data["acceptance"]["alpha"] == pytest.approx([0.8, 0.625, 0.4])
    assert data["context"] == 1000
    again = run("acceptance", "fit", str(metrics), "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr
    rows = json.loads(ok("recommend", "--workload", str(out), "--batch", "1", "--json"))
    assert "metrics.txt" in rows["acceptance_source"]


@pytest.mark.parametrize("args, message", [
    (["recommend", "--alpha", "1.5"], "option --alpha: must be in [0, 1]"),
    (["recommend", "--alpha", "0.8", "--workload", "chat-dflash-qwen3-8b"],
     "option --alpha: give a constant alpha or a workload, not both"),
    (["recommend", "--drafter", "eagle3-llama-3.1-8b", "--model", "llama-3.1-70b"],
     "eagle3-llama-3.1-8b (made for llama-3.1-8b) does not fit target llama-3.1-70b"),
    (["recommend", "--drafter", "mtp-deepseek-v3", "--model", "qwen3-30b-a3b"],
     "mtp-deepseek-v3 (made for deepseek-v3) does not fit target qwen3-30b-a3b"),
    (["recommend", "--model", "mixtral-8x7b"],  # the default drafter is for its target only
     "no acceptance (no drafter given): give a constant alpha or a workload"),
    (["recommend", "--shape", "ring"], "option --shape"),
    (["speedup", "--shape", "ring", "--alpha", "0.5", "--draft-cost", "0.1"],
     "shape 'ring' is not one of"),
    (["speedup", "--model", "llama-3.1-8b", "--alpha", "0.5"],
     "option --draft-cost: give a drafter or a relative draft cost"),
    (["recommend", "--workload", "nope"], "unknown workload 'nope'"),
    (["acceptance", "fit", "missing.txt", "--out", "x.yaml"], "missing.txt: cannot read"),
])
def test_bad_speculation_input(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_acceptance_fit_rejects_inconsistent_counters(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(METRICS.replace('position="1"} 100', 'position="1"} 180'))
    result = run("acceptance", "fit", str(bad), "--out", str(tmp_path / "w.yaml"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert not (tmp_path / "w.yaml").exists()


def test_recommend_for_a_context_mix() -> None:
    """Half the requests at 1k and half at 32k tokens: slower than all at 1k, faster than all
    at 32k, at the same batch size and drafting setting."""
    def per_user(context: str) -> float:
        data = json.loads(ok("recommend", "--batch", "4", "--shape", "chain", "--context",
                             context, "--json"))
        return float(data["rows"][0]["tokens_per_s_per_user"])

    short, mix, long = per_user("1024"), per_user("1024,32768"), per_user("32768")
    assert long < mix < short

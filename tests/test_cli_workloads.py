"""`specsim workloads list|show`: the built-in scenarios with their lengths and sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.test_cli import run

SCENARIOS = Path(__file__).resolve().parents[1] / "workloads" / "scenarios"


def test_list_names_every_builtin_scenario_with_its_medians() -> None:
    out = run("workloads", "list", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["workload"]: r for r in json.loads(out.stdout)}
    assert {"chat", "code", "math", "long-context", "agentic"} <= set(rows)
    # the medians are the YAML's own numbers (read here without specsim)
    chat = yaml.safe_load((SCENARIOS / "chat.yaml").read_text(encoding="utf-8"))
    assert rows["chat"]["prompt_median"] == chat["prompt_tokens"]["median"]
    assert rows["chat"]["output_p90"] == chat["output_tokens"]["p90"]


def test_show_gives_each_length_with_its_source_and_unknown_names_suggest() -> None:
    out = run("workloads", "show", "math", "--json")
    assert out.returncode == 0, out.stderr
    fields = {r["field"]: r for r in json.loads(out.stdout)}
    assert fields["output_tokens_median"]["source"]
    bad = run("workloads", "show", "chatt")
    assert bad.returncode == 2
    assert "unknown workload 'chatt'" in bad.stderr and "chat" in bad.stderr


def test_a_serving_scenario_is_a_workload_for_every_command() -> None:
    """`--workload chat` on speedup/recommend reads the plan's scenario file: its context, and
    the acceptance listed for the drafter's family (chat: DFlash tau 4.28 over a block of
    15, EAGLE-3 tau 2.77 over 7), else its default block."""
    from specsim.specs.acceptance import alpha_from_tau
    from specsim.specs.workloads import load_workload

    chat = load_workload("chat")
    assert chat.context == 330.0
    assert chat.acceptance_for("dflash").position_alphas[0] == pytest.approx(
        float(alpha_from_tau(4.28, 15)), rel=1e-12)
    assert chat.acceptance_for("eagle3").position_alphas[0] == pytest.approx(
        float(alpha_from_tau(2.77, 7)), rel=1e-12)
    assert chat.acceptance_for("no-such-family") is chat.acceptance
    out = run("recommend", "--workload", "chat", "-d", "eagle3-llama-3.1-8b", "--batch", "1")
    assert out.returncode == 0, out.stderr
    assert "context 330 tokens" in out.stdout

"""Serving latency (TTFT and gaps between streamed chunks) and demand in, GPUs out.

Expected values are derived by hand from the queue the module docstring describes: Poisson
arrivals per round, a prefill budget per round, a round of d seconds plus f(x) for x prompt
tokens (linear here, f(x) = c x).
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from specsim.serving.latency import CHUNK_FRACTIONS, simulate
from specsim.serving.plan import make_plan
from specsim.specs.workloads import LengthDistribution

D, C, CAP = 0.010, 2e-5, 8000.0  # decode part (s), seconds per prompt token, budget (tokens)


def _fixed(tokens: float) -> LengthDistribution:
    return LengthDistribution(median=tokens, p90=tokens, source="test")


def _linear(cap: float = CAP) -> np.ndarray:
    return (C * CHUNK_FRACTIONS * cap)[None, :]


def test_gaps_are_rounds_and_prefill_spikes_reach_the_tail() -> None:
    # 0.1 arrivals per round of 1,000-token prompts: P(no arrival) = e^-0.1 = 0.905 >= 0.9, so
    # the median and p90 gap are a bare round d; P(at most one) = 0.9953 >= 0.99, so the p99
    # gap is a round carrying one prompt: d + c 1000 = 30 ms.
    assert math.exp(-0.1) > 0.9 and math.exp(-0.1) * 1.1 > 0.99
    _, gaps = simulate([D], [CAP], [0.1], _linear(), _fixed(1000))
    assert gaps[0] == pytest.approx([D, D, D + C * 1000], rel=1e-9)


def test_ttft_is_the_rest_of_a_round_then_its_own_prefill() -> None:
    # Almost no other traffic: a request waits for the rest of its arrival round (uniform
    # over [0, d]) and then one round carrying its 1,000 tokens: d + c 1000 = 30 ms; so TTFT
    # is uniform on [30, 40] ms: median 35, p90 39, p99 39.9.
    ttft, _ = simulate([D], [CAP], [1e-9], _linear(), _fixed(1000))
    assert ttft[0] == pytest.approx([0.035, 0.039, 0.0399], abs=6e-4)


def test_a_prompt_longer_than_the_budget_takes_several_rounds() -> None:
    # 20,000 tokens through a budget of 8,000: 3 rounds (2 full, one of 4,000), each d plus
    # its tokens: 3 d + c 20,000 = 0.43 s after the rest of the arrival round (mean d / 2).
    ttft, _ = simulate([D], [CAP], [1e-9], _linear(), _fixed(20000))
    assert ttft[0, 0] == pytest.approx(3 * D + C * 20000 + D / 2, abs=1e-3)


def test_queueing_grows_with_load() -> None:
    # Budget 8,000 per round, 2,000-token prompts: 2 arrivals per round use half of it, 3.8
    # use 95%; the busier queue makes the median and the tail wait longer.
    light, _ = simulate([D], [CAP], [2.0], _linear(), _fixed(2000))
    busy, _ = simulate([D], [CAP], [3.8], _linear(), _fixed(2000))
    assert busy[0, 0] > light[0, 0] and busy[0, 2] > 1.5 * light[0, 2]


def test_a_queue_that_cannot_drain_has_no_ttft() -> None:
    # 5 arrivals of 2,000 tokens a round need 10,000 tokens of an 8,000 budget
    ttft, _ = simulate([D], [CAP], [5.0], _linear(), _fixed(2000))
    assert np.all(np.isinf(ttft[0]))


# ------------------------------------------------------------------ the plan


@pytest.fixture(scope="module")
def users_plan() -> object:
    return make_plan(hardware="h100-sxm", model="llama-3.1-8b",
                     drafters=["eagle3-llama-3.1-8b"], engine="vllm", workload="chat",
                     min_tokens_per_s_per_user=60, users=2000, tps=(1,))


def test_users_divide_into_replicas_of_the_batch_they_run(users_plan: object) -> None:
    plan = users_plan
    for s in (plan.best, plan.best_plain):  # type: ignore[attr-defined]
        assert s is not None and s.tp == 1
        replicas = s.gpus // s.tp
        # each replica runs ceil(2000 / replicas) requests, and fewer replicas cannot hold them
        assert s.batch == math.ceil(2000 / replicas)
        assert s.tokens_per_s_per_user >= 60
        table = next(t for d in plan.drafters for t in d.tables  # type: ignore[attr-defined]
                     if d.name == s.drafter)
        fewer = math.ceil(2000 / (replicas - 1)) if replicas > 1 else None
        if fewer is not None and fewer <= table.batch[-1]:
            i = int(np.searchsorted(table.batch, fewer))
            assert not (table.usable[i] & (table.tokens_per_s_per_user[i] >= 60)).any()


def test_the_answer_gives_gpus_with_and_without_speculation(users_plan: object) -> None:
    from specsim.present.report_answer import answer_text

    plan = users_plan
    text = answer_text(plan)  # type: ignore[arg-type]
    b, p = plan.best, plan.best_plain  # type: ignore[attr-defined]
    assert (f"{b.gpus} GPUs ({b.replicas} replica{'s' * (b.replicas != 1)} of TP 1) for 2,000 "
            "concurrent users") in text
    if b.nodes:
        assert f"Without speculation: {p.gpus} GPUs" in text
    assert "Why speculation" in text
    assert "time to first token" in text and "gaps between streamed chunks" in text


def test_a_ttft_slo_is_met_or_refused_in_words() -> None:
    loose = make_plan(hardware="h100-sxm", model="llama-3.1-8b", drafters=[], engine="vllm",
                      workload="long-context", min_tokens_per_s_per_user=20, users=100,
                      max_ttft_p90_ms=2000, tps=(1,))
    assert loose.best_plain is not None and loose.best_plain.ttft_p90_s <= 2.0
    # a 16,000-token p90 prompt cannot prefill in 50 ms on one H100
    tight = make_plan(hardware="h100-sxm", model="llama-3.1-8b", drafters=[], engine="vllm",
                      workload="long-context", min_tokens_per_s_per_user=20, users=100,
                      max_ttft_p90_ms=50, tps=(1,))
    assert tight.best is None and tight.best_plain is None


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specsim", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("args", "names"), [
    (["--users", "10", "--target-throughput", "5"], "--users"),
    (["--users", "-3"], "--users"),
    (["--requests-per-s", "nan"], "--requests-per-s"),
    (["--max-ttft-p90-ms", "0"], "--max-ttft-p90-ms"),
    (["--tp", "3"], "--tp"),
])
def test_bad_demand_or_slo_is_one_line(tmp_path: object, args: list[str], names: str) -> None:
    out = f"{tmp_path}/r"
    r = _cli("plan", "--out", out, *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0], r.stderr


def test_the_default_demand_is_stated_and_answered_both_ways() -> None:
    """No demand given: 1,000 concurrent users, stated as a default; where plain decoding is
    the answer, the answer still gives what speculation would need."""
    from specsim.present.report_answer import answer_text

    plan = make_plan(hardware="h100-sxm", model="qwen3-8b", drafters=["dspark-qwen3-8b"],
                     engine="sglang", workload="chat", tps=(1,))
    text = answer_text(plan)
    assert "for 1,000 concurrent users (a default: give --users" in text
    s, spec = plan.best, plan.best_speculative
    assert s is not None and spec is not None and spec.nodes > 0
    assert s.gpus == math.ceil(1000 / s.batch) * s.tp
    if s.nodes == 0:
        assert f"With speculation: {spec.gpus} GPUs at best (dspark-qwen3-8b" in text
        assert spec.gpus >= s.gpus
    else:
        assert f"Without speculation: {plan.best_plain.gpus} GPUs" in text


def test_poisson_draws_are_scipys_inverse_cdf() -> None:
    """The simulator's Poisson counts (numpy, inverse CDF, so every setting sees the same
    draws) equal scipy's ppf exactly, from rates far below one to rates of thousands."""
    from scipy.stats import poisson

    from specsim.serving.latency import _poisson

    u = np.random.default_rng(1).random((4000, 1))
    lam = np.array([[1e-9, 0.004, 0.1, 1.0, 3.7, 25.0, 180.0, 900.0, 5000.0]])
    assert np.array_equal(_poisson(u, lam), poisson.ppf(u, lam))


def test_the_answer_is_a_drafter_an_engine_runs() -> None:
    """H-Spec has no vLLM or SGLang method: beside a drafter the engines run, the answer (and
    what speculation would need) is that one, and a note says why H-Spec is left out; alone,
    it is still answered (as specsim's model, which the answer says)."""
    plan = make_plan(hardware="h100-sxm", model="qwen3-8b",
                     drafters=["hspec-qwen3-8b", "dspark-qwen3-8b"], engine="sglang",
                     workload="chat", min_tokens_per_s_per_user=60, users=64, tps=(1,))
    for s in (plan.best, plan.best_speculative):
        assert s is not None and s.drafter in ("dspark-qwen3-8b", "none")
    assert any(n.startswith("hspec-qwen3-8b: no engine runs it") for n in plan.notes)
    alone = make_plan(hardware="h100-sxm", model="qwen3-8b", drafters=["hspec-qwen3-8b"],
                      engine="sglang", workload="chat", min_tokens_per_s_per_user=60,
                      users=64, tps=(1,))
    assert alone.best_speculative is not None
    assert alone.best_speculative.drafter == "hspec-qwen3-8b"


def test_the_single_drafter_sections_show_a_drafter_an_engine_runs() -> None:
    """LongSpec (cross-attention, no engine method) can serve a user faster than EAGLE-3 in
    specsim's model, but the memory and policy sections of a plan show the deployable one:
    EAGLE-3 leads the drafters, LongSpec follows as specsim's model."""
    plan = make_plan(hardware="h100-sxm", model="llama-3.1-8b",
                     drafters=["longspec-llama-3.1-8b", "eagle3-llama-3.1-8b"], engine="sglang",
                     workload="chat", min_tokens_per_s_per_user=50, users=64, tps=(1,))
    assert [d.name for d in plan.drafters if d.name != "none"] == [
        "eagle3-llama-3.1-8b", "longspec-llama-3.1-8b"]
    assert plan.policy_drafter == "eagle3-llama-3.1-8b"

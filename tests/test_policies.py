"""Batch policies bounded by construction, and the figures that show them (speedup, policies).

Hand-derived rounds first (a made-up round profile whose seconds are easy to add up), then the
brute-force and sweep-wide bounds on the built-in engine setups, then the figures.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.present import plots
from specsim.present.report_speculation import section_policies
from specsim.serving.policies import (
    BEST_FIXED,
    DSPARK,
    GOODPUT,
    NONE,
    RoundProfile,
    best_fixed_length,
    confidences,
    dspark_allocation,
    fixed_rate,
    round_profile,
    simulate_policies,
    survival,
)
from specsim.speculation.setup import load_setup
from specsim.speculation.speedup import Candidates, SpeedupCurves, speedup_table

# The controller's last comparison measures its length once over WINDOW_ROUNDS = 32 rounds,
# so at a load where plain decoding competes it may keep a length that is slower in
# expectation by up to its measurement noise (the 2% docs/planner.md states).
GOODPUT_NOISE = 0.02
TIGHT = 1e-12  # float summation order only: the bound holds exactly


def _profile(draft_s: list[float], *, overhead_s: float = 0.0, hidden_s: float = 0.0
             ) -> RoundProfile:
    """Two requests, chains of 0..2: verification 1.0, 1.2, 1.4 s, the given drafter seconds."""
    return RoundProfile(batch=np.array([2.0]), verify_s=np.array([[1.0, 1.2, 1.4]]),
                        draft_s=np.array([draft_s]), overhead_s=np.array([overhead_s]),
                        hidden_s=np.array([hidden_s]))


def test_round_seconds_by_hand() -> None:
    """verify(1 + m / B) linear between chains + drafter(longest) + overhead if any drafted."""
    rounds = _profile([0.0, 0.5, 1.0], overhead_s=0.1)
    assert rounds.seconds(0, 0, 0) == pytest.approx(1.0)  # plain: no drafter, no overhead
    # one request drafts 1: 3 tokens over 2 requests, verify 1.1; one drafter pass 0.5
    assert rounds.seconds(0, 1, 1) == pytest.approx(1.1 + 0.5 + 0.1)
    # one request drafts 2: verify at 2 tokens per request 1.2; the drafter runs 2 passes
    assert rounds.seconds(0, 2, 2) == pytest.approx(1.2 + 1.0 + 0.1)
    floored = _profile([0.0, 0.5, 1.0], hidden_s=3.0)
    assert floored.seconds(0, 0, 0) == pytest.approx(1.0)  # plain rounds have no host floor
    assert floored.seconds(0, 2, 1) == pytest.approx(3.0)


def test_dspark_charges_the_drafters_passes_to_the_longest_draft() -> None:
    """The bug: scored by the mean draft, DSpark drafted where plain decoding is faster.

    Survivals (0.9, 0.81) and (0.1, 0.01), a drafter pass of 0.5 s. By hand (tokens / s):
    plain 2 / 1.0 = 2.0; lengths (1, 0): 2.9 / (1.1 + 0.5) = 1.8125; (2, 0): 3.71 / (1.2 + 1.0)
    = 1.686; (1, 1): 3.0 / (1.2 + 0.5) = 1.765; (2, 1): 3.81 / (1.3 + 1.0) = 1.657; (2, 2):
    3.82 / 2.4 = 1.592. Plain wins. Scored by the mean draft (round time linear between the
    uniform chains 1.0, 1.7, 2.4 s), (2, 0) looked like 3.71 / 1.7 = 2.18, above plain.
    """
    surv = np.array([[0.9, 0.81], [0.1, 0.01]])
    lengths, rate = dspark_allocation(surv, _profile([0.0, 0.5, 1.0]), 0)
    assert lengths.tolist() == [0.0, 0.0]
    assert rate == pytest.approx(2.0, rel=TIGHT)


@pytest.mark.parametrize(("hidden_s", "lengths", "rate"), [
    # drafter 0.1 s a pass: (1, 0) 2.9 / 1.2 = 2.417; (2, 0) 3.71 / (1.2 + 0.2) = 2.65;
    # (1, 1) 3.0 / 1.3 = 2.308; (2, 1) 3.81 / (1.3 + 0.2) = 2.54; (2, 2) 3.82 / 1.6 = 2.3875
    (0.0, [2.0, 0.0], 3.71 / 1.4),
    # a 1.5 s host floor on speculative rounds: (2, 0) 3.71 / 1.5 = 2.473 < (2, 1) 3.81 / 1.5
    # = 2.54 > (2, 2) 3.82 / 1.6 = 2.3875
    (1.5, [2.0, 1.0], 3.81 / 1.5),
])
def test_dspark_drafts_unevenly_where_that_pays_by_hand(hidden_s: float, lengths: list[float],
                                                        rate: float) -> None:
    surv = np.array([[0.9, 0.81], [0.1, 0.01]])
    got, best = dspark_allocation(surv, _profile([0.0, 0.1, 0.2], hidden_s=hidden_s), 0)
    assert got.tolist() == lengths
    assert best == pytest.approx(rate, rel=1e-12)


def test_uniform_rounds_are_the_speedup_tables() -> None:
    """A uniform chain of gamma (m = B gamma, longest gamma) takes the engine's round time of
    that chain; gamma = 0 is plain decoding's step. EAGLE-3 on Llama-3.1-8B, SGLang, chat."""
    setup, _ = load_setup(drafter="eagle3-llama-3.1-8b", workload="chat")
    loads, g = np.array([1.0, 16.0, 256.0]), 8
    rounds = round_profile(setup, loads, g)
    gamma = np.arange(g + 1.0)
    table = speedup_table(setup, loads, Candidates(
        nodes=gamma, depth=gamma, tau=np.ones_like(gamma), max_width=np.minimum(gamma, 1.0),
        shape=("chain",) * gamma.size))
    np.testing.assert_allclose(rounds.round_s, table.round_s, rtol=1e-12)
    np.testing.assert_allclose(rounds.round_s[:, 0], table.baseline_s, rtol=1e-12)
    for i, b in enumerate(loads):
        np.testing.assert_allclose(rounds.seconds(i, b * gamma, gamma.astype(int)),
                                   table.round_s[i], rtol=1e-12)


@pytest.mark.parametrize("drafter", ["eagle3-llama-3.1-8b", "dflash-qwen3-8b"])
def test_dspark_is_the_brute_force_optimum(drafter: str) -> None:
    """Every allocation of 0..4 tokens to each of 3 requests (125), each charged its round:
    DSpark's is the best, hence at least plain decoding and every uniform chain. An
    autoregressive drafter (EAGLE-3: passes to the longest draft) and a parallel one (DFlash)."""
    setup, profile = load_setup(drafter=drafter, workload="chat")
    g = 4
    for load in (3, 3 * 64):  # light and heavy: same 3 requests' confidences, other round times
        rounds = round_profile(setup, [load], g)
        surv = survival(confidences(profile, 3, g, np.random.default_rng(7)))
        brute = 0.0
        for lengths in itertools.product(range(g + 1), repeat=3):
            tokens = 3 + sum(surv[k, :n].sum() for k, n in enumerate(lengths))
            # the same three requests stand for the whole batch: load / 3 copies of each
            seconds = float(rounds.seconds(0, load / 3 * sum(lengths), max(lengths)))
            brute = max(brute, load / 3 * tokens / seconds)
        many = np.repeat(surv, load // 3, axis=0)
        _, rate = dspark_allocation(many, rounds, 0)
        # The replicated batch is allowed uneven copies, so DSpark may only do better.
        assert rate >= brute * (1 - TIGHT)
        if load == 3:
            assert rate == pytest.approx(brute, rel=TIGHT)


SETUPS = [("eagle3-llama-3.1-8b", "chat"), ("eagle-llama-3.1-8b", "chat"),
          ("dflash-qwen3-8b", "chat"), ("eagle3-gpt-oss-120b", "agentic"),
          ("qwen3-0.6b-for-qwen3-8b", "chat")]


@pytest.mark.parametrize(("drafter", "workload"), SETUPS)
def test_policies_are_bounded_at_every_load(drafter: str, workload: str) -> None:
    """At every load of the sweep (seed 0): DSpark >= best fixed chain >= every fixed chain
    and plain decoding (exactly: each is in the search of the one above); goodput, a length
    the controller found online, is at most the best fixed chain and at least plain decoding
    less its measurement noise. Fixed chains of 1..16 are all in the sweep, so the best fixed
    chain is checked against a brute force over the sweep's own rows."""
    setup, profile = load_setup(drafter=drafter, workload=workload)
    sweep = simulate_policies(setup, profile, seed=0, fixed=tuple(range(1, 17)))
    rate = sweep.tokens_per_s
    row = {name: rate[j] for j, name in enumerate(sweep.policies)}
    chains = np.array([row[NONE], *(row[f"fixed chain {g}"] for g in range(1, 17))])
    np.testing.assert_allclose(row[BEST_FIXED], chains.max(axis=0), rtol=TIGHT)
    assert np.all(row[BEST_FIXED] >= chains * (1 - TIGHT))
    assert np.array_equal(sweep.mean_draft[sweep.policies.index(BEST_FIXED)],
                          chains.argmax(axis=0))
    assert np.all(row[DSPARK] >= row[BEST_FIXED] * (1 - TIGHT))
    assert np.all(row[DSPARK] >= row[NONE] * (1 - TIGHT))
    assert np.all(row[GOODPUT] <= row[BEST_FIXED] * (1 + TIGHT))
    assert np.all(row[GOODPUT] >= row[NONE] * (1 - GOODPUT_NOISE))


def test_best_fixed_length_by_hand() -> None:
    """Survivals (0.9, 0.81), (0.1, 0.01), drafter 0.5 s a pass: gamma 0 2.0, gamma 1 3.0 / 1.7
    = 1.765, gamma 2 3.82 / 2.4 = 1.592 tokens/s, so no draft; at 0.1 s a pass gamma 1 is
    3.0 / 1.3 = 2.308 and gamma 2 3.82 / 1.6 = 2.3875: the chain of 2."""
    surv = np.array([[0.9, 0.81], [0.1, 0.01]])
    assert best_fixed_length(surv, _profile([0.0, 0.5, 1.0]), 0) == (0, pytest.approx(2.0))
    gamma, rate = best_fixed_length(surv, _profile([0.0, 0.1, 0.2]), 0)
    assert (gamma, rate) == (2, pytest.approx(3.82 / 1.6))
    assert fixed_rate(surv, _profile([0.0, 0.1, 0.2]), 0, 1) == pytest.approx(3.0 / 1.3)


def test_the_report_reads_adaptive_policies_against_the_best_fixed_chain() -> None:
    setup, profile = load_setup(drafter="eagle3-llama-3.1-8b", workload="chat")
    sweep = simulate_policies(setup, profile, seed=0, loads=(1, 64, 256))
    plan = SimpleNamespace(policies=sweep, policy_drafter="eagle3-llama-3.1-8b",
                           model=SimpleNamespace(name="Llama-3.1-8B"),
                           hardware=SimpleNamespace(name="H100"), engine="sglang",
                           scenario=SimpleNamespace(slug="chat"))
    blocks: list[tuple[str, dict[str, Any]]] = []
    section_policies(plan, lambda kind, text="", **kw: blocks.append((kind, kw)))  # type: ignore[arg-type]
    rows = next(kw["rows"] for kind, kw in blocks if kind == "table")
    png = next(kw["png"] for kind, kw in blocks if kind == "img")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    to_best = sweep.relative_to(BEST_FIXED)
    for i, r in enumerate(rows):
        for name in (DSPARK, GOODPUT):
            assert r[f"{name} (x best fixed)"] == pytest.approx(
                to_best[sweep.policies.index(name), i], rel=1e-12)
        assert r[f"{BEST_FIXED}: chain (tokens)"] == sweep.mean_draft[
            sweep.policies.index(BEST_FIXED), i]
    # Plain decoding's own ratio would be 1 everywhere: it is not a column.
    assert not any(key.startswith(f"{NONE} ") for key in rows[0])


# ---- figures --------------------------------------------------------------------------------

TAB_BLUE = np.array([31, 119, 180])  # tab10's first colour: the first batch size drawn


def _coinciding_curves() -> SpeedupCurves:
    """B = 1 and B = 4 exactly on top of each other (verification memory-bound), B = 64 apart."""
    nodes = np.array([0.0, 1.0, 2.0, 4.0, 8.0, 16.0])
    light = np.array([1.0, 1.6, 2.1, 2.6, 2.9, 2.7])
    return SpeedupCurves(batch=np.array([1.0, 4.0, 64.0]), nodes=nodes,
                         speedup=np.stack([light, light, np.linspace(1.0, 0.5, 6)]),
                         fits=np.ones(3, dtype=bool), best_nodes=np.array([8.0, 8.0, 0.0]),
                         best_speedup=np.array([2.9, 2.9, 1.0]))


def _axes_pixels(fig: Any) -> np.ndarray:
    """RGB pixels inside the axes (not the legend or labels) of a drawn figure."""
    fig.tight_layout()
    fig.canvas.draw()
    rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    box = fig.axes[0].get_window_extent()
    height = rgb.shape[0]
    return rgb[int(height - box.y1) + 2:int(height - box.y0) - 2, int(box.x0) + 2:int(box.x1) - 2]


def test_a_curve_under_another_still_shows() -> None:
    """The issue: B = 1 drawn first, then B = 4 on the same points, hid B = 1 entirely. Drawn
    thicker with a larger marker, B = 1 must keep its colour on screen around B = 4's; and the
    legend sits outside the axes."""
    import matplotlib.pyplot as plt

    fig = plots._speedup_fig(_coinciding_curves(), title="t", bound=None, marked=None,
                             marked_as="best")
    try:
        pixels = _axes_pixels(fig)
        blue = np.abs(pixels - TAB_BLUE).sum(axis=2) < 80
        # B = 1 alone leaves ~5,100 such pixels, under B = 4 here ~700; the old drawing (one
        # width and marker for all, drawn in batch order) left 0.
        assert blue.sum() > 200
        legend = fig.axes[0].get_legend().get_window_extent()
        assert legend.x0 >= fig.axes[0].get_window_extent().x1
    finally:
        plt.close(fig)


def test_marked_points_must_match_the_batch_sizes() -> None:
    with pytest.raises(SpecError, match="2 marked points for 3 batch sizes"):
        plots.speedup_png(_coinciding_curves(), title="t", marked=[[1.0, 2.0], [2.0, 2.0]])


def test_markers_thin_out_on_a_dense_sweep() -> None:
    """1,024 node counts: markers at least 1/24 of the log2 span apart, the first one kept."""
    x = np.maximum(np.arange(0.0, 1025.0), 0.8)
    kept = plots._sparse_marks(x)
    assert kept[0] == 0 and len(kept) <= 25
    assert np.all(np.diff(np.log2(x[kept])) >= (np.log2(1024) - np.log2(0.8)) / 24 - 1e-12)
    assert plots._sparse_marks(np.array([1.0])) == [0]  # one point: one marker

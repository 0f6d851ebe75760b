"""speedup(N, B) and the optimizer: the article's tree figure, re-derived from its idealized
T(n) and reproduced by the full roofline; degenerate cases named."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.specs.acceptance import constant_profile, rank_acceptance_geometric, tau_constant
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from specsim.speculation.recommend import recommend
from specsim.speculation.speedup import (
    Setup,
    SpeedupTable,
    candidates_for,
    chain_candidates,
    speedup_table,
    tree_candidates,
)

H100 = load_hardware("h100-sxm")
LLAMA8B = load_model("llama-3.1-8b")
BATCHES = np.array([1.0, 8.0, 32.0, 128.0])


def article_t(n: np.ndarray) -> np.ndarray:
    """The article's first figure: max(16 GB / 3.35 TB/s, 2 * 8e9 * n / 989 TFLOPS)."""
    return np.maximum(16e9 / 3.35e12, 2 * 8e9 * n / 989e12)


def article_table(max_nodes: int = 1024) -> SpeedupTable:
    """The tree figure: best-first trees of the rank model a_j = 0.8 * 0.2^j, verification on
    the idealized T(n), drafting 0.05 of a decoding step per round, contexts ignored."""
    cands = tree_candidates(rank_acceptance_geometric(0.8, max_nodes + 1), max_nodes)
    baseline = article_t(BATCHES)
    verify = article_t(BATCHES[:, None] * (cands.nodes[None, :] + 1))
    draft = 0.05 * baseline[:, None] * (cands.nodes[None, :] > 0)
    return SpeedupTable(batch=BATCHES, candidates=cands, baseline_s=baseline, verify_s=verify,
                        draft_s=draft, round_overhead_s=0.0,
                        fits=np.ones(4, dtype=bool), context=0.0)


def test_article_tree_figure() -> None:
    """The article: best trees of about 36 nodes at B = 8, 8 at B = 32, a chain of two at
    B = 128; a 64-node tree at B = 128 almost four times slower than not speculating; a single
    request keeps gaining right up to the knee (989 / 3.35 = 295)."""
    table = article_table()
    best = table.best()
    nodes = table.candidates.nodes[best]
    assert nodes.tolist() == [294, 36, 8, 2]
    assert table.candidates.shape[best[3]] == "chain"
    slowdown = 1 / table.speedup[3, 64]
    assert slowdown == pytest.approx(3.78, abs=0.01)


def test_best_tree_shrinks_as_ops_per_byte_over_batch() -> None:
    """N* ~ ops:byte / B: the knee of T(B (N + 1)) at 295 tokens bounds the useful tree."""
    table = article_table()
    nodes = table.candidates.nodes[table.best()]
    knee = 989 / 3.35
    for b, n in zip(BATCHES, nodes, strict=True):
        assert b * (n + 1) <= knee + b  # the best tree stays at or below the knee


def test_full_roofline_reproduces_the_figure() -> None:
    """Llama-3.1-8B on the H100 datasheet profile, context 0: activations moving in and out of
    every GEMM push each GEMM's knee from 295 to 317-336 tokens (test_roofline), so the best
    trees grow a little: 39 instead of 36 at B = 8, 9 instead of 8 at B = 32. The README states
    318, 39, 9 and 2 nodes at B = 1, 8, 32, 128 and a 64-node tree 3.81x slower at B = 128."""
    setup = Setup(target=LLAMA8B, hardware=H100, draft_cost=0.05, context=0.0)
    cands = candidates_for(None, constant_profile(0.8), shape="tree", max_nodes=1024)
    table = speedup_table(setup, BATCHES, cands)
    best = table.best()
    assert cands.nodes[best].tolist() == [318, 39, 9, 2]
    assert cands.shape[best[3]] == "chain"
    assert 1 / table.speedup[3, 64] == pytest.approx(3.81, abs=0.005)


def test_speedup_formula_on_a_chain() -> None:
    """Memory-bound verification: speedup = tau / (n_draft c + 1) (the article's formula),
    up to the small growth of T from 1 to 6 tokens on the full roofline (< 1%)."""
    tau = float(tau_constant(0.8, 5))
    for sequential, passes in ((True, 5), (False, 1)):
        setup = Setup(target=LLAMA8B, hardware=H100, draft_cost=0.05,
                      sequential_draft=sequential)
        table = speedup_table(setup, [1], chain_candidates(constant_profile(0.8), 5))
        assert table.speedup[0, 5] == pytest.approx(tau / (passes * 0.05 + 1), rel=0.01)


def test_parallel_beats_autoregressive_and_the_gap_grows() -> None:
    gaps = []
    for gamma in (1, 3, 5, 9):
        cands = chain_candidates(constant_profile(0.8), gamma)
        ar = speedup_table(Setup(target=LLAMA8B, hardware=H100, draft_cost=0.05,
                                 sequential_draft=True), [1], cands).speedup[0, gamma]
        par = speedup_table(Setup(target=LLAMA8B, hardware=H100, draft_cost=0.05), [1],
                            cands).speedup[0, gamma]
        gaps.append(par / ar)
    assert gaps[0] == pytest.approx(1.0)
    assert all(b > a for a, b in zip(gaps, gaps[1:], strict=False))


def test_alpha_zero_means_do_not_speculate() -> None:
    setup = Setup(target=LLAMA8B, hardware=H100, draft_cost=0.05)
    rec = recommend(setup, constant_profile(0.0), BATCHES, max_nodes=16)
    assert all(c.nodes == 0 and c.speedup == 1.0 for c in rec.best)


def test_alpha_one_chain_accepts_everything() -> None:
    cands = chain_candidates(constant_profile(1.0), 7)
    assert cands.tau.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    setup = Setup(target=LLAMA8B, hardware=H100, draft_cost=0.0)
    table = speedup_table(setup, [1], cands)
    assert table.best()[0] == 7  # every extra token is accepted and nearly free at B = 1


def test_no_speculation_is_exactly_one() -> None:
    setup = Setup(target=LLAMA8B, hardware=H100, draft_cost=0.05, context=4096)
    table = speedup_table(setup, BATCHES, chain_candidates(constant_profile(0.7), 0))
    assert table.speedup[:, 0] == pytest.approx(np.ones(4), rel=1e-12)


def test_throughput_of_the_article_figure_by_hand() -> None:
    """B = 128, the best-first tree of 2 nodes (a chain: 0.8, then 0.8 x 0.8 beats the sibling
    0.8 x 0.2), tau = 1 + 0.8 + 0.64 = 2.44; a round verifies 128 x 3 = 384 tokens past the
    knee, 2 x 8e9 x 384 / 989 TFLOPS, and drafts 0.05 x 16 GB / 3.35 TB/s:
    128 x 2.44 / (6.212 ms + 0.239 ms) = 48,413 tokens/s; 2.44 / 6.451 ms per user."""
    table = article_table(max_nodes=8)
    round_s = 2 * 8e9 * 384 / 989e12 + 0.05 * 16e9 / 3.35e12
    assert table.throughput[3, 2] == pytest.approx(128 * 2.44 / round_s, rel=1e-12)
    assert table.tokens_per_s_per_user[3, 2] == pytest.approx(2.44 / round_s, rel=1e-12)
    assert table.throughput[3, 2] == pytest.approx(48_413, abs=1)


def test_a_model_that_does_not_fit_is_flagged() -> None:
    setup = Setup(target=load_model("llama-3.1-70b"), hardware=H100, draft_cost=0.05)
    rec = recommend(setup, constant_profile(0.8), [1, 8], max_nodes=8)
    assert not any(c.fits for c in rec.best)


def test_bad_inputs() -> None:
    with pytest.raises(SpecError, match="batch sizes must be >= 1"):
        speedup_table(Setup(target=LLAMA8B, hardware=H100, draft_cost=0.1), [0],
                      chain_candidates(constant_profile(0.5), 2))
    with pytest.raises(SpecError, match="give a drafter or a relative draft cost"):
        speedup_table(Setup(target=LLAMA8B, hardware=H100), [1],
                      chain_candidates(constant_profile(0.5), 2))
    with pytest.raises(SpecError, match="objective 'latency'"):
        speedup_table(Setup(target=LLAMA8B, hardware=H100, draft_cost=0.1), [1],
                      chain_candidates(constant_profile(0.5), 2)).best("latency")

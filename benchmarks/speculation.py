"""Benchmark: `recommend` for 9 batch sizes and trees up to 1,024 nodes for 5 drafters, and a
best-first tree of 1,024 nodes.

Targets: all five recommendations under 0.2 s of compute together; the tree under 10 ms; the
tau of every tree up to 4,096 nodes under 0.2 s; 100,000 Monte Carlo rounds under 2 s per rule.
Prints medians over repeats (the figure to quote on a shared machine).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from specsim.specs.acceptance import constant_profile, rank_acceptance_geometric
from specsim.specs.drafters import load_drafter
from specsim.specs.hardware import load_hardware
from specsim.speculation.recommend import recommend
from specsim.speculation.simulate import simulate_rounds
from specsim.speculation.speedup import Setup, tree_candidates
from specsim.speculation.trees import best_first_tree

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import median_s  # noqa: E402

REPEATS = 7
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
DRAFTERS = ["dflash-qwen3-8b", "eagle3-llama-3.1-8b", "qwen3-0.6b-for-qwen3-8b",
            "mtp-deepseek-v3", "medusa-vicuna-7b"]




def main() -> None:
    hw = load_hardware("h100-sxm")
    profile = constant_profile(0.8)
    total = 0.0
    print(f"recommend, {len(BATCHES)} batch sizes, trees up to 1,024 nodes, H100 SXM, alpha 0.8")
    for slug in DRAFTERS:
        drafter = load_drafter(slug)
        tp = 8 if drafter.target.slug == "deepseek-v3" else 1
        setup = Setup(target=drafter.target, hardware=hw, drafter=drafter, context=2048, tp=tp)
        t = median_s(lambda s=setup: recommend(s, profile, BATCHES, max_nodes=1024), REPEATS)
        total += t
        print(f"  {slug:28s} {t * 1e3:7.1f} ms")
    print(f"  all five: {total * 1e3:.1f} ms (target < 200 ms)")
    ranks = rank_acceptance_geometric(0.8, 1024)
    t = median_s(lambda: best_first_tree(ranks, 1024), REPEATS)
    print(f"best-first tree of 1,024 nodes: {t * 1e3:.2f} ms (target < 10 ms)")
    t = median_s(lambda: tree_candidates(rank_acceptance_geometric(0.8, 8), 4096), REPEATS)
    print(f"tau of every best-first tree up to 4,096 nodes: {t * 1e3:.1f} ms (target < 200 ms)")
    p = np.random.default_rng(1).dirichlet(np.ones(32), size=6)
    q = np.random.default_rng(2).dirichlet(np.ones(32), size=5)
    for rule in ("tokenwise", "block", "gumbel"):
        t = median_s(lambda r=rule: simulate_rounds(p, q, 100_000, np.random.default_rng(3), r),
                     REPEATS)
        print(f"100,000 simulated rounds, {rule}: {t:.2f} s (target < 2 s)")


if __name__ == "__main__":
    main()

"""Benchmark: acceptance profile from 1,000 rollouts x 64 positions of top-k data.

Writes a synthetic target and drafter file (top-20 ids and probabilities, the remaining mass,
the target's sampled tokens) to a temporary folder, then times reading + validating both files
and computing the block profile (which includes the per-position alpha). Target: under 1 s
together. Prints the median over repeats.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from specsim.specs.prob_arrays import check_pair, load_prob_arrays
from specsim.speculation.distributions import acceptance_from_probs

ROLLOUTS, POSITIONS, TOP_K, VOCAB = 1_000, 64, 20, 151_936
REPEATS = 5


def synthetic_pair(rng: np.random.Generator) -> tuple[dict[str, np.ndarray],
                                                       dict[str, np.ndarray]]:
    """Top-k arrays of a target and a drafter over a Qwen-sized vocabulary.

    Each row draws distinct ids from a pool of 200; the drafter lists the target's first 15 ids
    and 5 others, with the target's probabilities mixed with noise; 10% of each row's mass is
    left unlisted. The target's sampled token is its most likely listed id.
    """
    pool = rng.random((ROLLOUTS, POSITIONS, 200)).argsort(axis=-1)[..., : TOP_K + 5]
    pool = pool * 701 % VOCAB  # spread over the vocabulary, still distinct
    t_ids = pool[..., :TOP_K]
    d_ids = np.concatenate([pool[..., :15], pool[..., TOP_K:]], axis=-1)
    t_probs = rng.dirichlet(np.full(TOP_K, 0.3), size=(ROLLOUTS, POSITIONS))
    d_probs = 0.7 * np.concatenate([t_probs[..., :15], t_probs[..., 15:] * 0.0], axis=-1)
    d_probs += 0.3 * rng.dirichlet(np.ones(TOP_K), size=(ROLLOUTS, POSITIONS))
    d_probs /= d_probs.sum(axis=-1, keepdims=True)
    rest = np.full((ROLLOUTS, POSITIONS), 0.1, dtype=np.float32)
    target = {"topk_ids": t_ids, "topk_probs": (0.9 * t_probs).astype(np.float32), "rest": rest,
              "tokens": np.take_along_axis(t_ids, t_probs.argmax(-1)[..., None], -1)[..., 0]}
    draft = {"topk_ids": d_ids, "topk_probs": (0.9 * d_probs).astype(np.float32), "rest": rest}
    return target, draft


def main() -> None:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        target, draft = Path(folder) / "target.npz", Path(folder) / "draft.npz"
        t, d = synthetic_pair(rng)
        np.savez(target, **t)
        np.savez(draft, **d)
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            p, q = load_prob_arrays(target), load_prob_arrays(draft)
            check_pair(p, q)
            result = acceptance_from_probs(p, q, verification="block")
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"{ROLLOUTS} rollouts x {POSITIONS} positions, top-{TOP_K}: read + block profile "
          f"(alpha, survival, tau) in {median:.3f} s (median of {REPEATS}; target < 1 s); "
          f"alpha_1 = {result.alpha[:, 0].mean():.3f}, block tau(8) = {result.tau[8]:.3f}")


if __name__ == "__main__":
    main()

"""The recommended draft length follows the physics as the batch grows (issue 21): for a dense
target it falls with batch as published sweeps show, and where it grows the output says why."""

from __future__ import annotations

from specsim.speculation.recommend import recommend
from specsim.speculation.setup import load_setup

BATCHES = [1, 4, 16, 64, 128]


def _chains(engine: str, drafter: str) -> tuple[dict[int, int], tuple[str, ...]]:
    setup, profile = load_setup(hardware="h100-sxm", drafter=drafter, engine=engine)
    rec = recommend(setup, profile, BATCHES, shape="chain")
    return {c.batch: c.nodes for c in rec.best_chain}, rec.notes


def test_a_dense_targets_chain_falls_with_batch_as_vllm_measured() -> None:
    """vLLM PR #32374 (Dynamic SD, 2026-05-14): EAGLE-1 for Llama-3.1-8B, the per-batch-size
    schedule its author measured on a dense target, "monotonically decreasing": K = 3 at
    batch 1-16 and K = 2 at batch 64-128. specsim's vLLM schedule for the same drafter and
    target on an H100: 3 at batch 1-16, never growing, 2 by batch 128 (batch 64 is the one
    place it keeps 3, where that sweep had 2)."""
    k, notes = _chains("vllm", "eagle-llama-3.1-8b")
    assert [k[b] for b in (1, 4, 16)] == [3, 3, 3]
    assert k[128] == 2
    assert all(k[a] >= k[b] for a, b in zip(BATCHES, BATCHES[1:], strict=False))
    assert not any("lengthens" in n for n in notes)


def test_where_a_dense_chain_lengthens_the_output_names_the_reason() -> None:
    """SGLang 0.5.23 overlaps a round's host work with its GPU part; its fitted per-request
    round term grows with the batch until the round is host-bound, and from there a longer
    chain spreads the host time over more tokens: the note says so with both times."""
    k, notes = _chains("sglang", "eagle3-llama-3.1-8b")
    grows = [b for a, b in zip(BATCHES, BATCHES[1:], strict=False) if k[b] > k[a]]
    assert grows, k
    note = next(n for n in notes if n.startswith(f"the per-batch chain lengthens from batch "
                                                 f"{grows[0]}"))
    assert "host-bound" in note and "engines/sglang.yaml" in note and " ms" in note

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
    """SGLang 0.5.23 on an H100 at 2,048 cached tokens (EAGLE-3 for Llama-3.1-8B): the chain
    grows by one at batch 16 only where the shorter chain has just spilled out of a 32-token
    GEMM tile (16 x 5 tokens), and the note says that it is tile quantization, not a trend;
    from batch 64 the verification pass's attention (SGLang's prefill-type kernel, 6.54x a
    decoding kernel's) leaves no chain worth running."""
    k, notes = _chains("sglang", "eagle3-llama-3.1-8b")
    grows = [b for a, b in zip(BATCHES, BATCHES[1:], strict=False) if k[b] > k[a]]
    assert grows == [16] and k[16] == k[4] + 1, k
    assert k[64] == k[128] == 0
    note = next(n for n in notes if n.startswith(f"the per-batch chain lengthens from batch "
                                                 f"{grows[0]}"))
    assert "GEMM tile quantization, not a trend" in note and "32-token" in note

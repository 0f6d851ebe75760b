"""Drafter time per round from the drafter's architecture, re-derived by hand: at batch 1 and
no context every drafter pass is memory-bound, so it takes the bytes of the weights it reads
over the HBM bandwidth."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.specs.drafters import load_drafter
from specsim.specs.hardware import load_hardware
from specsim.speculation.draft_cost import draft_passes, draft_time_s, round_shape

H100 = load_hardware("h100-sxm")
BW = 3.35e12


def _layer(d: int, heads: int, kv_heads: int, head_dim: int, ff: int) -> int:
    """Weights of one decoder layer: q, k, v, o and a gated MLP."""
    return d * (heads + 2 * kv_heads) * head_dim + heads * head_dim * d + 3 * d * ff


def test_eagle3_pass_reads_one_layer_fc_and_draft_head() -> None:
    """EAGLE-3 for Llama-3.1-8B: 1 layer + fc (3 d -> d) + its own 32,000-row LM head."""
    d = load_drafter("eagle3-llama-3.1-8b")
    params = _layer(4096, 32, 8, 128, 14336) + 3 * 4096 * 4096 + 4096 * 32000
    t = draft_time_s(d, H100, round_shape(batch=1, depth=1, nodes=1, accepted=1))
    assert t[0] == pytest.approx(2 * params / BW, rel=0.02)


def test_autoregressive_cost_grows_with_depth() -> None:
    """Each further level is one more pass of the layer and the draft head (no fc: only the
    first pass fuses target hidden states)."""
    d = load_drafter("eagle3-llama-3.1-8b")
    t = draft_time_s(d, H100, round_shape(batch=1, depth=[1, 2, 4, 8], nodes=[1, 2, 4, 8],
                                          accepted=1))
    per_level = 2 * (_layer(4096, 32, 8, 128, 14336) + 4096 * 32000) / BW
    assert np.diff(t) == pytest.approx(per_level * np.array([1, 2, 4]), rel=0.02)
    assert draft_passes(d, [0, 3]).tolist() == [0, 3]


def test_dflash_round_is_one_block_pass_plus_injection() -> None:
    """DFlash for Qwen3-8B: one pass of 5 layers over the 16-position block through the
    target's 151,936 x 4096 LM head, plus the injection of the accepted tokens: the fc over 5
    target layers (5 d -> d) and each layer's K/V projection (d -> 2 x 8 x 128)."""
    d = load_drafter("dflash-qwen3-8b")
    backbone = 5 * _layer(4096, 32, 8, 128, 12288) + 151936 * 4096
    injection = 5 * 4096 * 4096 + 5 * 4096 * 2048
    t = draft_time_s(d, H100, round_shape(batch=1, depth=[3, 15], nodes=[3, 64], accepted=4))
    assert t[0] == pytest.approx(2 * (backbone + injection) / BW, rel=0.03)
    assert t[1] == t[0]  # one pass whatever the draft length or tree size
    assert draft_passes(d, [15]).tolist() == [1]


def test_dedit_pays_its_edit_passes() -> None:
    d = load_drafter("dedit-qwen3-4b")
    assert draft_passes(d, [8]).tolist() == [3]


def test_medusa_heads_ride_on_the_target() -> None:
    """Five heads, each a 4096 x 4096 residual block and its own 32,000-row LM head."""
    d = load_drafter("medusa-vicuna-7b")
    t = draft_time_s(d, H100, round_shape(batch=1, depth=5, nodes=5, accepted=2))
    assert t[0] == pytest.approx(5 * 2 * (4096 * 4096 + 4096 * 32000) / BW, rel=0.01)


def test_small_llm_runs_its_whole_model_per_level() -> None:
    d = load_drafter("qwen3-0.6b-for-qwen3-8b")
    one = draft_time_s(d, H100, round_shape(batch=1, depth=1, nodes=1, accepted=1))
    # Qwen3-0.6B: 0.44B non-embedding parameters plus its tied 151,936 x 1024 LM head
    assert one[0] == pytest.approx(2 * (0.44e9 + 151936 * 1024) / BW, rel=0.03)


def test_drafter_caches() -> None:
    """Own layers for DFlash (the article's 671,088,640 B at 32k), one layer for EAGLE-3,
    MLA latent for DeepSeek's MTP layer, nothing that grows for Medusa and H-Spec."""
    at = 32768.0
    dflash = load_drafter("dflash-qwen3-8b").cache_layout().bytes_per_request(at)
    assert dflash == 5 * 2 * 8 * 128 * 2 * at == 671_088_640
    assert load_drafter("eagle3-llama-3.1-8b").cache_layout().bytes_per_request(at) == \
        at * 2 * 8 * 128 * 2
    assert load_drafter("mtp-deepseek-v3").cache_layout().bytes_per_request(at) == at * 576 * 2
    for flat in ("medusa-vicuna-7b", "hspec-qwen3-8b"):
        assert load_drafter(flat).cache_layout().bytes_per_request(at) == 0


def test_published_acceptance_becomes_alpha() -> None:
    """DFlash on Qwen3-8B, MT-Bench: tau 4.28 with 15 draft tokens, so alpha solves
    (1 - alpha^16) / (1 - alpha) = 4.28."""
    alpha = load_drafter("dflash-qwen3-8b").acceptance.position_alphas[0]  # type: ignore[union-attr]
    assert (1 - alpha**16) / (1 - alpha) == pytest.approx(4.28, rel=1e-9)


@pytest.mark.parametrize("slug", ["eagle3-llama-3.1-8b", "qwen3-0.6b-for-qwen3-8b",
                                  "dflash-qwen3-8b", "p-eagle-gpt-oss-120b"])
def test_a_setting_costs_the_same_alone_and_inside_a_large_sweep(slug: str) -> None:
    """A pure function: the time of one setting does not depend on the other settings asked
    for in the same call (here 3,000 settings over two batch sizes at one context). The setting
    has a fractional first pass (5.25 accepted tokens absorbed) near the knee at batch 64."""
    d = load_drafter(slug)
    setting = {"batch": 64, "depth": 22, "nodes": 110, "accepted": 5.25, "context": 2048}
    alone = draft_time_s(d, H100, round_shape(**setting))
    index = np.arange(3000)
    sweep = {"batch": np.where(index % 2, 8, 64), "depth": 1 + index % 30,
             "nodes": (1 + index % 30) * (1 + index // 30), "accepted": 1.0 + (index % 97) / 8,
             "context": 2048}
    for key in ("batch", "depth", "nodes", "accepted"):
        sweep[key][1234] = setting[key]
    swept = draft_time_s(d, H100, round_shape(**sweep))
    assert swept[1234] == alone[0]


def test_distinct_settings_match_a_lexicographic_sort() -> None:
    # The mixed-radix code of per-column distinct values gives the same distinct settings, in
    # the same order, as sorting the float columns lexicographically (fractional tokens,
    # repeated batches, one context or several).
    from specsim.speculation.draft_cost import _distinct_rows, _distinct_rows_lexsort

    rng = np.random.default_rng(7)
    for size in (1, 3, 500, 20_000):
        cols = np.stack([rng.integers(0, 60, size) + rng.choice([0.0, 0.25, 0.5], size),
                         rng.choice([1.0, 2.0, 8.0, 256.0], size),
                         rng.choice([0.0, 2048.0, 1e6], size)])
        fast, slow = _distinct_rows(cols), _distinct_rows_lexsort(cols)
        assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])
        assert np.array_equal(fast[0][:, fast[1]], cols)  # scattering back restores every row

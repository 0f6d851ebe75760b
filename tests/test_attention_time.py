"""The tiled attention-time model: FlashAttention 2's split heuristic by hand, one wave by hand,
and the fit against Vidur's measured A100 attention table (held out by grid position)."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.forward.attention_time import (
    AttentionKernelEfficiency,
    attention_kernel_time_s,
    flash_splits,
)
from tests.test_vidur_calibration import VIDUR_DIR, needs_data


def test_flash_splits_by_hand() -> None:
    # 108 SMs, 31 key blocks. Eligible s (ceil(31 / s) changes): 1-8, 11, 16, 31.
    # 4 CTAs: efficiency 4 s / 108 (< one wave up to s = 27): best eligible 16 (0.593), then
    # 31 (124 / 108 -> 1.148 / 2 = 0.574); the fewest within 85% of 0.593 is 16.
    # 16 CTAs: s = 6 gives 96 / 108 = 0.889, s = 31 gives 4.59 / 5 = 0.919 (best);
    # the fewest >= 0.85 * 0.919 = 0.781 is 6. 88 CTAs >= 0.8 * 108: no split.
    # One key block: nothing to split.
    got = flash_splits(np.array([4, 16, 88, 4]), np.array([31, 31, 31, 1]), 108)
    assert got.tolist() == [16.0, 6.0, 1.0, 1.0]


def test_one_full_wave_by_hand() -> None:
    # Batch 27 x 4 KV heads = 108 CTAs (no split) on 108 SMs; 127 cached + 1 new key = one
    # block of 128 keys: K and V of one head, 2 * 128 * 128 * 2 B = 65,536 B per CTA, at
    # half of 1 TB/s shared by 108 SMs: 65,536 * 108 / 5e11 = 14.156 us; compute
    # 4 * 64 * 128 * 128 flop * 108 / 1e15 = 0.45 us is hidden. Plus floor 2 us, CTA 1 us.
    eff = AttentionKernelEfficiency(bandwidth=0.5, floor_s=2e-6, cta_s=1e-6, combine_s=5e-6)
    t = attention_kernel_time_s(27, 127, 1, q_heads=32, kv_heads=4, head_dim=128, causal=False,
                                bandwidth_bytes_per_s=1e12, flops_per_s=1e15, sm_count=108,
                                eff=eff)
    assert float(t) == pytest.approx(3e-6 + 65536 * 108 / 5e11, rel=1e-9)
    # Batch 21: 84 CTAs < 86.4 takes the split path and pays the combine kernel (one block:
    # one split), each CTA faster (84 share the bandwidth).
    t21 = attention_kernel_time_s(21, 127, 1, q_heads=32, kv_heads=4, head_dim=128,
                                  causal=False, bandwidth_bytes_per_s=1e12, flops_per_s=1e15,
                                  sm_count=108, eff=eff)
    assert float(t21) == pytest.approx(8e-6 + 65536 * 84 / 5e11, rel=1e-9)


def test_unphysical_terms_are_rejected() -> None:
    from specsim.errors import SpecError

    for bad in ({"bandwidth": 1.2}, {"sm_bandwidth": 0.5}, {"cta_s": -1e-6},
                {"causal_skip": 1.5}):
        with pytest.raises(SpecError):
            AttentionKernelEfficiency(**bad)  # type: ignore[arg-type]


@needs_data
def test_tiled_model_beats_the_roofline_on_held_out_attention() -> None:
    # Decode (split-KV kernel) and prefill (forward kernel) are different kernels, fitted
    # separately; every third point of each grid held out. Measured: decode 8.0% (roofline
    # 11.4%), prefill 6.0% (roofline 9.9%). The 6% target is met for prefill only.
    from specsim.measurement.attention_fit import fit_attention_kernel
    from specsim.measurement.calibrate import assign_split
    from specsim.measurement.tables import from_vidur

    points = from_vidur(VIDUR_DIR, "a100")
    attn = points[points["op_class"] == "attention"].reset_index(drop=True)
    attn["split"] = assign_split(attn, None)
    kw = {"q_heads": 32, "kv_heads": 4, "head_dim": 128, "bandwidth_bytes_per_s": 2039e9,
          "flops_per_s": 312e12, "sm_count": 108}
    for op, bound in (("attention_decode", 0.085), ("attention_causal", 0.065)):
        rows = attn[attn["op"] == op]
        train, held = rows[rows["split"] == "train"], rows[rows["split"] == "holdout"]
        eff, _ = fit_attention_kernel(train["batch"], train["context"], train["queries"],
                                      train["mask"] == "causal", train["time_s"], **kw)
        assert eff.bandwidth <= 1.0 and eff.flops <= 1.0 and eff.floor_s >= 0.0
        pred = attention_kernel_time_s(held["batch"], held["context"], held["queries"],
                                       causal=held["mask"] == "causal", eff=eff, **kw)
        assert np.mean(np.abs(pred / held["time_s"].to_numpy() - 1.0)) <= bound, op

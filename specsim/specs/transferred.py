"""Expected GEMM efficiencies of a GPU that has no kernel measurements (transferred terms).

Which fitted terms carry over between GPUs was measured on Vidur's two public tables (A100 80GB
SXM, HBM2e; A40, GDDR6): fit every model of one GPU, apply the dimensionless terms to the other
GPU's datasheet (its bandwidth, peak flops and SM count), predict its per-layer weight-GEMM
time (`tests/test_vidur_calibration.py`, `benchmarks/calibration_table.py`):

- the shape terms carry over: with the other GPU's own bandwidth and flops fractions put back
  in, the transferred overlap, tile, epilogue and wave terms predict it within 4.3% (A40) and
  3.6% (A100), about what its own fit does (4.2%, 3.2%);
- the bandwidth and flops fractions do not carry over exactly: 0.80 / 0.75 on the A100 and
  0.76 / 0.79 on the A40. Taken from the other GPU, the error is 6.4% on the A40 and 5.9% on
  the A100 (n <= 64: 4.5% and 5.2%). That is the expected error of a datasheet GPU given
  these transferred terms; a GPU whose memory or tensor cores sit further from these two (a
  Hopper or Blackwell part, an AMD GPU) can be further off, which two GPUs cannot measure;
- the floor is a time (5.5 us on the A100, 2.6 us on the A40), and carried over in seconds:
  expressed in bytes instead it transfers worse (7.3% and 6.1%).

The values below are the mean of the two GPUs' all-model fits, rounded; `specsim hardware
show` prints them for every datasheet profile, `transferred/<slug>` (e.g.
`--hardware transferred/h100-sxm`) uses them, and `specsim calibrate` takes the bandwidth,
flops and floor as the weak priors of its fit.

The expected real kernel efficiency of a datasheet GPU (EXPECTED_BANDWIDTH, EXPECTED_FLOPS) is
the one scalar pair that prices every engine's kernel time (`speculation.engine_time`) and
draws the plan's "expected real" T(n): achieved time = datasheet-roofline time / bandwidth
efficiency, with compute-bound time at the flops efficiency. It is the A100 SXM's own fit
(hardware/calibrated/a100-80g-sxm-vidur.yaml efficiency.gemm: bandwidth 0.862, flops 0.757),
not the two-GPU mean above: the mean's bandwidth and flops are parameters of the multi-term
GEMM model (overlap, tile, epilogue and wave terms beside them), not a scalar ratio of achieved
to datasheet time, and the scalar 0.862 / 0.757 is the one every engine term was fitted with
and `specsim validate` tests held out on 110 published rows (A100, H100, H200, B200; median
error 6.7%).
"""

from __future__ import annotations

import dataclasses

from specsim.specs.gemm_efficiency import GemmEfficiency

# sm_count is the GPU's own (the A100's 108 stands in here; transferred_gemm replaces it).
TRANSFERRED_GEMM = GemmEfficiency(
    bandwidth=0.78, flops=0.77, floor_s=4.0e-6, overlap_p=2.6, tile_rows=128,
    tile_fraction=0.67, epilogue_k=112.0, sm_count=108, tile_cols=128, wave_fraction=0.19)
# Leave-one-GPU-out error of the per-layer weight-GEMM time with transferred terms (%).
EXPECTED_ERROR_PCT = {"pooled": (5.9, 6.4), "n<=64": (4.5, 5.2)}
EXPECTED_BANDWIDTH = 0.862  # fraction of datasheet bandwidth a datasheet GPU's kernels reach
EXPECTED_FLOPS = 0.757  # fraction of its dense peak flops (the compute-bound part of a kernel)
EXPECTED_SOURCE = ("expected real kernel efficiency of a datasheet GPU: bandwidth 0.862, flops "
                   "0.757, the fitted weight-GEMM efficiencies of "
                   "hardware/calibrated/a100-80g-sxm-vidur.yaml (Vidur A100 GEMM profiles); the "
                   "engine terms are fitted and validated with it")
SOURCE = ("transferred GEMM efficiencies: mean of the all-model fits on Vidur's A100 and A40 "
          "tables (github.com/microsoft/vidur, data/profiling); expected error of the per-layer "
          "GEMM time about 6% (5.9% and 6.4% when the A100 or the A40 is held out entirely)")


def transferred_gemm(sm_count: int) -> GemmEfficiency:
    """The transferred GEMM terms for a GPU with `sm_count` SMs (0: unknown, no wave term)."""
    if sm_count < 1:
        return dataclasses.replace(TRANSFERRED_GEMM, sm_count=0, wave_fraction=0.0)
    return dataclasses.replace(TRANSFERRED_GEMM, sm_count=sm_count)


def expected_error_text() -> str:
    """One line stating the expected error of the transferred terms."""
    pooled, small = EXPECTED_ERROR_PCT["pooled"], EXPECTED_ERROR_PCT["n<=64"]
    return (f"per-layer weight-GEMM time of dense layers within about {max(pooled):.0f}% "
            f"(measured {pooled[0]}-{pooled[1]}% holding one of the two GPUs with tables, A100 "
            f"and A40, out entirely; n <= 64: {small[0]}-{small[1]}%); not measured on other "
            "architectures; MoE expert GEMMs are one grouped kernel, a pass within 15% of the "
            "engine model at the expected efficiency (H100: Qwen3-30B-A3B 1-11%, gpt-oss-120b "
            "6-8% at 1-256 tokens)")

"""The kernel efficiency of a GPU that has no kernel measurements (transferred terms).

A datasheet GPU has one kernel efficiency, which every engine, the plan's T(n) and every price
use (`specs.hardware.kernel_profile`; `--hardware transferred/<slug>` names the same kernels):
the GEMM model fitted on the one HBM GPU with public kernel tables, Vidur's A100 80GB SXM
(hardware/calibrated/a100-80g-sxm-vidur.yaml efficiency.gemm: 0.862 of bandwidth, 0.757 of
flops, a 5.67 us floor, overlap, tile, epilogue and wave terms), with the GPU's own SM count;
attention and memory-class kernels at the same bandwidth and flops fractions.

Its expected error was measured by holding a GPU out entirely (`tests/test_vidur_calibration.py`):
the A100 fit predicts every model of Vidur's A40 (GDDR6, 84 SMs) within 5.8% per layer GEMM
time pooled, 8.4% at n <= 64 (the A40's own fit predicts the A100 within 6.0% / 6.3%). A
GPU whose memory or tensor cores sit further from the A100's (a GDDR part, a Blackwell or AMD
GPU) can be further off, which two GPUs cannot measure.

What carries over between the two GPUs was measured on their all-model fits:

- the shape terms carry over: with the other GPU's own bandwidth and flops fractions put back
  in, the transferred overlap, tile, epilogue and wave terms predict it within 4.3% (A40) and
  3.6% (A100), about what its own fit does (4.2%, 3.2%);
- the bandwidth and flops fractions do not carry over exactly: 0.80 / 0.75 on the A100 and
  0.76 / 0.79 on the A40 (all-model fits; 6.4% on the A40 and 5.9% on the A100 taken from
  the other GPU);
- the floor is a time (5.5 us on the A100, 2.6 us on the A40), and carries over in seconds:
  expressed in bytes instead it transfers worse (7.3% and 6.1%).

The mean of the two all-model fits (TRANSFERRED_GEMM) is what `specsim calibrate` takes as the
weak priors of its fit (bandwidth, flops and floor): a starting point for a GPU's own tables,
not the efficiency of any GPU.
"""

from __future__ import annotations

import dataclasses

from specsim.specs.gemm_efficiency import GemmEfficiency

# The weak priors of `specsim calibrate`: the mean of the A100's and A40's all-model fits
# (sm_count: the A100's 108 stands in here; prior_gemm replaces it).
TRANSFERRED_GEMM = GemmEfficiency(
    bandwidth=0.78, flops=0.77, floor_s=4.0e-6, overlap_p=2.6, tile_rows=128,
    tile_fraction=0.67, epilogue_k=112.0, sm_count=108, tile_cols=128, wave_fraction=0.19)
# The built-in calibrated profile whose GEMM model a datasheet GPU's kernels run on.
KERNEL_MODEL_PROFILE = "calibrated/a100-80g-sxm-vidur"
# Per-layer weight-GEMM error of that model on a GPU held out entirely (the A40), %.
EXPECTED_ERROR_PCT = {"pooled": 5.8, "n<=64": 8.4}
SOURCE = ("kernel efficiency of a datasheet GPU: the GEMM model fitted on Vidur's A100 80GB SXM "
          "tables (hardware/calibrated/a100-80g-sxm-vidur.yaml, github.com/microsoft/vidur "
          "data/profiling) with this GPU's SM count, attention and memory kernels at its "
          "bandwidth and flops fractions; expected error of the per-layer GEMM time 5.8% "
          "(8.4% at n <= 64) on a GPU held out entirely (the A40)")


def prior_gemm(sm_count: int) -> GemmEfficiency:
    """The calibration priors' GEMM terms for a GPU with `sm_count` SMs (0: unknown, no wave
    term)."""
    if sm_count < 1:
        return dataclasses.replace(TRANSFERRED_GEMM, sm_count=0, wave_fraction=0.0)
    return dataclasses.replace(TRANSFERRED_GEMM, sm_count=sm_count)


def expected_error_text() -> str:
    """One line stating the expected error of a datasheet GPU's kernel model."""
    return (f"per-layer weight-GEMM time of dense layers within about "
            f"{EXPECTED_ERROR_PCT['pooled']}% ({EXPECTED_ERROR_PCT['n<=64']}% at n <= 64), "
            "measured holding the A40 out entirely (the only other GPU with tables); not "
            "measured on other architectures; MoE expert GEMMs are one grouped kernel each")

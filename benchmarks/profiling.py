"""Benchmark: the CPU end of the profile -> calibrate loop.

A quick numpy profile of the tiny model (target < 10 s on this 2-core machine) and a GEMM
fit of 4,000 synthetic points, about one model's Vidur table (target < 2 s).
Prints medians over repeats. The Vidur fits themselves are timed by calibration_table.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from specsim.forward.gemm import gemm_time_s
from specsim.measurement.gemm_fit import fit_gemm_efficiency
from specsim.measurement.profiling import make_backend, plan_profile, run_profile, tiny_model
from specsim.specs.hardware import GemmEfficiency

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import median_s  # noqa: E402

REPEATS = 3
A100 = {"weight_bytes_per_param": 2.0, "act_bytes_per_elem": 2.0,
        "bandwidth_bytes_per_s": 2039e9, "flops_per_s": 312e12}




def main() -> None:
    points = plan_profile(tiny_model(), tp=1, quick=True)
    t = median_s(lambda: run_profile(points, make_backend("numpy"), repeats=5, warmup=1), REPEATS)
    print(f"quick numpy profile of the tiny model: {t:.2f} s (target < 10 s)")
    rng = np.random.default_rng(7)
    m = np.tile(np.arange(1.0, 4097.0, 16.0), 16)
    k = np.repeat(rng.choice([4096.0, 8192.0, 14336.0], 16), m.size // 16)
    n = np.repeat(rng.choice([1024.0, 4096.0, 6144.0, 28672.0], 16), m.size // 16)
    truth = GemmEfficiency(bandwidth=0.82, flops=0.74, floor_s=4e-6)
    time_s = gemm_time_s(m, k, n, **A100, eff=truth) * np.exp(rng.normal(0.0, 0.05, m.size))
    t = median_s(lambda: fit_gemm_efficiency(m, k, n, time_s, **A100), REPEATS)
    print(f"GEMM fit of {m.size:,} points: {t:.2f} s (target < 2 s)")


if __name__ == "__main__":
    main()

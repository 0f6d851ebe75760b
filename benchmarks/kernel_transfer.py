"""How far a datasheet GPU's transferred kernel model sits from kernels measured on it.

docs/calibration.md quotes these figures. Two sources, neither copied into the project:

- published bf16 GEMM rates: the `torch-bf16` column of vLLM's
  benchmarks/kernels/bench_fp8_gemm.py as three pull requests print it (TFLOP/s per token
  count; the numbers below are copied from those tables, with their addresses);
- optionally Vidur's own kernel tables of a GPU that has none in ../shared (its H100 set:
  github.com/microsoft/vidur, data/profiling/compute/h100), read from a checkout given on the
  command line: the per-layer weight-GEMM time of every model, as tests/test_vidur_calibration.py
  measures the A40.

Usage: python benchmarks/kernel_transfer.py [VIDUR_CHECKOUT_DATA_PROFILING_DIR]
       (a folder holding compute/h100/<org>/<model>/mlp.csv)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from specsim.forward.gemm import gemm_time_s
from specsim.measurement.vidur import read_vidur_mlp
from specsim.specs.hardware import kernel_profile, load_hardware

# (GPU, source, k, n, {tokens: measured bf16 TFLOP/s}); weights in bf16, 2 bytes.
PUBLISHED = (
    ("b200", "vLLM PR #19566 (SM100), Llama-3.1-8B N=4096 K=4096", 4096, 4096,
     {1: 2.735701, 16: 72.857795, 64: 286.303008, 128: 561.330810, 256: 892.904450,
      512: 1335.789318, 1024: 1362.674710, 2048: 1444.418219}),
    ("b200", "vLLM PR #20071 (SM100), Llama-3.3-70B N=8192 K=2048", 2048, 8192,
     {1: 4.886522, 16: 92.691298, 32: 183.956786, 64: 357.481226, 128: 654.879700,
      192: 896.451572, 256: 1058.266034}),
    ("h100-sxm", "vLLM PR #49363 (H100), gemma-4-31B N=43008 K=5376", 5376, 43008,
     {1: 3.072025, 16: 48.328807, 64: 187.994464, 128: 364.745064, 256: 593.264799}),
)
# Vidur's four weight GEMMs of a layer (tests/test_vidur_calibration.py sums the same).
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
TOKEN_BINS = (16, 64, 256, 1024, 4096, 1 << 30)


def model_s(slug: str, m: np.ndarray, k: float, n: float) -> np.ndarray:
    """Seconds of an m x k x n bf16 weight GEMM on the GPU's kernel model."""
    hw = kernel_profile(load_hardware(slug))
    return gemm_time_s(m, k, n, weight_bytes_per_param=2.0, act_bytes_per_elem=2.0,
                       bandwidth_bytes_per_s=hw.hbm_bandwidth_bytes_per_s,
                       flops_per_s=hw.peak_flops_per_s["bf16"], eff=hw.efficiency.gemm)


def published() -> None:
    print("published bf16 GEMM rates against the kernel model (time ratio > 1: model slower)")
    for slug, source, k, n, rates in PUBLISHED:
        m = np.array(sorted(rates), dtype=float)
        measured = 2.0 * m * k * n / (np.array([rates[int(x)] for x in m]) * 1e12)
        ratio = model_s(slug, m, k, n) / measured
        print(f"  {slug}: {source}, {k * n * 2 / 1e6:.1f} MB of weights")
        for x, t, r in zip(m, measured, ratio, strict=True):
            print(f"    {int(x):5d} tokens: measured {t * 1e6:8.2f} us, model / measured {r:5.2f}")


def vidur(root: Path, device: str = "h100") -> None:
    mlp = read_vidur_mlp(root)
    g = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    if g.empty:
        print(f"no {device} weight-GEMM rows under {root}")
        return
    slug = {"h100": "h100-sxm", "a100": "a100-80g-sxm", "a40": "a40"}[device]
    keys = ["model", "tp", "num_tokens"]
    pred = model_s(slug, g["num_tokens"].to_numpy(float), g["k"].to_numpy(float),
                   g["n"].to_numpy(float))
    layers = g.assign(pred=pred).groupby(keys)[["time_s", "pred"]].sum().reset_index()
    err = layers["pred"] / layers["time_s"] - 1.0
    print(f"Vidur {device} tables, per-layer weight-GEMM time, {len(layers)} layer points: "
          f"median |error| {100 * np.median(np.abs(err)):.1f}%, mean "
          f"{100 * np.mean(np.abs(err)):.1f}% (positive: the model is slower)")
    low = 0
    for high in TOKEN_BINS:
        part = err[(layers["num_tokens"] > low) & (layers["num_tokens"] <= high)]
        if len(part):
            print(f"  tokens {low + 1}-{high}: median {100 * np.median(part):+.1f}% "
                  f"({len(part)} points)")
        low = high


if __name__ == "__main__":
    published()
    if len(sys.argv) > 1:
        vidur(Path(sys.argv[1]))

"""Benchmark: T(n) for n = 1..65,536 on every built-in model x GPU (start-up: startup.py).

Target: each model x GPU sweep under 50 ms.
Prints medians over repeats (shared machines are noisy; the median is the figure to quote).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

from specsim.forward.cost import forward_time_s
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from specsim.specs.paths import builtin_names

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import median_s  # noqa: E402

REPEATS = 5




def main() -> None:
    n = np.arange(1, 65537, dtype=np.float64)
    gpus = [load_hardware(s) for s in builtin_names("hardware")]
    models = [load_model(s) for s in builtin_names("models")]
    rows = []
    for model in models:
        for hw in gpus:
            t = median_s(lambda m=model, h=hw: forward_time_s(m, h, n, context=1024.0), REPEATS)
            rows.append((model.slug, hw.slug, t))
    per_pair = [t for _, _, t in rows]
    worst = max(rows, key=lambda r: r[2])
    print(f"T(n), n = 1..65,536 (context 1,024), {len(models)} models x {len(gpus)} GPUs")
    print(f"  median per model x GPU: {statistics.median(per_pair) * 1e3:.1f} ms")
    print(f"  slowest: {worst[0]} on {worst[1]}: {worst[2] * 1e3:.1f} ms (target < 50 ms)")
    print(f"  all {len(rows)} sweeps: {sum(per_pair):.2f} s")


if __name__ == "__main__":
    main()

"""Benchmark: wall time of the default `specsim plan` (target <= 10 s on a 2-core machine).

Runs `python -m specsim plan --out DIR --force` REPEATS times as a fresh subprocess (interpreter
start-up, imports, the serving model at TP 1/2/4/8, the policy simulation, `validate` for the
error section, the plots and both report files) and prints the median and minimum.

Usage: PYTHONPATH=$PWD python benchmarks/plan.py [repeats]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 10.0


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "specsim", "plan", "--out", str(out),
                            "--force"], check=True, capture_output=True)
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"specsim plan (defaults): median {median:.2f} s, min {min(times):.2f} s over "
          f"{repeats} runs (target {TARGET_S:.0f} s: {'met' if median <= TARGET_S else 'MISSED'})")


if __name__ == "__main__":
    main()

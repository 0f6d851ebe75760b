"""Benchmark: wall time of the default `specsim plan` (target <= 5 s on a 2-core machine).

Runs `python -m specsim plan --out DIR --force` 1 + REPEATS times as a fresh subprocess
(interpreter start-up, imports, the serving model at TP 1/2/4/8, the policy simulation, the
plots and both report files) and prints the median and minimum of the REPEATS runs, which read
the held-out error summary kept by the first (`validate_summary.held_out_summary`, kept under
the digest of the specsim source and built-in specs in a folder of this benchmark's own), and
the first run's time, which computes it (`validate`'s leave-one-source-out fits): what the
first plan after an edit to the source or the specs takes.

Usage: PYTHONPATH=$PWD python benchmarks/plan.py [repeats]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 5.0


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        env = {**os.environ, "SPECSIM_CACHE_DIR": str(Path(tmp) / "cache")}
        for _ in range(1 + repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "specsim", "plan", "--out", str(out),
                            "--force"], check=True, capture_output=True, env=env)
            times.append(time.perf_counter() - start)
    first, kept = times[0], times[1:]
    median = statistics.median(kept)
    print(f"specsim plan (defaults): median {median:.2f} s, min {min(kept):.2f} s over "
          f"{repeats} runs (target {TARGET_S:.0f} s: {'met' if median <= TARGET_S else 'MISSED'});"
          f" first run, computing the held-out summary: {first:.2f} s")


if __name__ == "__main__":
    main()

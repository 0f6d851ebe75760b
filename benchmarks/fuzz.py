"""Benchmark: the issue-10 fuzz campaign (tests/fuzz_cases.py) run in-process, timed per class.

Target: the whole campaign under 60 s on CI's 2 cores (tests/test_fuzz.py runs the same cases).
Prints the cases, outcomes and seconds per class, and the slowest cases.

    PYTHONPATH=. python benchmarks/fuzz.py
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz_cases import all_cases, lay_out, run_case  # noqa: E402


def main() -> None:
    cases = all_cases()
    seconds: collections.Counter[str] = collections.Counter()
    outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
    slow: list[tuple[float, str]] = []
    start, here = time.perf_counter(), os.getcwd()
    for case in cases:
        with tempfile.TemporaryDirectory() as folder:
            lay_out(case, Path(folder))
            os.chdir(folder)
            t0 = time.perf_counter()
            outcome = run_case(case)
            elapsed = time.perf_counter() - t0
            os.chdir(here)
        seconds[case.kind] += elapsed
        result = "traceback" if outcome.error else f"exit {outcome.code}"
        outcomes[(case.kind, result)] += 1
        slow.append((elapsed, f"{case.kind}:{case.label}"))
    total = time.perf_counter() - start
    print(f"{len(cases)} cases in {total:.1f} s (target: under 60 s on 2 cores)")
    for kind in sorted(seconds):
        counts = ", ".join(f"{r}: {n}" for (k, r), n in sorted(outcomes.items()) if k == kind)
        print(f"  {kind:<20} {seconds[kind]:6.2f} s  {counts}")
    print("slowest:", ", ".join(f"{label} {t * 1e3:.0f} ms" for t, label in
                                sorted(slow, reverse=True)[:5]))


if __name__ == "__main__":
    main()

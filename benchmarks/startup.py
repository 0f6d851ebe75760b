"""Benchmark: wall time of `specsim --help`, `specsim roofline` and `specsim recommend` (defaults).

Each command runs REPEATS times as a fresh subprocess (`python -m specsim ...`, so the figure
includes interpreter start-up and every import), and the median and minimum are printed against
the targets of issue 7 on a 2-core machine: 0.3 s, 0.5 s and 0.5 s. Quote the median.

The commands run with the bytecode cache on, as after `pip install` (PYTHONDONTWRITEBYTECODE is
dropped for them: without .pyc files every start compiles the package again, about 0.1 s). For
reference it also times the dependencies alone (numpy, PyYAML, typer; typer is pinned below
0.29, which imports pydantic on every command): the floor no change inside specsim can go below.

Usage: PYTHONPATH=$PWD python benchmarks/startup.py [repeats]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

COMMANDS: list[tuple[list[str], float]] = [
    (["--help"], 0.3),
    (["roofline"], 0.5),
    (["recommend"], 0.5),
]
DEPENDENCIES = "import numpy, yaml, typer"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall_s(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, env=ENV,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def line(label: str, times: list[float], target: float | None = None) -> str:
    median = statistics.median(times)
    text = f"  {label:28s} median {median:5.3f} s  min {min(times):5.3f} s"
    if target is not None:
        text += f"  (target <= {target:.1f} s: {'ok' if median <= target else 'over'})"
    return text


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    for args, _ in COMMANDS:  # warm the file cache and write the bytecode cache once
        wall_s(["-m", "specsim", *args])
    print(f"specsim start-up, {repeats} runs each (wall time of a fresh process)")
    for args, target in COMMANDS:
        times = [wall_s(["-m", "specsim", *args]) for _ in range(repeats)]
        print(line(f"specsim {' '.join(args)}", times, target))
    print(line("dependencies alone", [wall_s(["-c", DEPENDENCIES]) for _ in range(repeats)]))


if __name__ == "__main__":
    main()

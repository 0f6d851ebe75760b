"""A fresh fuzz campaign: the generators of tests/fuzz_cases.py with another seed, classified.

The suite's test runs the cases of one seed; this script draws a new set (default seed 2025,
at least 1,000 cases) that no fix was tuned on, runs each in-process with a 30 s alarm, and
counts outcomes by class:

- traceback: an uncaught exception other than SystemExit;
- hang: over 30 s;
- overwrite: exit 2 but a file in the case's folder was written or changed;
- accepted-invalid: exit 0 on input that is invalid by construction;
- rejected-valid: exit 2 on input that is valid by construction;
- bad-message: exit 2 but not one line under 400 characters naming the file or option;
- clean-error / valid-ok: what should happen.

    PYTHONPATH=. python benchmarks/fuzz_campaign.py [--seed 2025] [--show 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz_cases import Case, all_cases, lay_out, run_case, snapshot  # noqa: E402

HANG_S = 30


class _Hang(BaseException):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


def classify(case: Case, root: Path) -> str:
    """Run one case in `root` (already laid out) and name its outcome class."""
    before = snapshot(root)
    signal.alarm(HANG_S)
    try:
        outcome = run_case(case)
    except _Hang:
        return "hang"
    finally:
        signal.alarm(0)
    if outcome.error is not None:
        return "traceback"
    if outcome.code == 0:
        return "valid-ok" if 0 in case.expect else "accepted-invalid"
    if snapshot(root) != before:
        return "overwrite"
    if outcome.code != 2:
        return f"exit-{outcome.code}"
    if 2 not in case.expect:
        return "rejected-valid"
    lines = outcome.stderr.strip().splitlines()
    if len(lines) != 1 or len(lines[0]) >= 400 or case.needle not in lines[0]:
        return "bad-message"
    return "clean-error"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--show", type=int, default=20, help="problem cases to print")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    cases = all_cases(args.seed)
    counts: collections.Counter[str] = collections.Counter()
    by_kind: collections.Counter[tuple[str, str]] = collections.Counter()
    problems: list[str] = []
    start, here = time.perf_counter(), os.getcwd()
    for case in cases:
        with tempfile.TemporaryDirectory() as folder:
            lay_out(case, Path(folder))
            os.chdir(folder)
            try:
                result = classify(case, Path(folder))
            finally:
                os.chdir(here)
        counts[result] += 1
        by_kind[(case.kind, result)] += 1
        if result not in ("clean-error", "valid-ok"):
            command = " ".join(case.args)[:120]
            problems.append(f"{result}: {case.kind}:{case.label} specsim {command}")
    total = time.perf_counter() - start
    print(f"seed {args.seed}: {len(cases)} cases in {total:.1f} s")
    for result, n in counts.most_common():
        print(f"  {result:<17} {n}")
    print("by input class:")
    for kind in sorted({k for k, _ in by_kind}):
        parts = ", ".join(f"{r} {n}" for (k, r), n in sorted(by_kind.items()) if k == kind)
        print(f"  {kind:<20} {parts}")
    for line in problems[: args.show]:
        print(line)


if __name__ == "__main__":
    main()

"""Regression cases from a second adversarial campaign, beyond tests/fuzz_cases.py.

Each case is one command line plus the files it needs; each must end in exit 2 with one line
on stderr that names the file, field or option (`needle`), leave every file as it was, and
raise nothing but SystemExit (the contract of tests/test_fuzz.py). Run in-process
(fuzz_cases.run_case), so the whole file takes seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_cases import Case, lay_out, run_case, snapshot

LONG_NAME = "x" * 300  # one path component over the filesystem's 255 bytes
LONG_PATH = "/".join(["y" * 200] * 30)  # a path over PATH_MAX
REC = ("recommend", "--drafter", "eagle3-llama-3.1-8b", "--batch", "1", "--max-nodes", "8")


def _case(label: str, *args: str, needle: str, files: dict[str, bytes] | None = None) -> Case:
    return Case(kind="adversarial", label=label, args=args, files=files or {}, needle=needle)


CASES = [
    # a name the OS refuses (ENAMETOOLONG) is 'no such file', not an OSError traceback
    *[_case(f"models-import-{kind}", "models", "import", name, "--out", "o.yaml",
            needle=name[:20])
      for kind, name in (("long-name", LONG_NAME), ("long-path", LONG_PATH))],
    *[_case(f"drafters-import-{kind}", "drafters", "import", name, "--target", "llama-3.1-8b",
            "--out", "o.yaml", needle=name[:20])
      for kind, name in (("long-name", LONG_NAME), ("long-path", LONG_PATH))],
    *[_case(f"calibrate-{kind}", "calibrate", name, "--out", "o.yaml", needle=name[:20])
      for kind, name in (("long-name", LONG_NAME), ("long-path", LONG_PATH),
                         ("long-yaml-name", LONG_NAME + ".csv"))],
    _case("calibrate-vidur-long-name", "calibrate", LONG_NAME, "--format", "vidur", "--device",
          "a100", "--out", "o.yaml", needle=LONG_NAME[:20]),
    *[_case(f"configs-out-{kind}", *REC, "--engine", "trtllm", "--configs-out", name,
            needle=name[:20])
      for kind, name in (("long-name", LONG_NAME), ("long-path", LONG_PATH))],
    _case("configs-out-under-a-file", *REC, "--engine", "trtllm", "--configs-out", "afile/sub",
          files={"afile": b"x"}, needle="--configs-out"),
    _case("transferred-long-path", "roofline", "--hardware", f"transferred/{LONG_PATH}",
          "--tokens", "1", needle="hardware"),
    _case("transferred-long-name", "roofline", "--hardware", "transferred/" + "a" * 5000,
          "--tokens", "1", needle="hardware"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_adversarial_input_is_one_line_and_exit_2(case: Case, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lay_out(case, tmp_path)
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    outcome = run_case(case)
    assert outcome.error is None, f"uncaught {type(outcome.error).__name__}: {outcome.error}"
    assert outcome.code == 2, (outcome.code, outcome.stderr[-400:])
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, outcome.stderr[:600]
    assert lines[0].startswith("specsim: error:"), lines[0]
    assert case.needle in lines[0], (case.needle, lines[0])
    assert snapshot(tmp_path) == before, "a file was written or changed"

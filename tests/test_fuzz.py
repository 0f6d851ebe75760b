"""Issue 10: a seeded campaign of 1,000+ malformed inputs run through the CLI in-process.

Each case (see fuzz_cases.py) must end in exit 2 with one line on stderr, under 400
characters, that names the file, field or option, and must leave every file in its folder as it
was (contents and modification time); or, for input that is valid by construction, exit 0. No
case may raise anything but SystemExit. Its run time is measured in benchmarks/fuzz.py, not here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_cases import Case, all_cases, check_case

CASES = all_cases()


def test_the_campaign_is_large_and_covers_every_class() -> None:
    kinds = {c.kind for c in CASES}
    assert len(CASES) >= 1000
    assert kinds >= {"spec:hardware", "spec:model", "spec:drafter", "spec:workload",
                     "spec:misspelled-key", "file", "config.json", "profile-csv",
                     "vidur-folder", "vllm-metrics", "options", "output-path",
                     "cmd:engines", "cmd:validate", "cmd:drafters-import", "cmd:from-probs",
                     "cmd:rounds", "cmd:objectives", "cmd:weights", "cmd:fit-url", "cmd:plan",
                     "cmd:recommend"}


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}:{c.label}"[:60] for c in CASES])
def test_malformed_input_is_one_line_and_exit_2(case: Case, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_case(case, tmp_path)

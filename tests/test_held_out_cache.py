"""The held-out error summary of the report is kept on disk between runs under the digest of
its inputs (`specsim.specs.paths.source_digest`): read back exactly, computed again when any
input changes, and never a reason for a run to fail."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import specsim.measurement.published as published
import specsim.measurement.validate_summary as validate_summary
import specsim.specs.paths as spec_paths
from specsim.measurement.validate_summary import GroupError

SUMMARY = (GroupError(group="all", rows=173, median_abs_error=0.1 + 0.2,
                      median_signed_error=-1e-300, wrong_sign=3),
           GroupError(group="family=eagle", rows=1, median_abs_error=math.pi,
                      median_signed_error=2.0 / 3.0, wrong_sign=0))


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """The summary's inputs replaced by SUMMARY (counting the computations), the cache in a
    fresh folder."""
    calls: list[int] = []
    monkeypatch.setenv(validate_summary.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(published, "load_published", lambda: [])
    monkeypatch.setattr(validate_summary, "validate", lambda rows: [])

    def summary(results: Any, keys: Any) -> list[GroupError]:
        calls.append(1)
        return list(SUMMARY)

    monkeypatch.setattr(validate_summary, "error_summary", summary)
    return calls


def _summary() -> tuple[GroupError, ...]:
    summary: tuple[GroupError, ...] = validate_summary.held_out_summary.__wrapped__()
    return summary


def test_kept_and_read_back_exactly(computed: list[int], tmp_path: Path) -> None:
    assert _summary() == SUMMARY
    assert _summary() == SUMMARY
    assert len(computed) == 1
    assert len(list((tmp_path / "cache").glob("held-out-*.json"))) == 1


def test_computed_again_when_an_input_changes(computed: list[int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _summary()
    monkeypatch.setattr(spec_paths, "source_digest", lambda: "another")
    assert _summary() == SUMMARY
    assert len(computed) == 2


@pytest.mark.parametrize("text", ["", "{", "[]", '[{"group": "all"}]',
                                  '[{"group": "all", "rows": 1.5, "median_abs_error": 0.1, '
                                  '"median_signed_error": 0.1, "wrong_sign": 0}]'])
def test_a_damaged_file_is_computed_again(computed: list[int], tmp_path: Path,
                                          text: str) -> None:
    _summary()
    (path,) = (tmp_path / "cache").glob("held-out-*.json")
    path.write_text(text)
    assert _summary() == SUMMARY
    assert len(computed) == 2
    assert _summary() == SUMMARY and len(computed) == 2  # written whole again


def test_no_folder_keeps_nothing(computed: list[int], monkeypatch: pytest.MonkeyPatch,
                                 tmp_path: Path) -> None:
    monkeypatch.setenv(validate_summary.CACHE_ENV, "")
    assert _summary() == SUMMARY and _summary() == SUMMARY
    assert len(computed) == 2
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(validate_summary.CACHE_ENV, str(blocked / "cache"))
    assert _summary() == SUMMARY  # unwritable: computed, not an error
    assert len(computed) == 3


def test_the_default_folder_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(validate_summary.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert validate_summary.cache_dir() == Path("/somewhere/specsim")


def test_the_digest_follows_every_built_in_file(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    for kind in spec_paths._FOLDERS:
        (tmp_path / kind).mkdir()
        (tmp_path / kind / "a.yaml").write_text(f"name: {kind}\n")
    monkeypatch.setattr(spec_paths, "builtin_dir", lambda kind: tmp_path / kind)
    (tmp_path / "specsim").mkdir()
    (tmp_path / "specsim" / "m.py").write_text("X = 1\n")
    monkeypatch.setattr(spec_paths, "_package_dir", lambda: tmp_path / "specsim")
    first = spec_paths.source_digest()
    assert spec_paths.source_digest() == first
    edits = [(tmp_path / "engines" / "a.yaml", "name: engines \n"),
             (tmp_path / "specsim" / "m.py", "X = 2\n"),
             (tmp_path / "specsim" / "sub" / "n.py", ""),
             (tmp_path / "hardware" / "calibrated" / "b.yaml", "x: 1\n"),
             (tmp_path / "published" / "b.csv", "1,2\n")]
    for path, text in edits:
        path.parent.mkdir(exist_ok=True)
        before = path.read_text() if path.exists() else None
        path.write_text(text)
        assert spec_paths.source_digest() != first, path
        if before is None:
            path.unlink()
        else:
            path.write_text(before)
        assert spec_paths.source_digest() == first, path
    # a file moved to another kind's folder is another input
    (tmp_path / "models" / "a.yaml").rename(tmp_path / "drafters" / "m.yaml")
    assert spec_paths.source_digest() != first

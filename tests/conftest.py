"""Shared test fixtures: where the repo and the measured data live, and small spec writers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


# The measured data the ground-truth tests read lives outside the repository (nothing taken from
# another repository is committed): CI checks out shared/ beside the clone.
SHARED_DIR = REPO.parent / "shared"
# Vidur's public kernel tables (https://github.com/microsoft/vidur, MIT): $SPECSIM_VIDUR_DIR,
# else shared/data/vidur_profiles.
VIDUR_DIR = Path(os.environ.get("SPECSIM_VIDUR_DIR") or SHARED_DIR / "data" / "vidur_profiles")


def vidur_dir() -> Path | None:
    """VIDUR_DIR where it holds the measured tables (a compute/ folder), else None."""
    return VIDUR_DIR if (VIDUR_DIR / "compute").is_dir() else None


# The one skip of the ground-truth tests, one line naming what is missing. Where shared/ is
# beside the clone (CI) they never skip: tests/test_vidur_calibration.py fails instead.
requires_vidur = pytest.mark.skipif(
    vidur_dir() is None,
    reason=f"measured kernel tables not found: {VIDUR_DIR / 'compute'} "
    "(set SPECSIM_VIDUR_DIR, or check out shared/ beside the clone as CI does)")


@pytest.fixture
def write_yaml(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a mapping as YAML under tmp_path and return the path."""

    def write(name: str, data: object) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture(autouse=True, scope="session")
def _no_kept_results():  # type: ignore[no-untyped-def]
    """No result is kept between runs in tests (SPECSIM_CACHE_DIR empty; CLI subprocesses
    inherit it): the report's held-out summary is computed as before, a test that patches the
    library cannot leave one that a real run or another test would read, and the user's cache
    is neither read nor written. tests/test_held_out_cache.py sets its own folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECSIM_CACHE_DIR", "")
        yield

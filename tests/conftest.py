"""Shared test fixtures: where the repo and the measured data live, and small spec writers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


def vidur_dir() -> Path | None:
    """The Vidur profiling tables: $SPECSIM_VIDUR_DIR, else ../shared/data/vidur_profiles."""
    env = os.environ.get("SPECSIM_VIDUR_DIR")
    candidate = Path(env) if env else REPO.parent / "shared" / "data" / "vidur_profiles"
    return candidate if (candidate / "compute").is_dir() else None


requires_vidur = pytest.mark.skipif(
    vidur_dir() is None,
    reason="measured GPU timings not found: set SPECSIM_VIDUR_DIR or provide "
    "../shared/data/vidur_profiles (Vidur's public profiling tables)")


@pytest.fixture
def write_yaml(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a mapping as YAML under tmp_path and return the path."""

    def write(name: str, data: object) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write

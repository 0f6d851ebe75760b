"""A plain, non-editable install carries the built-in YAML: build the wheel, install it into
an empty folder, and load every kind of spec from there (not from this checkout)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    (path,) = out.glob("specsim-*.whl")
    return path


def test_wheel_contains_the_builtin_specs(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for expected in ("specsim/_builtin/hardware/h100-sxm.yaml",
                     "specsim/_builtin/workloads/models/qwen3-8b.yaml",
                     "specsim/_builtin/workloads/drafters/dflash-qwen3-8b.yaml",
                     "specsim/_builtin/workloads/scenarios/chat-dflash-qwen3-8b.yaml",
                     "specsim/_builtin/engines/hf-eager.yaml",
                     "specsim/_builtin/workloads/published/spec-bench-a100.yaml"):
        assert expected in names


def test_installed_copy_finds_its_specs(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
         str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    code = (
        "import specsim, specsim.specs.paths as l\n"
        "import specsim.serving.plan, specsim.cli, specsim.measurement.validate\n"
        "from specsim.specs.hardware import load_hardware\n"
        "from specsim.specs.drafters import load_drafter\n"
        f"assert specsim.__file__.startswith({str(site)!r}), specsim.__file__\n"
        "assert len(l.builtin_names('hardware')) >= 12\n"
        "print(load_hardware('h100-sxm').name, load_drafter('dflash-qwen3-8b').target.slug)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "H100" in run.stdout and "qwen3-8b" in run.stdout


def test_every_subpackage_is_listed_for_the_wheel() -> None:
    """pyproject.toml lists the packages a wheel ships; a subpackage missing there imports from
    a checkout (so the rest of the suite passes) but not after `pip install .`."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    root = Path(__file__).resolve().parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts)
             for p in (root / "specsim").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)

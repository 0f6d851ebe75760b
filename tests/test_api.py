"""The public API: every name in `specsim.__all__` resolves and is documented, `import specsim`
loads nothing heavy, and docs/api.md's notebook example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import specsim

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
CONSTANTS = {"__version__", "DEFAULT_MEMORY_FRACTION"}


def python_blocks(markdown: str) -> list[str]:
    """The ```python fenced blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def test_python_blocks_are_found() -> None:
    text = "a\n```python\nx = 1\n```\n```bash\nls\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = 2\n"]


def test_every_public_name_resolves_and_has_a_docstring() -> None:
    assert len(specsim.__all__) == len(set(specsim.__all__))
    for name in sorted(set(specsim.__all__) - CONSTANTS):
        value = getattr(specsim, name)
        assert (getattr(value, "__doc__", None) or "").strip(), f"specsim.{name}: no docstring"
        assert value.__module__.startswith("specsim."), name
    assert isinstance(specsim.__version__, str) and specsim.__version__
    assert 0.0 < specsim.DEFAULT_MEMORY_FRACTION <= 1.0


def test_all_is_the_lazy_table() -> None:
    assert set(specsim.__all__) - {"__version__"} == set(specsim._EXPORTS)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = specsim.no_such_name  # type: ignore[attr-defined]


def test_import_specsim_loads_no_submodule() -> None:
    code = ("import sys, specsim; print(sorted(m for m in sys.modules "
            "if m.startswith(('specsim.', 'numpy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_docs_api_notebook_runs() -> None:
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 6
    namespace: dict[str, object] = {"__name__": "docs_api"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC}:block{i + 1}", "exec"), namespace)  # noqa: S102
    assert "plan" in namespace and "rec" in namespace

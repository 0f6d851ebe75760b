"""The package's import graph: no cycle between modules, and layers import downward only.

Every `import` of a specsim module is read with `ast`, wherever it stands: at the top, inside
functions (lazy imports) and under `if TYPE_CHECKING:` (a type-only import is still a
dependency a reader follows, and a cycle through it is still a cycle).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "specsim"

# Lowest first: a module may import its own layer and the layers listed before it (a tuple is
# one layer). `engines` (each serving engine's command line) sits beside `speculation`, whose
# recommendation it renders and which asks it what an engine runs; `measurement` (profiling,
# calibration, validation against measured rows) uses the model layers and `serving` quotes its
# held-out error; `present` formats, the public API (`specsim/__init__.py`) re-exports, and `cli`
# parses options, on top.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",), ("specs",), ("forward",), ("speculation", "engines"), ("measurement",),
    ("serving",), ("present",), ("api",), ("cli",),
)
# Modules at the package root that are not a layer of their own.
ROOT_MODULES = {"specsim": "api", "specsim.__main__": "cli"}
RANK = {name: i for i, group in enumerate(LAYERS) for name in group}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(path: Path, name: str, known: set[str]) -> set[str]:
    """The specsim modules `path` imports (a `from pkg import mod` names the submodule)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "specsim"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base.split(".")[0] != "specsim":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imported(path, name, set(mods)) for name, path in mods.items()}


def layer(name: str) -> str:
    if name in ROOT_MODULES:
        return ROOT_MODULES[name]
    return name.split(".")[1]


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None (depth-first search, sorted for determinism)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_the_reader_sees_lazy_type_only_and_relative_imports(tmp_path: Path) -> None:
    source = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
              "import specsim.errors\nif TYPE_CHECKING:\n    from specsim.specs import models\n"
              "def f():\n    from specsim.forward.cost import pass_cost\n"
              "from . import hardware\n")
    path = tmp_path / "x.py"
    path.write_text(source, encoding="utf-8")
    known = {"specsim.errors", "specsim.specs.models", "specsim.forward.cost",
             "specsim.specs.hardware", "specsim.specs"}
    assert imported(path, "specsim.specs.x", known) == {
        "specsim.errors", "specsim.specs.models", "specsim.forward.cost", "specsim.specs.hardware"}


def test_find_cycle_finds_one_and_only_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_every_module_is_in_a_layer() -> None:
    assert {layer(m) for m in modules()} <= set(RANK)


def architecture_page_modules(text: str) -> set[str]:
    """The module paths drawn in docs/architecture.md's tree (two spaces per level)."""
    block = text.split("```")[1]
    found: set[str] = set()
    stack: list[str] = []
    for line in block.splitlines():
        match = re.match(r"^( *)(\S+)", line)
        if match:
            stack = [*stack[: len(match.group(1)) // 2], match.group(2)]
            if stack[-1].endswith(".py"):
                found.add("".join(stack))
    return found


def test_architecture_page_reader_by_hand() -> None:
    text = "x\n```\nspecsim/\n  a.py    one\n  sub/\n    b.py   two\n  c.py\n```\n"
    assert architecture_page_modules(text) == {"specsim/a.py", "specsim/sub/b.py", "specsim/c.py"}


def test_architecture_page_draws_every_module() -> None:
    """docs/architecture.md draws each module, one line each (subpackage __init__ files aside)."""
    drawn = architecture_page_modules((PACKAGE.parent / "docs" / "architecture.md").read_text(
        encoding="utf-8"))
    tree = {str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
            if p.name != "__init__.py" or p.parent == PACKAGE}
    assert sorted(tree - drawn) == [], "modules the architecture page leaves out"
    assert sorted(drawn - tree) == [], "modules the architecture page draws but the tree lacks"


def test_no_import_cycle() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("low,high", [(a, b) for a in RANK for b in RANK if RANK[a] < RANK[b]])
def test_layers_import_downward_only(low: str, high: str) -> None:
    upward = sorted(f"{m} -> {d}" for m, deps in graph().items() for d in deps
                    if layer(m) == low and layer(d) == high)
    assert not upward, f"{low} imports {high}, a higher layer: " + "; ".join(upward)


# `present/` formats: from the library it imports records, types and constants, plus these
# helpers, which name, quote, locate or write and compute no number.
PRESENT_HELPERS = {
    "specsim.specs.names.one_line",  # a spec's text on one line
    "specsim.specs.outputs.file_slug",  # a file name from a slug
    "specsim.specs.paths.builtin_dir",  # where the built-in specs lie
    "specsim.specs.outputs.atomic_write_bytes",  # writing a file
    "specsim.specs.outputs.make_parent",
    "specsim.specs.transferred.expected_error_text",  # a sentence quoting a measured error
}
# Library functions `present/` may still call for numbers it shows (none now): a function that
# computes belongs in the result (e.g. make_plan) or its caller; an entry present/ no longer
# imports fails the test, so the list only shrinks.
PRESENT_STILL_COMPUTES: set[str] = set()


def present_library_imports(path: Path) -> set[str]:
    """`module.name` of every library name a present/ module imports (`from x import name`;
    a plain `import specsim.x` is reported as the module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("specsim.")
                      and not a.name.startswith("specsim.present")}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and \
                node.module.startswith("specsim.") and \
                not node.module.startswith("specsim.present"):
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def computes(qualified: str) -> bool:
    """Whether an imported library name can compute: a function or a module (its functions);
    a class (a record, a type, an error) or a constant cannot."""
    import importlib

    module, _, name = qualified.rpartition(".")
    try:
        return _computes(getattr(importlib.import_module(module), name))
    except AttributeError:  # a submodule: `from specsim.engines import sglang`
        return True


def _computes(obj: object) -> bool:
    import inspect

    return inspect.ismodule(obj) or (callable(obj) and not inspect.isclass(obj))


def test_computes_by_hand() -> None:
    assert computes("specsim.specs.params.model_sizes")
    assert computes("specsim.engines.sglang")
    assert not computes("specsim.specs.params.ModelSizes")
    assert not computes("specsim.forward.memory.DEFAULT_MEMORY_FRACTION")
    assert not computes("specsim.errors.SpecError")


def test_present_imports_records_and_formatting_helpers_only() -> None:
    """present/ draws and renders what the library computed: every function it imports from
    the library is a named helper or a known, listed leftover."""
    imported_names = {name for path in sorted((PACKAGE / "present").glob("*.py"))
                      for name in present_library_imports(path)}
    computing = sorted(n for n in imported_names if computes(n)
                       and n not in PRESENT_HELPERS | PRESENT_STILL_COMPUTES)
    assert computing == [], "present/ imports library functions that compute"
    stale = sorted(PRESENT_STILL_COMPUTES - imported_names)
    assert stale == [], "no longer imported by present/: drop from PRESENT_STILL_COMPUTES"

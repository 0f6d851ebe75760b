"""The `speculative:` block of engines/<engine>.yaml: what an engine accepts as speculative
settings (engine version and source files recorded there), as read.

The engine adapters (`specsim.engines`) hold the rules' checks and the commands; this module
only reads and checks the block's shape.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from specsim.errors import SpecError
from specsim.specs.io import read_yaml
from specsim.specs.paths import builtin_dir


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineArgs:
    """One engine's speculative arguments: version, source and the rules as read from YAML.

    launch: the command that starts a server, as an argument vector with one "{model}" word
    (the YAML's `launch` string split by shell rules).
    """

    engine: str
    path: Path
    version: str
    source: str
    launch: tuple[str, ...]
    tp_flag: str
    rules: dict[str, Any]

    def launch_argv(self, model: str) -> list[str]:
        """The launch command for `model` (a Hub id or path), one argument per word; `model`
        stays one argument whatever it holds."""
        return [model if word == MODEL_WORD else word for word in self.launch]


# The word of a `launch` template that the target model replaces.
MODEL_WORD = "{model}"


def _launch(text: str, path: object) -> tuple[str, ...]:
    """A `launch` template split into words; exactly one of them is "{model}"."""
    try:
        words = tuple(shlex.split(text))
    except ValueError as err:
        raise SpecError(f"{path}: field 'speculative.launch' = {text!r}: {err}") from None
    if words.count(MODEL_WORD) != 1 or not words or words[0] == MODEL_WORD:
        raise SpecError(f"{path}: field 'speculative.launch' = {text!r} needs a program and "
                        f"exactly one word {MODEL_WORD}")
    return words


@cache
def engine_args(engine: str, path: Path | None = None) -> EngineArgs:
    """The `speculative:` block of `path` (None: the built-in engines/<engine>.yaml)."""
    path = path or builtin_dir("engines") / f"{engine}.yaml"
    if not path.is_file():
        raise SpecError(f"unknown engine '{engine}'; no {path}")
    block = read_yaml(path).get("speculative")
    if not isinstance(block, dict):
        raise SpecError(f"{path}: needs a 'speculative:' mapping")
    try:
        return EngineArgs(engine=engine, path=path, version=str(block["version"]),
                          source=str(block["source"]),
                          launch=_launch(str(block["launch"]), path),
                          tp_flag=str(block["tp_flag"]), rules=block)
    except KeyError as err:
        raise SpecError(f"{path}: speculative.{err.args[0]} is missing") from None

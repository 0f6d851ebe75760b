"""YAML I/O for specs: built-in slugs, files, and the rule that every number has a source.

A spec file is a mapping. Every number in it must be traceable: either its own mapping (or an
enclosing one) has a `source` string, or the number is written as `{value: X, source: "..."}`.
`read_spec_file` checks that rule and unwraps the `{value, source}` leaves, returning the plain
mapping plus a `sources` table that maps each number's dotted path to its source.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from specsim.errors import SpecError

# libyaml's parser where PyYAML was built with it (several times faster), else the pure one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Folder of each kind, relative to the repository root, and to specsim/_builtin/ in a wheel.
_FOLDERS = {
    "hardware": "hardware",
    "models": "workloads/models",
    "drafters": "workloads/drafters",
    "scenarios": "workloads/scenarios",
    "engines": "engines",
    "published": "workloads/published",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecFile:
    """A parsed spec file: plain values, the source of each number, where it came from."""

    data: dict[str, Any]
    sources: dict[str, str]
    path: str


def builtin_dir(kind: str) -> Path:
    """Folder holding the built-in YAML of one kind.

    An installed wheel carries it as package data under specsim/_builtin/; a checkout (or an
    editable install) has it at the top of the repository.
    """
    package = Path(__file__).resolve().parent.parent
    installed = package / "_builtin" / _FOLDERS[kind]
    return installed if installed.is_dir() else package.parent / _FOLDERS[kind]


def builtin_names(kind: str) -> list[str]:
    """Sorted slugs of the built-in specs of one kind (calibrated GPU profiles as
    `calibrated/<name>`)."""
    folder = builtin_dir(kind)
    if not folder.is_dir():
        return []
    names = [p.stem for p in folder.glob("*.yaml")]
    names += [f"calibrated/{p.stem}" for p in folder.glob("calibrated/*.yaml")]
    return sorted(names)


def resolve_path(kind: str, name: str) -> Path:
    """Turn a slug or a path into the path of a YAML file; unknown slugs list the valid ones."""
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        if not candidate.is_file():
            raise SpecError(f"{name}: no such {kind} file")
        return candidate
    path = builtin_dir(kind) / f"{name}.yaml"
    if not path.is_file():
        valid = ", ".join(builtin_names(kind)) or "(none)"
        raise SpecError(f"unknown {kind} '{name}'; built-in: {valid}; "
                        "or give a path to a YAML file")
    return path


def read_yaml(path: Path) -> dict[str, Any]:
    """Parse a YAML mapping, turning every parse problem into one SpecError line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(f"{path}: cannot read ({err.strerror})") from None
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "malformed YAML"
        raise SpecError(f"{path}:{where}: malformed YAML ({problem})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    return data


def read_spec_file(path: Path) -> SpecFile:
    """Read a spec file, check that every number has a source, unwrap {value, source} leaves."""
    raw = read_yaml(path)
    sources: dict[str, str] = {}
    data = _unwrap(raw, prefix="", inherited=None, sources=sources, path=path)
    return SpecFile(data=data, sources=sources, path=str(path))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_sourced_leaf(value: object) -> bool:
    return isinstance(value, dict) and set(value) == {"value", "source"}


def _unwrap(
    node: Mapping[str, Any],
    *,
    prefix: str,
    inherited: str | None,
    sources: dict[str, str],
    path: Path,
) -> dict[str, Any]:
    here = node.get("source", inherited)
    if here is not None and not isinstance(here, str):
        raise SpecError(f"{path}: field '{prefix}source' must be a string")
    out: dict[str, Any] = {}
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if _is_sourced_leaf(value):
            sources[dotted] = _check_source(value["source"], dotted, path)
            value = value["value"]
            out[key] = value
            continue
        if isinstance(value, dict):
            out[key] = _unwrap(value, prefix=f"{dotted}.", inherited=here, sources=sources,
                               path=path)
            continue
        for index, number in _numbers(value):
            if here is None:
                raise SpecError(f"{path}: field '{dotted}' = {number} has no source")
            sources[f"{dotted}{index}"] = here
        out[key] = value
    return out


def _numbers(value: object) -> Iterator[tuple[str, object]]:
    if _is_number(value):
        yield "", value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if _is_number(item):
                yield f"[{i}]", item


def _check_source(source: object, dotted: str, path: Path) -> str:
    if not isinstance(source, str) or not source.strip():
        raise SpecError(f"{path}: field '{dotted}.source' must be a non-empty string")
    return source


def check_writable(path: Path, *, force: bool) -> None:
    """Refuse to overwrite an existing file unless `force` (every command's --force)."""
    if path.exists() and not force:
        raise SpecError(f"{path}: exists; pass --force to overwrite")


def atomic_write(path: Path, write: Callable[[TextIO], object]) -> None:
    """Write a text file through `write(handle)`, all or nothing.

    The text goes to a temporary file in the same folder, which is then renamed over `path`
    (os.replace): a reader sees the old file or the new one, never half of one. On any error
    the temporary file is removed and `path` is left as it was; OS errors become SpecError.
    """
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise SpecError(f"{path}: cannot write ({err.strerror or err})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            write(handle)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; give a normal file's mode
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise SpecError(f"{path}: cannot write ({err.strerror or err})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_yaml(path: Path, data: Mapping[str, Any], *, force: bool) -> None:
    """Write a mapping as YAML, atomically; refuse to overwrite a file unless `force`."""
    check_writable(path, force=force)
    text = yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda handle: handle.write(text))


class Fields:
    """Typed access to a spec mapping; every problem names the file and the dotted field."""

    def __init__(self, data: Mapping[str, Any], path: str, prefix: str = "") -> None:
        self._data = data
        self._path = path
        self._prefix = prefix

    def error(self, key: str, problem: str) -> SpecError:
        return SpecError(f"{self._path}: field '{self._prefix}{key}' {problem}")

    def has(self, key: str) -> bool:
        return key in self._data and self._data[key] is not None

    def sub(self, key: str, *, required: bool = True) -> Fields | None:
        value = self._data.get(key)
        if value is None:
            if required:
                raise self.error(key, "is missing")
            return None
        if not isinstance(value, dict):
            raise self.error(key, f"must be a mapping, got {value!r}")
        return Fields(value, self._path, f"{self._prefix}{key}.")

    def value(self, key: str) -> object:
        """The raw value of a field, None when absent."""
        return self._data.get(key)

    def keys(self) -> list[str]:
        return [k for k in self._data if k != "source"]

    def _get(self, key: str, default: object) -> object:
        if key not in self._data or self._data[key] is None:
            if default is _REQUIRED:
                raise self.error(key, "is missing")
            return default
        return self._data[key]

    def number(self, key: str, default: object = None, *, minimum: float | None = None,
               positive: bool = False) -> float:
        value = self._get(key, _REQUIRED if default is None else default)
        if not _is_number(value):
            raise self.error(key, f"must be a number, got {value!r}")
        number = float(value)  # type: ignore[arg-type]
        if number != number or number in (float("inf"), float("-inf")):
            raise self.error(key, f"must be finite, got {value!r}")
        if positive and number <= 0:
            raise self.error(key, f"must be > 0, got {value!r}")
        if minimum is not None and number < minimum:
            raise self.error(key, f"must be >= {minimum:g}, got {value!r}")
        return number

    def integer(self, key: str, default: int | None = None, *, minimum: int = 0) -> int:
        value = self._get(key, _REQUIRED if default is None else default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"must be an integer, got {value!r}")
        if value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value!r}")
        return value

    def string(self, key: str, default: str | None = None) -> str:
        value = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"must be a non-empty string, got {value!r}")
        return value

    def boolean(self, key: str, default: bool | None = None) -> bool:
        value = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value

    def choice(self, key: str, options: tuple[str, ...], default: str | None = None) -> str:
        value = self.string(key, default)
        if value not in options:
            raise self.error(key, f"must be one of {', '.join(options)}; got {value!r}")
        return value


_REQUIRED = object()

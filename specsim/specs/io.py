"""YAML I/O for specs: files read within limits, the one YAML reader, and the rule that every
number has a source.

A spec file is a mapping. Every number in it must be traceable: either its own mapping (or an
enclosing one) has a `source` string, or the number is written as `{value: X, source: "..."}`.
`read_spec_file` checks that rule and unwraps the `{value, source}` leaves, returning the plain
mapping plus a `sources` table that maps each number's dotted path to its source. Where the
files lie is `specsim.specs.paths`; the checks on numbers and fields, `specsim.specs.fields`.
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from specsim.errors import SpecError
from specsim.specs.fields import check_number, is_number, show
from specsim.specs.paths import probe

# libyaml's parser where PyYAML was built with it (several times faster), else the pure one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecFile:
    """A parsed spec file: plain values, the source of each number, where it came from."""

    data: dict[str, Any]
    sources: dict[str, str]
    path: str


# Bounds on what a spec or config file may hold: far above any real spec, far below what
# exhausts memory or the interpreter's stack (the bounds on numbers are in specs/fields.py).
MAX_FILE_BYTES = 64 * 2**20
# Every YAML input (specs, ranks, workloads, published rows) and config.json: the largest
# built-in YAML is 32 KB; a file over this is refused by its size, before it is parsed.
MAX_SPEC_BYTES = 2**20
MAX_DEPTH = 64
# Nodes (scalars, lists, mappings) in one YAML document: a built-in file has a few thousand.
# Counted while parsing, before any object is built, so a huge flat list costs no memory.
MAX_YAML_NODES = 50_000
# Digits of a YAML integer: far above any real field (MAX_NUMBER has 19), far below Python's
# 4,300-digit limit on int() from text.
MAX_INT_DIGITS = 100


def read_text(path: Path, *, what: str = "file", limit: int = MAX_FILE_BYTES) -> str:
    """A text file's contents: UTF-8 (with or without BOM) or UTF-16 with a BOM.

    A folder, a missing file, a file over `limit` bytes, binary data or other encodings are one
    SpecError naming the file. At most `limit` + 1 bytes are ever read.
    """
    return decode_text(read_bytes(path, what=what, limit=limit), path)


def read_bytes(path: Path, *, what: str = "file", limit: int = MAX_FILE_BYTES) -> bytes:
    """A file's bytes, refused (one SpecError naming it) when it is a folder, unreadable or
    larger than `limit` bytes, found by reading at most `limit` + 1 bytes."""
    if probe(path, "is_dir"):
        raise SpecError(f"{path}: is a folder, not a {what}")
    try:
        # O_NONBLOCK: opening a named pipe with no writer would wait for one forever
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as err:
        raise SpecError(f"{path}: cannot read ({err.strerror or err})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError(f"{path}: not a regular file (a pipe, socket or device), not a "
                            f"{what}")
        try:
            raw = handle.read(limit + 1)
        except OSError as err:
            raise SpecError(f"{path}: cannot read ({err.strerror or err})") from None
    if len(raw) > limit:
        raise SpecError(f"{path}: larger than {_size(limit)}; not a {what}")
    return raw


def _size(limit: int) -> str:
    """A byte limit as people write it: 1 MiB, 64 MiB, 512 KiB, 1000 bytes."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if limit >= scale and limit % scale == 0:
            return f"{limit // scale} {unit}"
    return f"{limit:,} bytes"


def decode_text(raw: bytes, path: Path | str) -> str:
    """Bytes to text: a UTF-16 or UTF-8 BOM is honoured; otherwise UTF-8; NUL means binary."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError:
            raise SpecError(f"{path}: malformed UTF-16 text") from None
    if b"\x00" in raw:
        raise SpecError(f"{path}: binary data, not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SpecError(f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset "
                        f"{err.start}); save it as UTF-8") from None


# ---- the one YAML reader -------------------------------------------------------------------
#
# Every YAML input goes through `parse_yaml`: YAML 1.2 core-schema scalars, no anchors or
# aliases, at most MAX_DEPTH levels and MAX_YAML_NODES nodes, no key twice in a mapping, no
# integer of more than MAX_INT_DIGITS digits, and every problem one SpecError line naming the
# file, the line and (where it has one) the field.
#
# YAML 1.2 core schema, not PyYAML's YAML 1.1: `032` is 32 (1.1: octal 26), `0o17` is 15,
# `0x1F` is 31, `1e-3` is a number (1.1: the string '1e-3'); `1_000`, `1:30` (1.1:
# sexagesimal 90), `yes`/`no`/`on`/`off` and dates are strings, which a numeric or boolean
# field then refuses by name. Only the core tags (str, int, float, bool, null, seq, map) exist.

_TAG = "tag:yaml.org,2002:"
_CORE_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_CORE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_CORE_BOOL = {"true": True, "True": True, "TRUE": True,
              "false": False, "False": False, "FALSE": False}
_CORE_NULL = ("", "~", "null", "Null", "NULL")

_BaseLoader: Any = _LOADER


def _int_digits(text: str) -> int:
    """Digits of an integer literal (without sign or 0o/0x prefix)."""
    body = text.lstrip("+-")
    return len(body) - 2 if body[:2] in ("0o", "0x") else len(body)


class _StrictLoader(_BaseLoader):  # type: ignore[misc]
    """libyaml's parser with YAML 1.2 core-schema scalars, rejecting a key given twice in one
    mapping (PyYAML keeps the last) and any tag outside the core schema."""

    yaml_implicit_resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    yaml_constructors: dict[str | None, Any] = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {show(key, 40)} appears twice", key_node.start_mark)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping

    def _scalar(self, node: yaml.Node, kind: str) -> str:
        value = self.construct_scalar(node)
        assert isinstance(value, str)
        return value

    def _bad(self, node: yaml.Node, kind: str, value: str) -> yaml.constructor.ConstructorError:
        return yaml.constructor.ConstructorError(
            None, None, f"{show(value, 40)} is not a YAML 1.2 {kind}", node.start_mark)

    def construct_core_int(self, node: yaml.Node) -> int:
        value = self._scalar(node, "integer")
        if not _CORE_INT.fullmatch(value):
            raise self._bad(node, "integer", value)
        if _int_digits(value) > MAX_INT_DIGITS:  # _check_events names the field first
            raise yaml.constructor.ConstructorError(
                None, None, f"integer of {_int_digits(value):,} digits", node.start_mark)
        if value.startswith("0o"):
            return int(value[2:], 8)
        if value.startswith("0x"):
            return int(value[2:], 16)
        return int(value, 10)

    def construct_core_float(self, node: yaml.Node) -> float:
        value = self._scalar(node, "number")
        if _CORE_INT.fullmatch(value) and _int_digits(value) <= MAX_INT_DIGITS:
            return float(self.construct_core_int(node))  # `!!float 3`
        if not _CORE_FLOAT.fullmatch(value):
            raise self._bad(node, "number", value)
        special = value.lower()
        if special.lstrip("+-") in (".inf", ".nan"):
            return float(special.replace(".", ""))
        return float(value)

    def construct_core_bool(self, node: yaml.Node) -> bool:
        value = self._scalar(node, "boolean")
        if value not in _CORE_BOOL:
            raise self._bad(node, "boolean (true or false)", value)
        return _CORE_BOOL[value]

    def construct_core_null(self, node: yaml.Node) -> None:
        value = self._scalar(node, "null")
        if value not in _CORE_NULL:
            raise self._bad(node, "null", value)

    def construct_unknown(self, node: yaml.Node) -> None:
        raise yaml.constructor.ConstructorError(
            None, None, f"tag {show(node.tag, 40)} is not supported (only plain YAML values)",
            node.start_mark)


for _kind, _pattern, _first in (
    ("bool", "true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", _CORE_INT.pattern, "-+0123456789"),
    ("float", _CORE_FLOAT.pattern, "-+0123456789."),
    ("null", "~|null|Null|NULL|", ["~", "n", "N", ""]),
):
    _StrictLoader.add_implicit_resolver(f"{_TAG}{_kind}", re.compile(f"^(?:{_pattern})$"),
                                        list(_first))
for _kind, _method in (
    ("str", yaml.constructor.SafeConstructor.construct_yaml_str),
    ("seq", yaml.constructor.SafeConstructor.construct_yaml_seq),
    ("map", yaml.constructor.SafeConstructor.construct_yaml_map),
    ("int", _StrictLoader.construct_core_int),
    ("float", _StrictLoader.construct_core_float),
    ("bool", _StrictLoader.construct_core_bool),
    ("null", _StrictLoader.construct_core_null),
):
    _StrictLoader.add_constructor(f"{_TAG}{_kind}", _method)
_StrictLoader.add_constructor(None, _StrictLoader.construct_unknown)


def _field_path(stack: list[list[Any]]) -> str:
    """The dotted field of the node being read: `a.b[3].c` (`[3]` at the top level)."""
    text = ""
    for frame in stack:
        if frame[0] == "seq":
            text += f"[{frame[1]}]"
        elif frame[1] is not None:
            text += f"{'.' if text else ''}{frame[1]}"
    return text if len(text) <= 60 else text[:57] + "..."


def _check_events(text: str, where: str) -> None:
    """One pass over the parse events, before any object is built: refuse anchors and aliases
    (a "billion laughs" file expands exponentially), nesting deeper than MAX_DEPTH (the
    constructor recurses once per level), more than MAX_YAML_NODES nodes, and integers of more
    than MAX_INT_DIGITS digits, naming the field.

    PyYAML's event parser is iterative (libyaml's where present), so this pass cannot recurse;
    it keeps one frame per open collection: ["map", key, expecting_key] or ["seq", index].
    """
    stack: list[list[Any]] = []
    nodes = 0
    for event in yaml.parse(text, Loader=_BaseLoader):
        if isinstance(event, yaml.CollectionEndEvent):
            stack.pop()
            _node_done(stack, "?")
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        line = getattr(event.start_mark, "line", -1) + 1
        nodes += 1
        if nodes > MAX_YAML_NODES:
            raise SpecError(f"{where}: line {line}: more than {MAX_YAML_NODES:,} values; "
                            "not a specsim input")
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            raise SpecError(f"{where}: line {line}: YAML anchors and aliases (&, *) are not "
                            "supported; write the values out")
        if stack and stack[-1][0] == "seq":
            stack[-1][1] += 1
        if isinstance(event, yaml.ScalarEvent):
            value = event.value
            resolved = event.tag == f"{_TAG}int" or (
                event.tag is None and event.implicit[0] and _CORE_INT.fullmatch(value))
            if resolved and _int_digits(value) > MAX_INT_DIGITS:
                field = _field_path(stack)
                named = f"field '{field}'" if field else "the value"
                raise SpecError(f"{where}: line {line}: {named}: integer of "
                                f"{_int_digits(value):,} digits (at most {MAX_INT_DIGITS})")
            _node_done(stack, value)
            continue
        if len(stack) >= MAX_DEPTH:
            raise SpecError(f"{where}: line {line}: nested more than {MAX_DEPTH} levels deep")
        kind = "map" if isinstance(event, yaml.MappingStartEvent) else "seq"
        stack.append(["map", None, True] if kind == "map" else ["seq", -1])


def _node_done(stack: list[list[Any]], key: str) -> None:
    """A node of the innermost mapping is complete: a key (remember it) or its value."""
    if stack and stack[-1][0] == "map":
        frame = stack[-1]
        if frame[2]:
            frame[1] = key if len(key) <= 40 else key[:37] + "..."
        frame[2] = not frame[2]


# Text -> its parsed value: a plan reads the same few dozen spec files over a hundred times.
# The value depends on the text alone; each caller gets its own copy (callers may edit it).
_PARSED: dict[str, Any] = {}
_PARSED_MAX = 128  # texts kept
_PARSED_MAX_CHARS = 2**17  # longer texts are parsed every time (a built-in spec: < 80 kB)


def parse_yaml(text: str, where: Path | str) -> Any:
    """The one YAML reader for every input: the document's value (any type), or one SpecError
    line naming `where` (see the rules above this function)."""
    if text in _PARSED:
        return copy.deepcopy(_PARSED[text])
    value = _parse_yaml(text, where)
    if len(text) <= _PARSED_MAX_CHARS:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[text] = copy.deepcopy(value)
    return value


def _parse_yaml(text: str, where: Path | str) -> Any:
    """`parse_yaml` without its cache."""
    try:
        _check_events(text, str(where))
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506  (a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}:" if mark is not None else ""
        problem = str(getattr(err, "problem", None) or "malformed YAML")
        problem = problem if len(problem) <= 80 else problem[:77] + "..."
        raise SpecError(f"{where}:{line} malformed YAML ({problem})") from None
    except RecursionError:  # unreachable within MAX_DEPTH; a last guard
        raise SpecError(f"{where}: nested too deeply") from None


def read_yaml(path: Path, *, what: str = "YAML file") -> dict[str, Any]:
    """A YAML file holding a mapping, read by `parse_yaml` (refused unread past
    MAX_SPEC_BYTES); every problem is one SpecError line."""
    data = parse_yaml(read_text(path, what=what, limit=MAX_SPEC_BYTES), path)
    if data is None:  # nothing but blanks and comments: 'got NoneType' said less
        raise SpecError(f"{path}: is empty; expected a mapping of fields")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    return data


def read_spec_file(path: Path) -> SpecFile:
    """Read a spec file, check that every number has a source, unwrap {value, source} leaves."""
    raw = read_yaml(path)
    sources: dict[str, str] = {}
    data = _unwrap(raw, prefix="", inherited=None, sources=sources, path=path)
    return SpecFile(data=data, sources=sources, path=str(path))


def spec_from_mapping(data: Mapping[str, Any], where: str) -> SpecFile:
    """A SpecFile from a mapping in memory (as `write_yaml` would store it), checked alike."""
    sources: dict[str, str] = {}
    text = yaml.safe_dump(dict(data), sort_keys=False)
    plain = parse_yaml(text, where)  # the round trip the file will make
    if not isinstance(plain, dict):
        raise SpecError(f"{where}: expected a mapping of fields, got {type(plain).__name__}")
    unwrapped = _unwrap(plain, prefix="", inherited=None, sources=sources, path=Path(where))
    return SpecFile(data=unwrapped, sources=sources, path=where)


def read_json(path: Path, *, what: str = "JSON file") -> Any:
    """Parse a JSON file, refusing nesting deeper than MAX_DEPTH before parsing."""
    text = read_text(path, what=what, limit=MAX_SPEC_BYTES)
    check_json_depth(text, path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecError(f"{path}: malformed JSON (line {err.lineno}: {err.msg})") from None
    except ValueError as err:  # e.g. an integer literal of more than 4,300 digits
        raise SpecError(f"{path}: malformed JSON ({str(err)[:120]})") from None


def check_json_depth(text: str, path: Path) -> None:
    """Count bracket depth outside strings; the json module recurses once per level."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(f"{path}: nested more than {MAX_DEPTH} levels deep")
        elif char in "]}":
            depth -= 1



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
    if node.get("source") is not None:
        _check_source(node["source"], f"{prefix}source", path)
    here = node.get("source", inherited)
    out: dict[str, Any] = {}
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if not isinstance(key, str):
            raise SpecError(f"{path}: key {str(key)[:40]!r} under '{prefix or '(top)'}' must be "
                            "a name")
        if _is_sourced_leaf(value):
            sources[dotted] = _check_source(value["source"], f"{dotted}.source", path)
            value = value["value"]
            for index, number in _numbers(value):
                check_number(number, f"{path}: field '{dotted}{index}'")  # type: ignore[arg-type]
            out[key] = value
            continue
        if isinstance(value, dict):
            out[key] = _unwrap(value, prefix=f"{dotted}.", inherited=here, sources=sources,
                               path=path)
            continue
        for index, number in _numbers(value):
            check_number(number, f"{path}: field '{dotted}{index}'")  # type: ignore[arg-type]
            if here is None:
                raise SpecError(f"{path}: field '{dotted}{index}' = {show(number)} has no source")
            sources[f"{dotted}{index}"] = _check_source(here, f"{prefix}source", path)
        out[key] = value
    return out


def _numbers(value: object) -> Iterator[tuple[str, object]]:
    if is_number(value):
        yield "", value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            for index, number in _numbers(item):  # nested lists: e.g. [[bytes, us], ...]
                yield f"[{i}]{index}", number


def _check_source(source: object, dotted: str, path: Path) -> str:
    if not isinstance(source, str) or not source.strip():
        raise SpecError(f"{path}: field '{dotted}' must be a non-empty string")
    return source

"""Measured per-rank acceptance vectors read from a file (`--ranks FILE`).

Accepted forms: a JSON list, or a JSON object with one list under "ranks" or
"acceptance"; a YAML list (or such a mapping); CSV (numbers separated by commas, spaces or
new lines, one optional header line); and Sequoia's acceptance-vector format as its scripts print
it, `tensor([a_0, a_1, ...])` (Chen et al. 2024, Infini-AI-Lab/Sequoia). Entry j is a_j, the
probability that the target's token is the drafter's j-th candidate.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from specsim.errors import SpecError
from specsim.specs.acceptance import PROBABILITY_TOLERANCE

# A YAML document rather than CSV: a block list ("- 0.5") or a mapping ("ranks: ...").
_YAML_BLOCK = re.compile(r"-(?:\s|$)|[^\n]*:")


def read_ranks(path: str | Path) -> tuple[float, ...]:
    """a_j from `path`; any problem is one SpecError naming the file and the entry."""
    from specsim.specs.fields import show
    from specsim.specs.io import MAX_SPEC_BYTES, check_json_depth, read_text

    where = str(path)
    text = read_text(Path(path), what="ranks file", limit=MAX_SPEC_BYTES)
    check_json_depth(text, Path(path))  # brackets of JSON and flow YAML alike
    try:
        values = _parse(text, where)
    except RecursionError:
        raise SpecError(f"{where}: nested too deeply to be a list of ranks") from None
    if not isinstance(values, list):
        raise SpecError(f"{where}: ranks must be a list of numbers, got "
                        f"{type(values).__name__} {show(values, 40)}")
    if not values:
        raise SpecError(f"{where}: ranks list is empty")
    out = []
    for j, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SpecError(f"{where}: entry {j} = {show(v, 40)} is not a number")
        if not math.isfinite(v) or v < 0.0 or v > 1.0:
            problem = "is negative; each entry is" if v < 0.0 else "must be"
            raise SpecError(f"{where}: entry {j} = {show(v, 40)} {problem} a probability in "
                            "[0, 1]")
        out.append(float(v))
    if sum(out) > 1.0 + 1e-6 + PROBABILITY_TOLERANCE:
        raise SpecError(f"{where}: entries sum to {sum(out):.6g} > 1; the ranks are exclusive "
                        "events (entry j: P(target's token is the j-th candidate))")
    return tuple(out)


def _tensor_body(text: str) -> str:
    """The list inside Sequoia's `tensor([...])` or `tensor([...], device=...)`, else `text`
    (found by position, not by a backtracking pattern: linear in the file's length)."""
    stripped = text.strip()
    if not (stripped.startswith("tensor(") and stripped.endswith(")")):
        return text
    inner = stripped[len("tensor("):-1].strip()
    close = inner.find("]")
    if not inner.startswith("[") or close < 0:
        return text
    rest = inner[close + 1:].strip()
    return inner[:close + 1] if not rest or rest.startswith(",") else text


def _parse(text: str, where: str) -> Any:
    from specsim.specs.io import parse_yaml

    stripped = _tensor_body(text).strip()
    if stripped.startswith(("[", "{")):
        try:
            data = json.loads(stripped, parse_constant=lambda c: float(c),
                              parse_int=lambda digits: _json_int(digits, where))
        except json.JSONDecodeError:
            data = parse_yaml(stripped, where)  # flow YAML
    elif _YAML_BLOCK.match(stripped):
        data = parse_yaml(stripped, where)
    else:
        return _csv(stripped, where)
    if isinstance(data, dict):
        for key in ("ranks", "acceptance"):
            if key in data:
                return data[key]
        raise SpecError(f"{where}: a mapping needs a 'ranks' list")
    return data


def _json_int(digits: str, where: str) -> int:
    from specsim.specs.io import MAX_INT_DIGITS

    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise SpecError(f"{where}: an integer of {len(digits.lstrip('-')):,} digits; ranks "
                        "are probabilities in [0, 1]")
    return int(digits)


def _csv(text: str, where: str) -> list[float]:
    first, newline, rest = text.partition("\n")
    head = [t for t in re.split(r"[,\s;]+", first) if t]
    if newline and rest.strip() and not all(_is_number(t) for t in head):
        head = []  # a header line of column names
    elif head and not _is_number(head[0]):
        head = head[1:]  # one line led by its name
    tokens = head + [t for t in re.split(r"[,\s;]+", rest) if t]
    values = []
    for j, token in enumerate(tokens):
        if not _is_number(token):
            shown = token if len(token) <= 40 else token[:37] + "..."
            raise SpecError(f"{where}: entry {j} = {shown!r} is not a number")
        values.append(float(token))
    if not values and text:  # a name or a header line and nothing after it
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise SpecError(f"{where}: no numbers, only {shown!r}; give the acceptance of each "
                        "rank (e.g. 0.62, 0.14, 0.06)")
    return values


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True

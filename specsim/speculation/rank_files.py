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

import yaml

from specsim.errors import SpecError
from specsim.speculation.acceptance import PROBABILITY_TOLERANCE

_TENSOR = re.compile(r"^\s*tensor\(\s*(\[.*?\])\s*(,[^)]*)?\)\s*$", re.S)


def read_ranks(path: str | Path) -> tuple[float, ...]:
    """a_j from `path`; any problem is one SpecError naming the file and the entry."""
    from specsim.specs.io import MAX_SPEC_BYTES, check_json_depth, read_text

    where = str(path)
    text = read_text(Path(path), what="ranks file", limit=MAX_SPEC_BYTES)
    check_json_depth(text, Path(path))  # brackets of JSON and flow YAML alike
    try:
        values = _parse(text, where)
    except RecursionError:
        raise SpecError(f"{where}: nested too deeply to be a list of ranks") from None
    if not isinstance(values, list):
        raise SpecError(f"{where}: ranks must be a list of numbers, got {type(values).__name__}")
    if not values:
        raise SpecError(f"{where}: ranks list is empty")
    out = []
    for j, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SpecError(f"{where}: entry {j} = {v!r} is not a number")
        if not math.isfinite(v) or v < 0.0 or v > 1.0:
            raise SpecError(f"{where}: entry {j} = {v!r} must be a probability in [0, 1]")
        out.append(float(v))
    if sum(out) > 1.0 + 1e-6 + PROBABILITY_TOLERANCE:
        raise SpecError(f"{where}: entries sum to {sum(out):.6g} > 1; the ranks are exclusive "
                        "events (entry j: P(target's token is the j-th candidate))")
    return tuple(out)


def _parse(text: str, where: str) -> Any:
    match = _TENSOR.match(text)
    body = match.group(1) if match else text
    stripped = body.strip()
    if stripped.startswith(("[", "{")):
        try:
            data = json.loads(stripped, parse_constant=lambda c: float(c))
        except json.JSONDecodeError:
            data = _yaml(stripped, where)
    elif ":" in stripped or stripped.startswith("-"):
        data = _yaml(stripped, where)
    else:
        return _csv(stripped, where)
    if isinstance(data, dict):
        for key in ("ranks", "acceptance"):
            if key in data:
                return data[key]
        raise SpecError(f"{where}: a mapping needs a 'ranks' list")
    return data


def _yaml(text: str, where: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SpecError(f"{where}: not JSON, YAML or CSV ({err.__class__.__name__})") from None


def _csv(text: str, where: str) -> list[float]:
    tokens = [t for t in re.split(r"[,\s;]+", text) if t]
    if tokens and not _is_number(tokens[0]):
        tokens = tokens[1:]  # header
    values = []
    for j, token in enumerate(tokens):
        if not _is_number(token):
            raise SpecError(f"{where}: entry {j} = {token!r} is not a number")
        values.append(float(token))
    return values


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True

"""The YAML reader keeps parsed texts (a plan reads the same spec files over a hundred times):
every caller still gets a value of its own, and a text that fails still fails, naming where."""

from __future__ import annotations

import pytest

from specsim.errors import SpecError
from specsim.specs.io import parse_yaml, read_spec_file
from specsim.specs.paths import builtin_dir


def test_each_caller_gets_its_own_copy() -> None:
    text = "a:\n  b: [1, 2]\n  c: x\n"
    first = parse_yaml(text, "one.yaml")
    first["a"]["b"].append(3)
    first["a"]["c"] = "edited"
    second = parse_yaml(text, "two.yaml")
    assert second == {"a": {"b": [1, 2], "c": "x"}}
    second["a"].clear()
    assert parse_yaml(text, "three.yaml") == {"a": {"b": [1, 2], "c": "x"}}


def test_a_spec_file_read_twice_is_equal_and_apart() -> None:
    path = builtin_dir("engines") / "sglang.yaml"
    first, second = read_spec_file(path), read_spec_file(path)
    assert first == second
    assert first.data is not second.data
    first.data.clear()
    assert read_spec_file(path).data == second.data


def test_a_bad_text_fails_each_time_naming_its_file() -> None:
    text = "a: 1\na: 2\n"
    for where in ("first.yaml", "second.yaml"):
        with pytest.raises(SpecError, match=where):
            parse_yaml(text, where)

"""The checks every spec loader shares: `Fields` (typed access to a spec mapping, naming the
file and the dotted field in each error), the bounds on numbers (`check_number`, MAX_NUMBER,
MIN_NUMBER, MAX_INTEGER, MAX_LAYERS), unknown keys (`check_keys`), and the one-line message
helpers `show` and `closest`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from specsim.errors import SpecError

MAX_NUMBER = 1e18  # larger magnitudes in a spec are typos (e.g. 1e308), not hardware
# Nonzero smaller magnitudes are typos too (5e-324): a bandwidth or an efficiency that small
# made a time of inf, with numpy's overflow warnings. Far below any fitted term (the fits clamp
# exp() at e^-60, about 1e-26), far above where a reciprocal overflows (about 1e-308).
MIN_NUMBER = 1e-100

MAX_INTEGER = 10**9  # default cap on integer spec fields (heads, sizes, counts)
# Layers of one model or drafter: per-layer tuples are built from the count, so 10**9 layers
# held the loader for minutes and gigabytes. The deepest published decoder has ~120 layers.
MAX_LAYERS = 10_000


def show(value: object, width: int = 40) -> str:
    """repr of a value, cut to `width` characters for one-line messages."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def closest(name: str, valid: Iterable[str]) -> str:
    """' (did you mean X?)' for the valid name closest to `name`, or '' when none is close."""
    options = list(valid)
    lowered = {v.lower(): v for v in options}
    # a prefix ('h100', 'qwen3-8') first: up to three names it begins; else the nearest spelling
    prefixed = sorted(v for v in lowered if len(name) >= 2 and v.startswith(name.lower()))
    if 0 < len(prefixed) <= 3:
        return f" (did you mean {' or '.join(repr(lowered[v]) for v in prefixed)}?)"
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[match[0]]!r}?)" if match else ""


def check_keys(data: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Raise for the first key of `data` not in `allowed`, naming `where` (file, row or block)
    and the closest allowed key. For YAML whose loader reads fields by hand (engines,
    published rows), so a misspelled optional field is an error, not silently ignored."""
    valid = list(allowed)
    for key in data:
        if key not in valid:
            raise SpecError(f"{where}: unknown field {show(str(key), 40)}"
                            f"{closest(str(key), valid)}")


def is_number(value: object) -> bool:
    """An int or a float, not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_number(value: int | float, where: str) -> None:
    """Every number in a spec is finite and below MAX_NUMBER in magnitude, and 0 or at least
    MIN_NUMBER in magnitude.

    The one exception is `.inf` under `efficiency.` (a hard max in the GEMM model), which the
    efficiency dataclasses validate themselves.
    """
    try:
        number = float(value)
    except OverflowError:
        number = math.nan
    ok = math.isfinite(number) and abs(number) <= MAX_NUMBER
    if number == math.inf and "field 'efficiency." in where:
        ok = True
    shown = repr(value) if len(repr(value)) <= 24 else repr(value)[:21] + "..."
    if not ok:
        raise SpecError(f"{where} = {shown} is not a finite number of magnitude <= "
                        f"{MAX_NUMBER:.0e}")
    if 0 < abs(number) < MIN_NUMBER:
        raise SpecError(f"{where} = {shown} is not 0 and under {MIN_NUMBER:.0e} in magnitude "
                        "(a typo: dividing by it overflows)")



class Fields:
    """Typed access to a spec mapping; every problem names the file and the dotted field.

    Every key asked for (present or not) is remembered per block, so that `check_unknown`
    can reject a key no loader asked for (a misspelled optional field), naming the closest one.
    """

    def __init__(self, data: Mapping[str, Any], path: str, prefix: str = "",
                 asked: dict[str, set[str]] | None = None) -> None:
        self._data = data
        self._path = path
        self._prefix = prefix
        self._asked = {} if asked is None else asked
        self._asked.setdefault(prefix, set())

    def _ask(self, key: str) -> None:
        self._asked[self._prefix].add(key)

    def error(self, key: str, problem: str) -> SpecError:
        return SpecError(f"{self._path}: field '{self._prefix}{key}' {problem}")

    def numbered_key(self, key: str, prefix: str, low: int, high: int, problem: str) -> int:
        """The N of a key `<prefix><N>` (tp8, hd128): ASCII digits without a leading zero, in
        [low, high]; else the error `problem` naming the field ('tp²' passed isdigit() and
        broke int(); 'tp02' silently replaced 'tp2')."""
        n = key.removeprefix(prefix)
        if not key.startswith(prefix) or not n.isascii() or not n.isdigit() \
                or n != str(int(n)) or not low <= int(n) <= high:
            raise self.error(key, problem)
        return int(n)

    def has(self, key: str) -> bool:
        self._ask(key)
        return key in self._data and self._data[key] is not None

    def sub(self, key: str, *, required: bool = True) -> Fields | None:
        self._ask(key)
        value = self._data.get(key)
        if value is None:
            if required:
                raise self.error(key, "is missing")
            return None
        if not isinstance(value, dict):
            raise self.error(key, f"must be a mapping, got {show(value)}")
        return Fields(value, self._path, f"{self._prefix}{key}.", self._asked)

    def value(self, key: str) -> object:
        """The raw value of a field, None when absent (its contents are the caller's to check)."""
        self._ask(key)
        return self._data.get(key)

    def keys(self) -> list[str]:
        """Every key of this block (the caller checks each one)."""
        keys = [k for k in self._data if k != "source"]
        self._asked[self._prefix].update(keys)
        return keys

    def check_unknown(self) -> None:
        """Raise for the first key that no loader asked for, suggesting the closest valid one."""
        _check_keys(self._data, self._prefix, self._asked, self._path)

    def _get(self, key: str, default: object) -> object:
        self._ask(key)
        if key not in self._data or self._data[key] is None:
            if default is _REQUIRED:
                raise self.error(key, "is missing")
            return default
        return self._data[key]

    def number(self, key: str, default: object = None, *, minimum: float | None = None,
               positive: bool = False, maximum: float | None = None) -> float:
        value = self._get(key, _REQUIRED if default is None else default)
        if not is_number(value):
            raise self.error(key, f"must be a number, got {show(value)}")
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:
            number = math.inf
        if not math.isfinite(number) or abs(number) > MAX_NUMBER:
            raise self.error(key, f"must be finite and at most {MAX_NUMBER:.0e}, got {show(value)}")
        if positive and number <= 0:
            raise self.error(key, f"must be > 0, got {show(value)}")
        if minimum is not None and number < minimum:
            raise self.error(key, f"must be >= {minimum:g}, got {show(value)}")
        if maximum is not None and number > maximum:
            raise self.error(key, f"must be <= {maximum:g}, got {show(value)}")
        return number + 0.0  # -0.0 (a YAML '-0.0') prints as '-0' wherever it is shown

    def integer(self, key: str, default: int | None = None, *, minimum: int = 0,
                maximum: int = MAX_INTEGER) -> int:
        value = self._get(key, _REQUIRED if default is None else default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"must be an integer, got {show(value)}")
        if not minimum <= value <= maximum:
            raise self.error(key, f"must be in {minimum}..{maximum:,}, got {show(value)}")
        return value

    def string(self, key: str, default: str | None = None) -> str:
        value = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"must be a non-empty string, got {show(value)}")
        return value

    def boolean(self, key: str, default: bool | None = None) -> bool:
        value = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {show(value)}")
        return value

    def choice(self, key: str, options: tuple[str, ...], default: str | None = None) -> str:
        value = self.string(key, default)
        if value not in options:
            raise self.error(key, f"must be one of {', '.join(options)}; got {show(value)}"
                             f"{closest(value, options)}")
        return value


def _check_keys(data: Mapping[str, Any], prefix: str, asked: dict[str, set[str]],
                path: str) -> None:
    valid = asked.get(prefix)
    if valid is None:  # a block read whole by its loader
        return
    for key, value in data.items():
        if key == "source":
            continue
        if key not in valid:
            raise SpecError(f"{path}: unknown field '{prefix}{show(key, 40)[1:-1]}'"
                            f"{closest(str(key), valid)}")
        if isinstance(value, dict):
            _check_keys(value, f"{prefix}{key}.", asked, path)


_REQUIRED = object()

"""The one error type specsim raises for bad input, and the range checks of call parameters.

A bad value of a function's parameter is reported under the parameter's name, so that the
message reads right from a notebook (`max_nodes: must be in 1..4,096, got 0`); the error also
carries the name in `parameter`, and the command line shows it as its option
(`option --max-nodes: must be in 1..4,096, got 0`, see `specsim.cli.common.option_text`).
"""

from __future__ import annotations

import math


class SpecError(ValueError):
    """Bad input: a spec, file or argument that specsim cannot use.

    The message is one line that names the file and field (or the parameter) and the offending
    value. `parameter`: the call parameter the message is about (it starts the message as
    "parameter: "), or None when a file or a field is.
    """

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


def parameter_error(parameter: str, problem: str) -> SpecError:
    """A SpecError about one call parameter: 'parameter: problem'."""
    return SpecError(f"{parameter}: {problem}", parameter=parameter)


def check_int(value: int | None, parameter: str, *, low: int, high: int) -> None:
    """An integer parameter in low..high (None: not given, nothing to check)."""
    if value is not None and not low <= value <= high:
        raise parameter_error(parameter, f"must be in {low:,}..{high:,}, got {value:,}")


def check_number(value: float | None, parameter: str, *, low: float, high: float,
                 low_open: bool = False) -> None:
    """A finite parameter in [low, high] (or (low, high]); None: not given."""
    if value is None:
        return
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value > high:
        bracket = "(" if low_open else "["
        raise parameter_error(parameter, f"must be in {bracket}{low:g}, {high:g}], "
                              f"got {value:g}")

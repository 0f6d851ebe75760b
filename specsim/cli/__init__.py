"""The `specsim` command line: thin commands that parse, call the library, and render.

Each command family lives in its own module and registers itself on the shared typer app
(`common.app`) when imported; `main` turns bad input into one line and exit code 2.

The CLI modules leave out `from __future__ import annotations` on purpose: typer builds every
command at each start, and string annotations would make it compile and eval each one again.
"""

import functools
import sys
from typing import Any

import typer

from specsim.cli import (  # noqa: F401  (registers)
    bench,
    distributions,
    forward,
    long_context,
    measurement,
    plan,
    specs,
    speculation,
    validate,
    workloads,
)
from specsim.cli.common import app, option_text, strict_option_types
from specsim.errors import SpecError

__all__ = ["app", "main"]


@functools.cache
def _command() -> Any:
    """The click command typer builds from `app`, built once per process (it takes ~50 ms),
    its options reading the typed text strictly (`strict_option_types`)."""
    return strict_option_types(typer.main.get_command(app))


MAX_MESSAGE_CHARS = 380  # with the "specsim: error: " prefix, under 400


def one_line(message: str) -> str:
    """An error message on one line, cut to MAX_MESSAGE_CHARS (a long value is not the point);
    control characters of a quoted value shown as escapes."""
    from specsim.present.render import terminal_text

    text = terminal_text(" ".join(message.split()), newlines=False)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def main() -> None:
    """Entry point: bad input becomes one line on stderr and a non-zero exit, never a traceback."""
    try:
        code = _command()(standalone_mode=False)
    except SpecError as err:
        typer.echo(f"specsim: error: {one_line(option_text(str(err), err.parameter))}",
                   err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("specsim: interrupted", err=True)
        sys.exit(130)
    except Exception as err:
        # Usage errors of the (vendored) click parser: they know how to phrase themselves.
        format_message = getattr(err, "format_message", None)
        if not callable(format_message):
            raise
        if type(err).__name__ == "NoArgsIsHelpError":  # bare `specsim`: show the help
            typer.echo(format_message())
            sys.exit(0)
        typer.echo(f"specsim: error: {one_line(format_message())}", err=True)
        sys.exit(int(getattr(err, "exit_code", 2) or 2))
    sys.exit(code if isinstance(code, int) else 0)

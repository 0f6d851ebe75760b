"""The one error type specsim raises for bad input."""

from __future__ import annotations


class SpecError(ValueError):
    """Bad input: a spec, file or argument that specsim cannot use.

    The message is one line that names the file and field and the offending value; the CLI
    prints it as is and exits non-zero.
    """

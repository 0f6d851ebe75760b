"""Text tables and JSON for the CLI: rows are dicts of SI-unit-suffixed fields, formatted here.

Everything printed to a terminal goes through `terminal_text`, which shows control characters
as visible escapes: a spec's name or source cannot retitle the window, move the cursor or
rewrite earlier lines.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from specsim.specs.names import CONTROLS

Row = Mapping[str, Any]

# What a terminal acts on rather than shows (specs.names.CONTROLS). Tab and newline stay where
# a caller keeps them (whole outputs), not in cells.
_UNSAFE = re.compile(f"[{CONTROLS}]")
_UNSAFE_IN_LINE = re.compile(f"[{CONTROLS}\t\n]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str, *, newlines: bool = True) -> str:
    """`text` safe to print to a terminal: every control character shown as its escape
    (ESC as \\x1b, a right-to-left override as \\u202e); with `newlines` False (a table cell,
    a value on one line) tab and newline too."""
    return (_UNSAFE if newlines else _UNSAFE_IN_LINE).sub(_visible, text)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value == 0:
            return "0"
        magnitude = abs(value)
        if magnitude >= 1e6 or magnitude < 1e-3:
            return f"{value:.3e}"
        if value.is_integer():
            return f"{int(value):,}"
        if magnitude >= 100:
            return f"{value:,.1f}"
        return f"{value:.4g}"
    return terminal_text(str(value), newlines=False)


def table(rows: Sequence[Row], columns: Sequence[str] | None = None, *, title: str = "") -> str:
    """A plain fixed-width table; numbers right-aligned, text left-aligned."""
    if not rows:
        return f"{title}\n(no rows)" if title else "(no rows)"
    cols = list(columns) if columns else list(rows[0].keys())
    cells = [[_cell(row.get(c, "")) for c in cols] for row in rows]
    numeric = [all(isinstance(row.get(c), int | float) for row in rows) for c in cols]
    heads = [terminal_text(str(c), newlines=False) for c in cols]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(heads)]

    def line(values: Sequence[str]) -> str:
        cells = zip(values, widths, numeric, strict=True)
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in cells]
        return "  ".join(parts).rstrip()

    out = [terminal_text(title)] if title else []
    out += [line(heads), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def to_json(rows: Sequence[Row] | Row) -> str:
    """JSON text for --json: plain numbers, NaN as null."""
    return json.dumps(_plain(rows), indent=2)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def key_values(pairs: Sequence[tuple[str, Any, str]], *, title: str = "") -> str:
    """Field / value / source listing for `show` commands (numbers aligned, text left)."""
    keys = [terminal_text(str(k), newlines=False) for k, _, _ in pairs]
    width = max(len(k) for k in keys)
    numbers = [_cell(v) for _, v, _ in pairs if isinstance(v, int | float)]
    value_width = max((len(c) for c in numbers), default=0)
    out = [terminal_text(title, newlines=False)] if title else []
    for key, (_, value, source) in zip(keys, pairs, strict=True):
        cell = _cell(value)
        cell = cell.rjust(value_width) if isinstance(value, int | float) else cell
        text = f"{key.ljust(width)}  {cell}"
        source = terminal_text(str(source), newlines=False) if source else ""
        out.append(f"{text}  [{source}]" if source else text)
    return "\n".join(out)


def context_text(context: float | tuple[float, ...]) -> str:
    """A context or a mix of contexts as text: '32,768' or '1,024 + 32,768'."""
    values = context if isinstance(context, tuple) else (context,)
    return " + ".join(f"{c:,.0f}" for c in values)


def setup_text(*, model: Any, hardware: Any, context: float | tuple[float, ...] | None = None,
               tp: int = 1, precision: Any = None, drafter: Any = None, acceptance: str = "",
               engine: str = "", ep: int = 1) -> str:
    """The one line every result starts with: what the numbers are for."""
    parts = [f"setup: {model.slug} on {hardware.slug}"]
    if engine:
        parts.append(f"engine {engine}")
    if drafter is not None:
        parts.append(f"drafter {drafter.slug}")
    if context is not None:
        parts.append(f"context {context_text(context)} tokens")
    parts.append(f"TP {tp}" + (f", EP {ep}" if ep > 1 else ""))
    if precision is not None:
        weights = model.weights_text(precision.weight_dtype)
        parts.append(f"weights {weights}, KV {precision.kv_dtype}, "
                     f"compute {precision.compute_dtype}")
    if acceptance:
        from specsim.present.document import without_checkout

        acceptance = without_checkout(acceptance)  # a built-in file as workloads/...
        short = acceptance if len(acceptance) <= 120 else acceptance[:117] + "..."
        parts.append(f"acceptance: {short}")
    return "; ".join(parts)


def setup_line(setup: Any, acceptance: str, *, engine: str = "") -> str:
    """`setup_text` of a speculation Setup."""
    cost = "" if setup.draft_cost is None else f"; draft cost {setup.draft_cost:g} per pass"
    if engine and getattr(setup.engine, "spec_overlap", False):
        engine += " (rounds overlap their host work)"
    return setup_text(model=setup.target, hardware=setup.hardware, context=setup.context,
                      tp=setup.tp, ep=getattr(setup, "ep", 1), precision=setup.precision,
                      drafter=setup.drafter, acceptance=acceptance, engine=engine) + cost

"""A report as a document: blocks (headings, paragraphs, tables, images, code) rendered as
Markdown beside its PNG files, or as one self-contained HTML page (plots inlined as base64 PNG,
no script, no external reference); and a figure drawn to PNG bytes.

Block text is plain text, where `...` marks inline code (both renderers read it so). Text
from specs (a model's name, a source) can hold anything: the Markdown renderer escapes every
character that would make structure (`markdown_text`) and fences code blocks longer than any
backtick run inside, as the HTML renderer escapes for HTML; neither lets such text open a
section, a comment, a link or a code block of its own.
"""

from __future__ import annotations

import base64
import html
import io
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from specsim.specs.names import CONTROLS

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Block:
    """kind: h2, p, table, img, code; text, rows or a file name."""

    kind: str
    text: str = ""
    rows: tuple[Row, ...] = ()


def cell_text(value: Any) -> str:
    """Table cells as the text writes numbers: thousands separators, 3 significant digits."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    if isinstance(value, float | np.floating):
        v = float(value)
        if not np.isfinite(v):
            return "-"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(value)


def without_checkout(text: str) -> str:
    """Sources without this machine's checkout path (`workloads/...`, not `/home/.../...`)."""
    from specsim.specs.paths import builtin_dir

    root = str(builtin_dir("hardware").parent) + "/"
    return text.replace(root, "")


# What a terminal or a renderer acts on rather than shows (specs.names.CONTROLS), tab and
# newline included: spaces in Markdown text.
_CONTROL = re.compile(f"[{CONTROLS}\t\n]")
# Characters that make inline Markdown structure anywhere in a line: backslash escapes, code
# spans, emphasis, links and images, HTML tags and comments ('<!--' becomes '\\<\\!--'),
# autolinks, headings, table cells, entities and GFM strikethrough. CommonMark lets a backslash
# escape each of them.
_SPECIAL = re.compile(r"[\\`*\[\]<>#|~&!]")
# '_' opens or closes emphasis only where it is not between two letters or digits.
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
# What starts a list item at the beginning of a line ('*', '#' and '>' are escaped anyway).
_LIST_MARKER = re.compile(r"^([-+])|^(\d+)([.)])")
# An inline code span of the report's own text: a command, an option or a path (letters,
# digits, spaces and ./_:=,+-<>, as in `specsim plan --out <dir>`). A backtick in a spec's name
# cannot pair with one of these into a span that carries the name's '<!--' or '[...](...)' past
# the escaping: such a "span" is text, escaped like the rest.
_INLINE_CODE = re.compile(r"`([A-Za-z0-9 ./_:=,+<>-]+)`")
# In a code block, the controls but newline and tab.
_CODE_CONTROL = re.compile(f"[{CONTROLS}]")


def markdown_text(text: str, *, line_start: bool = True) -> str:
    """Plain text as Markdown that renders as exactly that text, on one line: control
    characters and newlines become spaces, every character that would make structure is
    backslash-escaped, and (`line_start`: the text begins a line) so is a leading list marker."""
    escaped = _UNDERSCORE.sub(r"\\_", _SPECIAL.sub(lambda m: "\\" + m.group(), text))
    escaped = _CONTROL.sub(" ", escaped)
    if line_start:
        escaped = _LIST_MARKER.sub(lambda m: f"\\{m.group(1)}" if m.group(1)
                                   else f"{m.group(2)}\\{m.group(3)}", escaped.lstrip())
    return escaped


def markdown_paragraph(text: str) -> str:
    """A paragraph's text, `...` spans as inline code (as the HTML page reads them) and the rest
    escaped (markdown_text); on one line."""
    text = _CONTROL.sub(" ", text).strip()
    out, start = [], 0
    for match in _INLINE_CODE.finditer(text):
        out.append(markdown_text(text[start:match.start()], line_start=start == 0))
        out.append(f"`{match.group(1)}`")  # no backtick inside: nothing can close it early
        start = match.end()
    out.append(markdown_text(text[start:], line_start=start == 0))
    return "".join(out)


def markdown_code(text: str) -> list[str]:
    """A fenced code block of `text` (control characters but newline and tab shown as U+FFFD):
    the fence is longer than any backtick run inside, so no line of it can close the block."""
    body = _CODE_CONTROL.sub("\ufffd", text.replace("\r\n", "\n"))
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, body, fence]


def to_markdown(blocks: list[Block], title: str) -> str:
    out = [f"# {markdown_text(title, line_start=False)}", ""]
    for b in blocks:
        if b.kind == "h2":
            out += [f"## {markdown_text(b.text, line_start=False)}", ""]
        elif b.kind == "p":
            out += [markdown_paragraph(b.text), ""]
        elif b.kind == "code":
            out += [*markdown_code(b.text), ""]
        elif b.kind == "img":
            # The file name as a percent-encoded link (no space, parenthesis or bracket left).
            out += [f"![{markdown_text(b.text, line_start=False)}]"
                    f"({urllib.parse.quote(b.text)})", ""]
        elif b.kind == "table" and b.rows:
            keys = list(b.rows[0])
            out.append("| " + " | ".join(markdown_text(str(k), line_start=False) for k in keys)
                       + " |")
            out.append("|" + "".join("---|" if isinstance(b.rows[0][k], str) else "--:|"
                                     for k in keys))
            for r in b.rows:
                out.append("| " + " | ".join(markdown_text(cell_text(r[k]), line_start=False)
                                             for k in keys) + " |")
            out.append("")
    return "\n".join(out)


STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
         "color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}"
         "td,th{border:1px solid #bbb;padding:3px 7px;text-align:right}th{background:#eee}"
         "pre{background:#f4f4f4;padding:.7em;overflow-x:auto;white-space:pre-wrap}"
         "img{max-width:100%}")


def to_html(blocks: list[Block], title: str, images: dict[str, bytes]) -> str:
    """One page, plots inlined as data: URIs; no script, no external reference."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>"]
    for b in blocks:
        if b.kind == "h2":
            out.append(f"<h2>{html.escape(b.text)}</h2>")
        elif b.kind == "p":
            text = _INLINE_CODE.sub(r"<code>\1</code>", html.escape(b.text))
            out.append(f"<p>{text}</p>")
        elif b.kind == "code":
            out.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
        elif b.kind == "img":
            data = base64.b64encode(images[b.text]).decode("ascii")
            out.append(f'<p><img alt="{html.escape(b.text)}" '
                       f'src="data:image/png;base64,{data}"></p>')
        elif b.kind == "table" and b.rows:
            keys = list(b.rows[0])
            out.append("<table><tr>" + "".join(f"<th>{html.escape(k)}</th>" for k in keys)
                       + "</tr>")
            for r in b.rows:
                out.append("<tr>" + "".join(f"<td>{html.escape(cell_text(r[k]))}</td>"
                                            for k in keys) + "</tr>")
            out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


def png_bytes(draw: Callable[[Any], None], size: tuple[float, float] = (7.5, 4.3)) -> bytes:
    """A PNG of one axes drawn by `draw`. The figure is built without pyplot (no figure
    manager to register and close; the same pixels and bytes), rendered by Agg."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=110)
    ax = fig.subplots()
    draw(ax)
    ax.grid(True, which="both", alpha=0.25)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.12, top=0.92)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()

"""A report as a document: blocks (headings, paragraphs, tables, images, code) rendered as
Markdown beside its PNG files, or as one self-contained HTML page (plots inlined as base64 PNG,
no script, no external reference); and a figure drawn to PNG bytes."""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

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
    from specsim.specs.io import builtin_dir

    root = str(builtin_dir("hardware").parent) + "/"
    return text.replace(root, "")


def to_markdown(blocks: list[Block], title: str) -> str:
    out = [f"# {title}", ""]
    for b in blocks:
        if b.kind == "h2":
            out += [f"## {b.text}", ""]
        elif b.kind == "p":
            out += [b.text, ""]
        elif b.kind == "code":
            out += ["```", b.text, "```", ""]
        elif b.kind == "img":
            out += [f"![{b.text}]({b.text})", ""]
        elif b.kind == "table" and b.rows:
            keys = list(b.rows[0])
            out.append("| " + " | ".join(keys) + " |")
            out.append("|" + "".join("---|" if isinstance(b.rows[0][k], str) else "--:|"
                                     for k in keys))
            for r in b.rows:
                out.append("| " + " | ".join(cell_text(r[k]).replace("|", "\\|") for k in keys)
                           + " |")
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
            text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(b.text))
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size, dpi=110)
    try:
        draw(ax)
        ax.grid(True, which="both", alpha=0.25)
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.12, top=0.92)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return buf.getvalue()

"""The capacity-planning report of `specsim plan`: report.md, report.html, PNG plots, CSV tables.

The report is a list of blocks (`present.document`) that its sections fill, rendered as
Markdown next to its PNG and CSV files and as one self-contained HTML page. This module holds
the section order and titles, assembles the blocks and files, and writes the folder; the
sections themselves live in `report_answer` (the answer and the SLO), `report_hardware` (T(n),
memory), `report_speculation` (speedup, recommendation, Pareto, policies), `report_commands`
and `report_assumptions`.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from specsim.errors import SpecError
from specsim.present.document import Block, Row, to_html, to_markdown
from specsim.present.report_answer import section_answer, section_slo
from specsim.present.report_assumptions import section_assumptions
from specsim.present.report_commands import section_commands
from specsim.present.report_hardware import section_memory, section_tn
from specsim.present.report_speculation import (
    section_pareto,
    section_policies,
    section_recommend,
    section_speedup,
)
from specsim.serving.plan import Plan
from specsim.specs.outputs import OutputFolder

SECTIONS = (
    "Answer", "Forward-pass time T(n) and its knee", "Memory and maximum concurrency",
    "Speedup against drafted nodes", "Recommended chain or tree per batch size",
    "Tokens/s per user against throughput per GPU", "At the SLO: setting and GPU count",
    "Batch-level policies under load", "Engine commands", "Assumptions, sources and error",
)


SECTION_BUILDERS = (section_answer, section_tn, section_memory, section_speedup,
                    section_recommend, section_pareto, section_slo, section_policies,
                    section_commands, section_assumptions)


def build_report(plan: Plan) -> tuple[list[Block], dict[str, bytes]]:
    """The report's blocks and its PNG plots and CSV tables by file name (nothing written)."""
    blocks: list[Block] = []
    files: dict[str, bytes] = {}

    def keep(name: str, data: bytes) -> None:
        if name in files:  # a second plot or table of one name would silently replace the first
            raise SpecError(f"report: two files named {name!r}")
        files[name] = data

    def add(kind: str, text: str = "", *, rows: list[Row] | None = None, csv: str = "",
            png: bytes | None = None) -> None:
        if kind == "img":
            assert png is not None
            keep(text, png)
        if kind == "table" and rows and csv:
            keep(csv, _csv_bytes(rows))
        blocks.append(Block(kind, text, tuple(rows or ())))

    for title, builder in zip(SECTIONS, SECTION_BUILDERS, strict=True):
        blocks.append(Block("h2", title))
        builder(plan, add)
    return blocks, files


def _csv_bytes(rows: list[Row]) -> bytes:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=keys)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def render_report(plan: Plan) -> dict[str, bytes]:
    """Every file of the report by name: report.md, report.html, the PNGs and the CSVs."""
    blocks, files = build_report(plan)
    for c in (*plan.answer_commands, *(c for d in plan.drafters for c in d.commands)):
        for name, text in c.files:  # the files the report's commands read, by their names
            data = text.encode("utf-8")
            if files.setdefault(name, data) != data:
                raise SpecError(f"report: two files named {name!r}")
    images = {name: data for name, data in files.items() if name.endswith(".png")}
    title = f"Capacity plan: {plan.model.name} on {plan.hardware.name}, {plan.scenario.name}"
    return {"report.md": to_markdown(blocks, title).encode("utf-8"),
            "report.html": to_html(blocks, title, images).encode("utf-8"), **files}


def write_report(plan: Plan, out: Path, *, force: bool = False) -> list[Path]:
    """Write report.md, report.html, the PNGs and CSVs as the folder `out`, whole: rendered
    first, then written into a fresh folder beside `out` that one rename puts in place (see
    `OutputFolder`: locked, never through a symbolic link, the old report kept on any error).
    An existing non-empty folder is refused without `force` and replaced whole with it (no
    file of the old report is left). Returns the files written."""
    with OutputFolder(out, force=force) as folder:
        return folder.publish(render_report(plan))

"""The round-structure comparison of `recommend` as rows and lines (no computation)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from specsim.present.render import table
from specsim.speculation.structure_results import WIN_TOLERANCE

if TYPE_CHECKING:
    from specsim.speculation.structure_results import StructureChoice, StructureComparison

Row = dict[str, Any]

# How each structure is named where it is printed.
LABELS = {"single": "single round", "multistage": "multi-stage (DLoop)",
          "overlap": "overlapped drafting (PEARL)", "adaptive_stop": "adaptive stop (SpecDec++)"}
SHORT = {"single": "single", "multistage": "multi-stage", "overlap": "overlap",
         "adaptive_stop": "adaptive stop"}


def structure_rows(c: StructureComparison) -> list[Row]:
    """One row per (batch, structure): its best setting, its speedup, and its gain over the
    best single round at that batch (vs_single_pct); run_by names the engines that run it."""
    single = {r.batch: r.speedup for r in c.rows if r.structure == "single"}
    return [{"batch": r.batch, "structure": r.structure, "gamma": r.gamma, "stages": r.stages,
             "threshold": None if math.isnan(r.threshold) else r.threshold, "tau": r.tau,
             "drafted": r.drafted, "round_ms": r.round_s * 1e3, "speedup": r.speedup,
             "vs_single_pct": 100.0 * (r.speedup / single[r.batch] - 1.0),
             "fits": r.fits, "run_by": c.runs.get(r.structure, "")} for r in c.rows]


def setting_text(r: StructureChoice, head_concentration: float) -> str:
    """The setting of one row, short: 'chain 5', '4x6' (k stages of g), 'up to 4x6 h 0.6'
    (stages while confident), 'cap 8 h 0.3' (a head that knows each outcome stops at the
    first rejection whatever h below 1)."""
    if r.structure == "multistage":
        stages = f"{r.stages}x{r.gamma}"
        if r.stages == 1 or r.threshold >= 1.0:
            return stages
        return f"up to {stages} h {r.threshold:.1f}"
    if r.structure == "adaptive_stop":
        if r.threshold >= 1.0:
            return f"cap {r.gamma} no stop"
        if head_concentration == 0.0:
            return f"cap {r.gamma} first rejection"
        return f"cap {r.gamma} h {r.threshold:.1f}"
    return f"chain {r.gamma}"


def structure_lines(c: StructureComparison) -> list[str]:
    """What `recommend` prints under its commands: per batch, each structure's best setting
    and speedup and which wins by how much over the single round (a table); which engines run
    each; the assumptions of the bounds."""
    single = {r.batch: r for r in c.rows if r.structure == "single"}
    shown = [s for s in LABELS if any(r.structure == s for r in c.rows)]
    rows = []
    for best in c.best():
        row: Row = {"batch": best.batch}
        for r in (r for r in c.rows if r.batch == best.batch):
            row[LABELS[r.structure]] = (f"{r.speedup:.2f}x {setting_text(r, c.head_concentration)}"
                                        if r.fits else "-")
        base = single[best.batch].speedup
        row["wins"] = ("does not fit" if not best.fits else
                       "single round" if best.structure == "single" else
                       f"{SHORT[best.structure]} {100 * (best.speedup / base - 1):+.1f}%")
        rows.append(row)
    title = ("round structures over chains (specsim's model): speedup over plain decoding "
             f"and setting of each; one wins only by more than {WIN_TOLERANCE:.1%}")
    lines = [title, *("  " + line for line in
                      table(rows, ["batch", *(LABELS[s] for s in shown), "wins"]).splitlines())]
    beyond = [s for s in shown if s != "single"]
    idle = [LABELS[s] for s in beyond if not c.runs.get(s)]
    if idle:
        lines.append(f"  {', '.join(idle)}: no engine runs "
                     f"{'it' if len(idle) == 1 else 'them'} "
                     "(engines/*.yaml speculative.round_structures)")
    lines += [f"  {LABELS[s]}: runs on {c.runs[s]}" for s in beyond if c.runs.get(s)]
    if "multistage" in shown:
        lines.append(f"  multi-stage: each further stage's acceptance x{c.stage_acceptance:g} "
                     "(--stage-acceptance; 1 is the bound of a drafter as good on its own "
                     "states as on the target's)")
    if "overlap" in shown:
        where = ("on the target's GPU, sharing its HBM and SMs" if c.device == "same"
                 else "on a GPU of its own")
        lines.append(f"  overlapped drafting: the drafter runs {where} (--overlap-device)")
    if "adaptive_stop" in shown:
        head = ("knows each token's outcome, the bound" if c.head_concentration == 0.0
                else f"predicts per-token acceptance with Beta concentration "
                f"{c.head_concentration:g}" + (" (SpecDec++'s, fitted to its published gain)"
                                               if c.specdec_head else ""))
        lines.append(f"  adaptive stop: the acceptance head {head} (--head-concentration)")
    return lines

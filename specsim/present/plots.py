"""Figures (matplotlib, headless): the edge where results become pictures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from specsim.errors import SpecError
from specsim.speculation.speedup import SpeedupTable

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _save(fig: Figure, path: Path) -> None:
    """Write a figure (format from the suffix: png, pdf, svg) all or nothing, and free it."""
    import io

    import matplotlib.pyplot as plt

    from specsim.specs.io import atomic_write_bytes, make_parent

    buffer = io.BytesIO()
    try:
        fig.tight_layout()
        fig.savefig(buffer, format=path.suffix.lstrip(".").lower() or "png")
    finally:
        plt.close(fig)
    make_parent(path)
    atomic_write_bytes(path, buffer.getvalue())


def speedup_figure(table: SpeedupTable, path: Path, *, title: str) -> None:
    """Speedup versus drafted nodes per request, one curve per batch size, best marked.

    The article's tree figure: each curve rises while verification stays memory-bound and
    falls once B (N + 1) passes the knee of T(n); a dot marks the best N for each batch size.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    nodes = table.candidates.nodes
    best = table.best("speedup")
    for i, b in enumerate(table.batch):
        # For each N keep the best candidate (depth caps give several per N).
        speedup = table.speedup[i]
        n_unique = np.unique(nodes)
        curve = np.array([speedup[nodes == n].max() for n in n_unique])
        (line,) = ax.plot(np.maximum(n_unique, 0.8), curve, lw=1.6, label=f"B = {int(b)}")
        k = best[i]
        ax.plot(max(nodes[k], 0.8), speedup[k], "o", color=line.get_color(), ms=7)
        ax.annotate(f"{int(nodes[k])}", (max(nodes[k], 0.8), speedup[k]),
                    textcoords="offset points", xytext=(4, 6), fontsize=8,
                    color=line.get_color())
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("drafted nodes per request N (N = 0 plotted at 0.8)")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    _save(fig, path)


def calibration_figure(points: pd.DataFrame, path: Path, *, title: str, max_models: int = 3
                       ) -> None:
    """Summed GEMM time per layer versus tokens: measured, datasheet roofline, calibrated.

    One panel per model (held-out models first), smallest TP degree; log-log axes so the flat
    memory-bound part, the knee and the compute-bound slope are all visible.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from specsim.measurement.calibrate import layer_sums

    sums = layer_sums(points)
    if sums.empty:
        raise SpecError("no GEMM points to plot")
    order = sums.groupby("model")["split"].first().sort_values(ascending=True)  # holdout first
    models = list(order.index[:max_models])
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.8), dpi=120,
                             squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        rows = sums[sums["model"] == model]
        rows = rows[rows["tp"] == rows["tp"].min()].sort_values("m")
        m = rows["m"].to_numpy(float)
        ax.plot(m, rows["time_s"] * 1e3, ".", ms=3, color="0.2", label="measured")
        ax.plot(m, rows["datasheet_s"] * 1e3, "--", color="tab:red", label="datasheet roofline")
        ax.plot(m, rows["predicted_s"] * 1e3, "-", color="tab:blue", label="calibrated")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        split = rows["split"].iloc[0]
        ax.set_title(f"{model} (TP {int(rows['tp'].iloc[0])}, {split})", fontsize=8)
        ax.set_xlabel("tokens in the pass n")
        ax.grid(True, which="both", alpha=0.25)
    axes[0][0].set_ylabel("weight-GEMM time per layer (ms)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    _save(fig, path)


def validation_figure(rows: list[dict[str, Any]], path: Path) -> None:
    """Predicted against measured: speedups (left), tokens/s (right), one marker per family."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.8))
    panels = ((axes[0], [r for r in rows if r["metric"] == "speedup"], "speedup"),
              (axes[1], [r for r in rows if r["metric"] != "speedup"], "tokens/s"))
    for ax, members, unit in panels:
        for fam in sorted({r["family"] for r in members}):
            pts = [r for r in members if r["family"] == fam]
            ax.scatter([r["measured"] for r in pts], [r["predicted"] for r in pts], label=fam,
                       s=18)
        values = [r["measured"] for r in members] + [r["predicted"] for r in members]
        top = max(values + [1.0]) * 1.05
        ax.plot([0, top], [0, top], color="grey", lw=0.8)
        ax.set_xlabel(f"measured {unit}")
        ax.set_ylabel(f"predicted {unit} (held out)")
        if members:
            ax.legend(fontsize=7)
    _save(fig, path)

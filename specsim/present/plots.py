"""Figures (matplotlib, headless): the edge where results become pictures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from specsim.errors import SpecError
from specsim.speculation.speedup import SpeedupCurves

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _save(fig: Figure, path: Path) -> None:
    """Write a figure (format from the suffix: png, pdf, svg) all or nothing, and free it."""
    import io

    import matplotlib.pyplot as plt

    from specsim.specs.outputs import atomic_write_bytes, make_parent

    buffer = io.BytesIO()
    try:
        fig.tight_layout()
        fig.savefig(buffer, format=path.suffix.lstrip(".").lower() or "png")
    finally:
        plt.close(fig)
    make_parent(path)
    atomic_write_bytes(path, buffer.getvalue())


def speedup_figure(curves: SpeedupCurves, path: Path, *, title: str) -> None:
    """Speedup versus drafted nodes per request, one curve per batch size, best marked.

    The article's tree figure (`curves`: `speculation.speedup.speedup_curves`): each curve
    rises while verification stays memory-bound and falls once B (N + 1) passes the knee of
    T(n); a dot marks the best N for each batch size, and the legend (outside the axes, so it
    covers no curve) gives it, so no label can overlap another. Batch sizes whose caches do not
    fit in memory are drawn dotted and grey and say so.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.0, 4.6), dpi=120)
    x = np.maximum(curves.nodes, 0.8)
    for i, b in enumerate(curves.batch):
        curve = curves.speedup[i]
        if not curves.fits[i]:
            ax.plot(x, curve, ls=":", lw=1.2, color="0.6",
                    label=f"B = {int(b)}: does not fit in memory")
            continue
        best_n, best = curves.best_nodes[i], curves.best_speedup[i]
        (line,) = ax.plot(x, curve, lw=1.6,
                          label=f"B = {int(b)}: best N = {int(best_n)}, {best:.2f}x")
        ax.plot(max(best_n, 0.8), best, "o", color=line.get_color(), ms=6)
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("drafted nodes per request N (N = 0 plotted at 0.8)")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              title="batch size", title_fontsize=8)
    _save(fig, path)


def calibration_figure(sums: pd.DataFrame, path: Path, *, title: str,
                       max_models: int | None = None, columns: int = 4) -> None:
    """Summed GEMM time per layer versus tokens: measured, datasheet roofline, calibrated
    (`sums`: `Calibration.layer_sums`).

    One panel per model (every model unless `max_models`; held-out models first), smallest TP
    degree, `columns` panels per row; log-log axes so the flat memory-bound part, the knee and
    the compute-bound slope are all visible.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if sums.empty:
        raise SpecError("no GEMM points to plot")
    order = sums.groupby("model")["split"].first().sort_values(ascending=True)  # holdout first
    models = list(order.index[:max_models])
    cols = min(columns, len(models))
    rows_n = -(-len(models) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(3.6 * cols, 3.2 * rows_n + 0.5), dpi=120,
                             squeeze=False)
    for ax in axes.flat[len(models):]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models, strict=False):
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
    for row in axes:
        row[0].set_ylabel("weight-GEMM time per layer (ms)", fontsize=8)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=9)
    _save(fig, path)


def validation_figure(rows: list[dict[str, Any]], medians_pct: dict[str, float],
                      path: Path) -> None:
    """Predicted against measured: speedups (left), tokens/s (middle), speedup ratios (right:
    a batch sweep's speedup over its reference batch, or one method over another at the same
    batch), one marker per family. Each panel names its row
    count and median |error| (`medians_pct`: validate's error_summary by "panel", in percent,
    "all" for the title); speedup rows predicted on the other side of 1 are circled."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2))
    # A measured TPOT (ms per token of one request) is drawn as that request's tokens/s.
    rates = [r if r["metric"] != "plain_tpot_ms" else
             {**r, "measured": 1e3 / r["measured"], "predicted": 1e3 / r["predicted"]}
             for r in rows if "tokens_per_s" in r["metric"] or r["metric"] == "plain_tpot_ms"]
    panels = ((axes[0], [r for r in rows if r["metric"] == "speedup"], "speedup", "speedup"),
              (axes[1], rates, "tokens/s", "tokens/s"),
              (axes[2], [r for r in rows if r["metric"] in ("relative_speedup",
                                                           "speedup_versus")],
               "speedup ratio", "relative_speedup"))
    wrong = [r for r in rows if r.get("wrong_sign")]
    # One colour per family across the three panels.
    palette = plt.get_cmap("tab10")
    colour = {fam: palette(i % 10) for i, fam in enumerate(sorted({r["family"] for r in rows}))}
    for ax, members, unit, panel in panels:
        for fam in sorted({r["family"] for r in members}):
            pts = [r for r in members if r["family"] == fam]
            ax.scatter([r["measured"] for r in pts], [r["predicted"] for r in pts], label=fam,
                       s=18, color=colour[fam])
        values = [r["measured"] for r in members] + [r["predicted"] for r in members]
        top = max(values + [1.0]) * 1.05
        if unit in ("tokens/s", "speedup") and values:
            # log axes: one GPU at batch 1 to a B200 at 32; speedups from 0.6x to 8x
            low = min(values) / 1.3
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.plot([low, top], [low, top], color="grey", lw=0.8)
            if unit == "speedup":
                ticks = [t for t in (0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8) if low <= t <= top]
                for axis in (ax.xaxis, ax.yaxis):
                    axis.set_major_locator(FixedLocator(ticks))
                    axis.set_major_formatter(FixedFormatter([f"{t:g}x" for t in ticks]))
                    axis.set_minor_locator(NullLocator())
        else:
            ax.plot([0, top], [0, top], color="grey", lw=0.8)
        if unit == "speedup":  # no gain below 1: a point across either line has the wrong sign
            ax.axhline(1.0, color="grey", lw=0.6, ls=":")
            ax.axvline(1.0, color="grey", lw=0.6, ls=":")
            if wrong:
                ax.scatter([r["measured"] for r in wrong], [r["predicted"] for r in wrong],
                           s=110, facecolors="none", edgecolors="red", linewidths=1.2,
                           label=f"wrong sign ({len(wrong)})")
        ax.set_xlabel(f"measured {unit}")
        ax.set_ylabel(f"predicted {unit} (held out)")
        if members:
            ax.set_title(f"{len(members)} rows, median |error| "
                         f"{medians_pct[f'panel={panel}']:.1f}%", fontsize=10)
            ax.legend(fontsize=7)
    fig.suptitle(f"specsim validate: {len(rows)} published rows predicted, each with the engine "
                 f"terms fitted on the other sources; median |error| "
                 f"{medians_pct.get('all', 0.0):.1f}%, {len(wrong)} with the wrong sign",
                 fontsize=11)
    _save(fig, path)

"""Figures (matplotlib, headless): the edge where results become pictures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from specsim.errors import SpecError
from specsim.serving.policies import ADAPTIVE, BEST_FIXED, NONE, PolicySweep
from specsim.speculation.speedup import SpeedupCurves

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _save(fig: Figure, path: Path) -> None:
    """Write a figure (format from the suffix: png, pdf, svg) all or nothing, and free it."""
    from specsim.specs.outputs import atomic_write_bytes, make_parent

    data = _bytes(fig, path.suffix.lstrip(".").lower() or "png")
    make_parent(path)
    atomic_write_bytes(path, data)


def _bytes(fig: Figure, fmt: str = "png", *, laid_out: bool = False) -> bytes:
    """A figure laid out tightly (legends outside the axes included) as bytes, and freed;
    laid_out: the figure placed its axes itself (no tight layout pass)."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        if fig.get_layout_engine() is None and not laid_out:  # else its own layout
            fig.tight_layout()
        fig.savefig(buffer, format=fmt)
    finally:
        plt.close(fig)
    return buffer.getvalue()


# One style per batch size, in the order curves are drawn (smallest batch first): the colour
# names the batch size; each later curve is thinner, with a smaller marker of another shape,
# so a curve lying on an earlier one shows inside it rather than hiding it.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
_WIDTHS_PT = (4.2, 3.0, 2.1, 1.5, 1.2, 1.0, 0.9, 0.8)
_MARKER_PT = (9.0, 6.5, 5.0, 4.0, 3.5, 3.0, 3.0, 3.0)
_MARKED_PT = (18.0, 13.0, 10.0, 9.0, 8.5, 8.0, 8.0, 8.0)  # a batch size's marked setting


def _batch_style(k: int) -> dict[str, Any]:
    """Colour, marker, line width and marker sizes (points) of the k-th batch size drawn."""
    import matplotlib.pyplot as plt

    last = len(_MARKERS) - 1
    return {"color": plt.get_cmap("tab10")(k % 10), "marker": _MARKERS[k % len(_MARKERS)],
            "lw": _WIDTHS_PT[min(k, last)], "ms": _MARKER_PT[min(k, last)],
            "marked_ms": _MARKED_PT[min(k, last)]}


def _sparse_marks(values: ArrayLike, per_axis: int = 24) -> list[int]:
    """Indices of points at least 1/per_axis of the log2 span apart (the first always), so a
    dense sweep (1,000 node counts) still shows separate markers, at the same x per curve."""
    x = np.asarray(values, dtype=np.float64)
    logs = np.log2(x)
    step = (logs[-1] - logs[0]) / per_axis if x.size > 1 else 0.0
    kept = [0]
    for i in range(1, x.size):
        if logs[i] - logs[kept[-1]] >= step - 1e-12:
            kept.append(i)
    return kept


def _speedup_fig(curves: SpeedupCurves, *, title: str, bound: SpeedupCurves | None,
                 marked: ArrayLike | None, marked_as: str) -> Figure:
    """The speedup-versus-nodes figure (see `speedup_figure`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if bound is not None and bound.batch.shape != curves.batch.shape:
        raise SpecError("the bound's batch sizes differ from the curves'")
    points = (np.column_stack([curves.best_nodes, curves.best_speedup]) if marked is None
              else np.asarray(marked, dtype=np.float64).reshape(-1, 2))
    if points.shape[0] != curves.batch.size:
        raise SpecError(f"{points.shape[0]} marked points for {curves.batch.size} batch sizes")
    fig, ax = plt.subplots(figsize=(9.4, 4.8), dpi=110)
    marks = _sparse_marks(np.maximum(curves.nodes, 0.8))
    for k, b in enumerate(curves.batch):
        st = _batch_style(k)
        x = np.maximum(curves.nodes, 0.8)
        if not curves.fits[k]:
            ax.plot(x, curves.speedup[k], color=st["color"], lw=1.0, alpha=0.4, zorder=2,
                    label=f"B = {int(b)}: does not fit in memory")
            continue
        if bound is not None:
            ax.plot(np.maximum(bound.nodes, 0.8), bound.speedup[k], ls=(0, (4, 2)),
                    color=st["color"], lw=max(0.8, 0.6 * st["lw"]), alpha=0.85, zorder=2)
        n, speedup = points[k]
        ax.plot(x, curves.speedup[k], "-", marker=st["marker"], color=st["color"],
                lw=st["lw"], ms=st["ms"], mfc="white", mew=1.2, zorder=3 + k, markevery=marks,
                label=f"B = {int(b)}: N = {int(n)}, {speedup:.2f}x")
        ax.plot(max(n, 0.8), speedup, st["marker"], color=st["color"], ms=st["marked_ms"],
                mec="black", mew=0.9, zorder=20 + k)
    ax.axhline(1.0, color="0.45", lw=0.9, ls=":", zorder=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("drafted nodes per request N (N = 0 plotted at 0.8)")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    handles, _ = ax.get_legend_handles_labels()
    keys = [Line2D([], [], color="0.3", marker="o", ls="", ms=9, mec="black", mew=0.9,
                   label=marked_as)]
    if bound is not None:  # solid: what the engines build, against the dashed bound
        keys[:0] = [Line2D([], [], color="0.3", lw=1.6, label="what the engines build"),
                    Line2D([], [], color="0.3", lw=1.2, ls=(0, (4, 2)),
                           label="bound: best tree of any shape\n(no engine builds it)")]
    keys.append(Line2D([], [], color="0.45", lw=0.9, ls=":", label="plain decoding (1x)"))
    ax.legend(handles=[*handles, *keys], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              title=f"batch size B: {marked_as} N, speedup", title_fontsize=8)
    # Placed by hand, the legend in the right 27% (2.5 in, its longest label about 2.1 in): a
    # tight-layout pass drew the figure once more, a tenth of a plan's time over its drafters.
    fig.subplots_adjust(left=0.075, right=0.73, bottom=0.11, top=0.89)
    return fig


def speedup_figure(curves: SpeedupCurves, path: Path, *, title: str,
                   bound: SpeedupCurves | None = None,
                   marked: ArrayLike | None = None,
                   marked_as: str = "best") -> None:
    """Speedup versus drafted nodes per request, one curve per batch size, best marked.

    The article's tree figure (`curves`: `speculation.speedup.speedup_curves`): each curve
    rises while verification stays memory-bound and falls once B (N + 1) passes the knee of
    T(n). The colour names the batch size, nothing else; solid lines are the engine's
    candidates, dashed the `bound` (same batch sizes) where given. Curves are drawn smallest
    batch first, each later one thinner with a smaller hollow marker of another shape, so
    coinciding curves (B = 1 and B = 4 while verification is memory-bound) both show. A
    black-edged marker is each batch size's `marked` (batch, 2) nodes and speedup (default:
    its best),
    also given in the legend, which sits outside the axes and so covers no curve. Batch sizes
    whose caches do not fit in memory are drawn faint and say so.
    """
    fig = _speedup_fig(curves, title=title, bound=bound, marked=marked, marked_as=marked_as)
    from specsim.specs.outputs import atomic_write_bytes, make_parent

    data = _bytes(fig, path.suffix.lstrip(".").lower() or "png", laid_out=True)
    make_parent(path)
    atomic_write_bytes(path, data)


def speedup_png(curves: SpeedupCurves, *, title: str, bound: SpeedupCurves | None = None,
                marked: ArrayLike | None = None,
                marked_as: str = "best") -> bytes:
    """`speedup_figure` as PNG bytes (the report's speedup figure per drafter)."""
    return _bytes(_speedup_fig(curves, title=title, bound=bound, marked=marked,
                               marked_as=marked_as), laid_out=True)


def _policy_style(name: str, colour: Any) -> dict[str, Any]:
    """How a policy's curve is drawn: plain decoding black, the per-load best fixed chain a
    wide grey band, adaptive policies solid with hollow markers, fixed settings dashed."""
    if name == NONE:
        return {"color": "black", "lw": 1.2, "zorder": 4, "label": "none (plain decoding)"}
    if name == BEST_FIXED:
        return {"color": "0.55", "lw": 7.0, "alpha": 0.45, "solid_capstyle": "round",
                "zorder": 2, "label": name}
    if name in ADAPTIVE:
        first = name == ADAPTIVE[0]
        return {"color": colour, "lw": 1.8, "marker": "o" if first else "s",
                "ms": 6.5 if first else 4.5, "mfc": "white", "mew": 1.2, "zorder": 5,
                "label": name}
    return {"color": colour, "lw": 1.3, "ls": (0, (5, 2)), "zorder": 3, "label": name}


def _plain_log_ticks(ax: Any) -> None:
    """Log y axis labelled in plain numbers: 1, 2, 3, 5 of every decade."""
    from matplotlib.ticker import FormatStrFormatter, FuncFormatter

    def minor(value: float, _: int) -> str:
        lead = round(value / 10 ** np.floor(np.log10(value)))
        return f"{value:g}" if lead in (2, 3, 5) else ""

    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def policies_png(sweep: PolicySweep, *, title: str) -> bytes:
    """Each policy's throughput against load, as PNG bytes: over plain decoding's (left) and,
    for the adaptive policies, over the per-load best fixed chain's (right).

    The colour names the policy in both panels; fixed settings are dashed, adaptive ones solid
    with markers, plain decoding black, and the per-load best fixed chain a wide grey band:
    the yardstick the adaptive policies are read against. The legend sits outside the axes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12.0, 4.6), dpi=110, layout="constrained",
                                      gridspec_kw={"width_ratios": (3, 2)})
    palette = iter(plt.get_cmap("tab10")(k % 10) for k in range(len(sweep.policies)))
    styles = [_policy_style(name, None if name in (NONE, BEST_FIXED) else next(palette))
              for name in sweep.policies]
    shown = [j for j, name in enumerate(sweep.policies) if name in (BEST_FIXED, *ADAPTIVE)]
    panels = ((left, sweep.relative_to_none(), range(len(sweep.policies)),
               "throughput / plain decoding", "every policy over plain decoding"),
              (right, sweep.relative_to(BEST_FIXED), shown,
               "throughput / best fixed chain at that load",
               "adaptive policies over the best fixed chain"))
    for ax, ratios, rows, ylabel, heading in panels:
        for j in rows:
            ax.plot(sweep.batch, ratios[j], **styles[j])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("load: concurrent requests in the batch")
        ax.set_ylabel(ylabel)
        ax.set_title(heading, fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
    left.set_yscale("log")  # from 0.2x to 6x; the right panel stays within a few tens of %
    _plain_log_ticks(left)
    fig.suptitle(title, fontsize=9)
    fig.legend(*left.get_legend_handles_labels(), loc="outside right upper", fontsize=8,
               title="policy", title_fontsize=8)
    return _bytes(fig)


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
    count and median |error| (`medians_pct`: `validate_summary.error_summary` by "panel", in
    percent, "all" for the title); speedup rows predicted on the other side of 1 are circled."""
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

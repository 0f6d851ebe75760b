"""The long-context sweep as rows and as a figure (speedup against context per cache kind)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from specsim.present.plots import _batch_style, _save
from specsim.speculation.long_context import ContextSweep


def context_rows(sweep: ContextSweep) -> list[dict[str, Any]]:
    """One row per (batch, context): the best chain and its speedup (none where the batch does
    not fit), and both caches per request in GB."""
    nan = float("nan")
    return [{"drafter": sweep.drafter, "cache": sweep.cache_kind, "batch": float(b),
             "context": float(c), "gamma": float(sweep.gamma[i, j]),
             "speedup": float(sweep.speedup[i, j]) if sweep.fits[i, j] else nan,
             "drafter_cache_gb_per_request": float(sweep.drafter_bytes[j]) / 1e9,
             "target_cache_gb_per_request": float(sweep.target_bytes[j]) / 1e9,
             "fits": bool(sweep.fits[i, j])}
            for i, b in enumerate(sweep.batch) for j, c in enumerate(sweep.contexts)]


def context_figure(sweeps: list[ContextSweep], path: Path, *, title: str) -> None:
    """One panel per drafter (its cache kind in the title): the best chain's speedup against
    cached tokens per request, a curve per batch size; settings that do not fit in memory are
    left out (the curve stops), and the line at 1 is plain decoding."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sweeps), figsize=(4.6 * len(sweeps), 4.2), sharey=True,
                             squeeze=False)
    top = max(float(np.nanmax(np.where(s.fits, s.speedup, np.nan), initial=1.0))
              for s in sweeps)
    for ax, sweep in zip(axes[0], sweeps, strict=True):
        for k, b in enumerate(sweep.batch):
            shown = np.where(sweep.fits[k], sweep.speedup[k], np.nan)
            style = _batch_style(k)
            ax.plot(sweep.contexts, shown, color=style["color"], marker=style["marker"],
                    lw=min(style["lw"], 2.4), ms=min(style["ms"], 7.0), label=f"batch {b:g}")
        ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sweep.contexts, [f"{c / 1024:g}k" for c in sweep.contexts], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("cached tokens per request")
        ax.set_title(f"{sweep.slug}\ncache: {sweep.cache_kind}", fontsize=9)
        ax.set_ylim(0.0, top * 1.1)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup over plain decoding (best chain)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    fig.suptitle(title, fontsize=10)
    _save(fig, path)

"""Figures of acceptance from distributions: the objectives toy and the position weights."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from specsim.present.plots import _save
from specsim.speculation.objectives import GaussianFit

FloatArray = npt.NDArray[np.float64]

LABELS = {"forward_kl": "forward KL(p||q)", "reverse_kl": "reverse KL(q||p)",
          "tv": "TV (alpha-optimal)", "lk_likelihood": "LK: -log alpha",
          "lk_hybrid": "LK hybrid"}


def objectives_figure(grid: FloatArray, target: FloatArray, fits: Sequence[GaussianFit],
                      drafters: FloatArray, path: Path, *, title: str) -> None:
    """One panel per objective: the target, the fitted Gaussian drafter (`drafters`: one row
    per fit, `speculation.objectives.fitted_drafters`) and their overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(fits), 3)
    rows = -(-len(fits) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 2.9 * rows), dpi=120,
                             sharex=True, sharey=True, squeeze=False)
    for ax, fit, q in zip(axes.ravel(), fits, drafters, strict=False):
        ax.fill_between(grid, np.minimum(target, q), color="tab:green", alpha=0.35,
                        lw=0, label="overlap alpha")
        ax.plot(grid, target, color="tab:orange", lw=1.4, label="target p")
        ax.plot(grid, q, color="tab:blue", lw=1.4, label="drafter q")
        ax.set_title(f"{LABELS.get(fit.objective, fit.objective)}: alpha = {fit.alpha:.1%}\n"
                     f"mu = {fit.mu:.2f}, sigma = {fit.sigma:.2f}", fontsize=8)
        ax.grid(True, alpha=0.25)
    for ax in axes.ravel()[len(fits):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("token position")
    for ax in axes[:, 0]:
        ax.set_ylabel("probability")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=9)
    _save(fig, path)


def weights_figure(weights: FloatArray, schedule: FloatArray, path: Path, *, title: str,
                   schedule_label: str) -> None:
    """Bars: d tau / d alpha_k normalized to position 1; dashed: a fixed loss schedule."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = np.arange(1, weights.size + 1)
    fig, ax = plt.subplots(figsize=(7.0, 4.0), dpi=120)
    ax.bar(k, weights, color="tab:blue", alpha=0.75, label="tau's weight d tau / d alpha_k")
    ax.plot(k, schedule, "--", color="tab:red", lw=1.6, marker=".", label=schedule_label)
    ax.set_xticks(k)
    ax.set_xlabel("draft position k")
    ax.set_ylabel("weight (position 1 = 1)")
    ax.set_ylim(0.0, 1.05 * max(float(weights.max()), float(schedule.max())))
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.25)
    ax.legend(fontsize=8)
    _save(fig, path)

"""Distances between a target's and a drafter's next-token distributions, each written once.

p and q are probability vectors along the last axis (any leading shape broadcasts). Nothing is
validated here (callers that take user input validate first, e.g.
`specsim.speculation.verification`), so the same formulas also serve weighted, unnormalized
vectors such as block verification's m p and r q.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

__all__ = ["overlap", "total_variation"]


def overlap(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """sum_x min(p(x), q(x)) over the last axis, shape (...).

    For distributions this is the acceptance rate of speculative sampling (Leviathan et al. 2023:
    alpha = E_{x~q} min(1, p(x)/q(x)) = sum_x min(p(x), q(x)) = 1 - TV(p, q)).
    """
    return np.asarray(np.minimum(p, q).sum(axis=-1), dtype=np.float64)


def total_variation(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """Total variation distance TV(p, q) = 1/2 sum_x |p(x) - q(x)| over the last axis, (...)."""
    diff = np.asarray(p, dtype=np.float64) - np.asarray(q, dtype=np.float64)
    return np.asarray(0.5 * np.abs(diff).sum(axis=-1), dtype=np.float64)

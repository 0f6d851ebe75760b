"""The long-context regime: speedup against context length and batch, per drafter cache kind.

At long contexts and large batches a decoding step is bound by reading the KV cache, not the
weights (MagicDec, Sadhukhan et al. 2024): verification then costs about a step, and a
drafter pays off as long as what it reads and keeps per request stays small. What it keeps is
its cache kind (`specs.drafters.Cache`): its own K/V for the whole context grows with the
target's, a window, a budget, a quantized copy or a fixed state does not. This module sweeps
one drafter's best chain over contexts and batch sizes, with its cache and the target's per
request, and finds where a drafter's cache alone outgrows a memory budget.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError
from specsim.forward.shapes import BoolArray, FloatArray
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.cache import kv_layout
from specsim.speculation.speedup import Setup, chain_candidates, speedup_table


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSweep:
    """One drafter's best chain at each (batch, context).

    contexts: (C,) cached tokens per request; batch: (B,) requests; speedup, gamma: (B, C)
    the best chain's speedup over plain decoding and its draft length (0: speculation does not
    pay); fits: (B, C) whether the batch fits in memory at that context; drafter_bytes,
    target_bytes: (C,) the drafter's and the target's cache per request, bytes on one GPU.
    """

    drafter: str
    slug: str
    cache_kind: str
    contexts: FloatArray
    batch: FloatArray
    speedup: FloatArray
    gamma: FloatArray
    fits: BoolArray
    drafter_bytes: FloatArray
    target_bytes: FloatArray


def context_sweep(setup: Setup, profile: AcceptanceProfile, contexts: ArrayLike,
                  batch: ArrayLike, *, max_gamma: int = 8) -> ContextSweep:
    """The best chain of up to `max_gamma` draft tokens of `setup`'s drafter at every batch
    size and context (tokens per request; the setup's own context is replaced)."""
    drafter = setup.drafter
    if drafter is None:
        raise SpecError("the long-context sweep needs a drafter (its cache kind is the point)",
                        parameter="drafter")
    ctx = np.atleast_1d(np.asarray(contexts, dtype=np.float64))
    b = np.atleast_1d(np.asarray(batch, dtype=np.float64))
    if ctx.size == 0 or np.any(ctx < 0):
        raise SpecError("contexts must be one or more token counts >= 0", parameter="contexts")
    limit = drafter.draft_limit or max_gamma
    cands = chain_candidates(profile, min(max_gamma, limit))
    speed, gamma, fits = (np.empty((b.size, ctx.size)) for _ in range(3))
    for j, c in enumerate(ctx):
        table = speedup_table(dataclasses.replace(setup, context=float(c)), b, cands)
        best = table.best("speedup")
        rows = np.arange(b.size)
        speed[:, j] = table.speedup[rows, best]
        gamma[:, j] = cands.nodes[best]
        fits[:, j] = table.fits
    kv = setup.precision.kv_dtype
    return ContextSweep(
        drafter=drafter.name, slug=drafter.slug, cache_kind=drafter.cache_kind, contexts=ctx,
        batch=b,
        speedup=speed, gamma=gamma, fits=fits.astype(bool),
        drafter_bytes=drafter.cache_layout(tp=setup.tp, kv_dtype=kv).bytes_per_request(ctx),
        target_bytes=kv_layout(setup.target, tp=setup.tp, kv_dtype=kv).bytes_per_request(ctx))


def crossover_requests(per_request_bytes: ArrayLike, budget_bytes: ArrayLike) -> FloatArray:
    """Concurrent requests at which caches of `per_request_bytes` each fill `budget_bytes`
    (the target's weights, a GPU's HBM): budget / per request, inf for a cache of 0 bytes."""
    per = np.asarray(per_request_bytes, dtype=np.float64)
    budget = np.asarray(budget_bytes, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.asarray(np.where(per > 0, budget / np.where(per > 0, per, 1.0), np.inf))

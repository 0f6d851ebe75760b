"""What one forward pass computes: the requests in it, their contexts and query tokens.

A pass (or a sweep of S passes, vectorized) is described by groups of identical requests:
`queries[s, r]` tokens scored per request of group r, `contexts[s, r]` tokens already in each
of those requests' KV cache, `counts[s, r]` requests in the group. A decode step of B requests
is one group of B requests with 1 query each; verifying a tree of N drafted nodes for B requests
is one group of B requests with N + 1 queries each; a mixed batch is one group per request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.errors import SpecError

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class PassShape:
    """Requests scored in S forward passes, grouped in R groups of identical requests.

    queries: (S, R) tokens scored per request; contexts: (S, R) cached tokens per request before
    the pass; counts: (S, R) requests per group (may be fractional in expectation sweeps);
    logit_fraction: share of scored tokens that need logits (1.0 for decoding and verification,
    where every position is sampled or checked).
    """

    queries: FloatArray
    contexts: FloatArray
    counts: FloatArray
    logit_fraction: float = 1.0

    def __post_init__(self) -> None:
        shapes = {self.queries.shape, self.contexts.shape, self.counts.shape}
        if len(shapes) != 1 or self.queries.ndim != 2:
            raise SpecError(f"pass shape arrays must share one (S, R) shape, got {shapes}")
        for name in ("queries", "contexts", "counts"):
            if np.any(getattr(self, name) < 0) or not np.all(np.isfinite(getattr(self, name))):
                raise SpecError(f"pass shape '{name}' must be finite and >= 0")
        if not 0 <= self.logit_fraction <= 1:
            raise SpecError(f"logit_fraction must be in [0, 1], got {self.logit_fraction}")

    @property
    def tokens(self) -> FloatArray:
        """n: tokens scored in each pass, shape (S,)."""
        return _per_pass(self.counts * self.queries)

    def independent_tokens(self, locality: float) -> FloatArray:
        """Tokens counted as independent draws (of an MoE router), shape (S,): each request's
        q tokens count as q^locality (1: all independent; 0: one draw per request)."""
        return _per_pass(self.counts * np.power(self.queries, locality))

    @property
    def requests(self) -> FloatArray:
        """Requests in each pass, shape (S,)."""
        return _per_pass(self.counts)

    def cached_tokens(self, window: float = np.inf) -> FloatArray:
        """KV entries read per layer, summed over requests, at most `window` per request, (S,)."""
        contexts = self.contexts if window == np.inf else np.minimum(self.contexts, window)
        if self.counts.shape[1] == 1:  # one group: no reduction over requests needed
            return np.asarray((self.counts * contexts)[:, 0])
        return np.asarray((self.counts * contexts).sum(axis=1))

    def attention_pairs(self, window: float = np.inf) -> FloatArray:
        """(query, key) pairs scored per layer and head, (S,).

        Each new token is scored against the cached context and against the whole block of new
        tokens of its request (the kernel computes the full q x q block under a causal or tree
        mask), capped at the window: q * min(context + q, window).
        """
        per_query = self.contexts + self.queries
        if window != np.inf:
            per_query = np.minimum(per_query, window)
        pairs = self.counts * self.queries * per_query
        return np.asarray(pairs[:, 0] if pairs.shape[1] == 1 else pairs.sum(axis=1))


def _column(values: ArrayLike, name: str) -> FloatArray:
    array = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if array.ndim != 1:
        raise SpecError(f"'{name}' must be a scalar or a 1-D sequence")
    return array


def _per_pass(per_group: FloatArray) -> FloatArray:
    """Sum of an (S, R) per-group quantity over the groups of each pass, (S,)."""
    return np.asarray(per_group[:, 0] if per_group.shape[1] == 1 else per_group.sum(axis=1))


def uniform_passes(
    tokens_per_request: ArrayLike = 1.0, requests: ArrayLike = 1.0, context: ArrayLike = 0.0
) -> PassShape:
    """S passes, each of `requests` identical requests scoring `tokens_per_request` tokens.

    The three arguments broadcast against each other to S passes: e.g. requests = B and
    tokens_per_request = N + 1 over an array of N sweeps tree sizes at batch B.
    """
    q, b, ctx = np.broadcast_arrays(
        _column(tokens_per_request, "tokens_per_request"), _column(requests, "requests"),
        _column(context, "context"))
    return PassShape(queries=q[:, None].copy(), contexts=ctx[:, None].copy(),
                     counts=b[:, None].copy())


def decode_passes(batch: ArrayLike, context: ArrayLike = 0.0) -> PassShape:
    """Plain decoding steps: `batch` requests, one new token each, `context` cached tokens."""
    return uniform_passes(1.0, batch, context)


def batch_mix_passes(tokens_per_request: ArrayLike, requests: ArrayLike, contexts: ArrayLike
                     ) -> PassShape:
    """S passes of `requests` requests spread evenly over the R contexts of a mix.

    tokens_per_request and requests broadcast to (S,); contexts has shape (R,): each pass
    holds requests / R requests at each context (fractional counts are expectations).
    """
    q, b = np.broadcast_arrays(_column(tokens_per_request, "tokens_per_request"),
                               _column(requests, "requests"))
    ctx = _column(contexts, "contexts")
    shape = (q.size, ctx.size)
    return PassShape(queries=np.broadcast_to(q[:, None], shape).copy(),
                     contexts=np.broadcast_to(ctx[None, :], shape).copy(),
                     counts=np.broadcast_to(b[:, None] / ctx.size, shape).copy())


def mixed_pass(contexts: ArrayLike, queries: ArrayLike) -> PassShape:
    """One pass over requests with their own context lengths and query counts."""
    ctx, q = np.broadcast_arrays(_column(contexts, "contexts"), _column(queries, "queries"))
    return PassShape(queries=q[None, :].copy(), contexts=ctx[None, :].copy(),
                     counts=np.ones((1, q.size)))

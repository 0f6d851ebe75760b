"""Drafter time per round, from the drafter's architecture on the same roofline as the target.

Each family spends a round differently (DESIGN.md section 4): an autoregressive drafter runs one
pass per drafted level (the first also absorbs the tokens accepted last round), a parallel
drafter runs its backbone once over its block, Medusa's heads ride on the target's last hidden
state. Every pass is costed by `pass_cost` on the drafter's own layers, LM head and cache, and
the few GEMMs outside its layers (the fc fusing target hidden states, the K/V injection of
DFlash-style caches, Medusa and Markov heads) by the GEMM model, so a calibrated GPU profile
bends drafter and target alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.forward.cost import pass_cost
from specsim.forward.gemm import gemm_time_s
from specsim.forward.shapes import FloatArray, uniform_passes
from specsim.specs.cache import kv_heads_per_gpu
from specsim.specs.drafters import Drafter, RoundCost
from specsim.specs.dtypes import BYTES_PER_PARAM, Precision
from specsim.specs.hardware import Hardware
from specsim.specs.models import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundShape:
    """What one round drafts per request, as arrays over S candidate settings.

    depth: sequential levels (a chain's length; a tree's depth); nodes: drafted nodes;
    accepted: expected tokens accepted in the previous round (tau), which the drafter absorbs
    into its context; batch: requests; context: cached tokens per request.
    """

    batch: FloatArray
    depth: FloatArray
    nodes: FloatArray
    accepted: FloatArray
    context: FloatArray

    @property
    def width(self) -> FloatArray:
        """Tokens per request per sequential pass: the average level width of the tree."""
        return np.where(self.depth > 0, np.ceil(self.nodes / np.maximum(self.depth, 1)), 0.0)


def round_shape(*, batch: ArrayLike, depth: ArrayLike, nodes: ArrayLike, accepted: ArrayLike,
                context: ArrayLike = 0.0) -> RoundShape:
    """Broadcast the round's parameters to a common shape (S,)."""
    arrays = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.float64))
                                   for x in (batch, depth, nodes, accepted, context)))
    b, d, n, a, c = (np.ascontiguousarray(x) for x in arrays)
    return RoundShape(batch=b, depth=d, nodes=n, accepted=a, context=c)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Env:
    hw: Hardware
    tp: int
    precision: Precision

    def gemm_s(self, m: FloatArray, k: float, n: float, wb: float = 2.0, *,
               n_per_gpu: bool = False) -> FloatArray:
        """One weight GEMM (m x k) @ (k x n) on this GPU, n split over the TP group (unless
        `n_per_gpu`: n is already this GPU's share)."""
        return gemm_time_s(
            m, k, n if n_per_gpu else n / self.tp, weight_bytes_per_param=wb,
            act_bytes_per_elem=BYTES_PER_PARAM[self.precision.activation_dtype],
            bandwidth_bytes_per_s=self.hw.hbm_bandwidth_bytes_per_s,
            flops_per_s=self.hw.flops_per_s(self.precision.compute_dtype),
            eff=self.hw.efficiency.gemm) * (m > 0)

    def pass_s(self, model: Model, tokens: FloatArray, batch: FloatArray, context: FloatArray,
               kv_dtype: str = "") -> FloatArray:
        """A forward pass of `model` over `tokens` per request for `batch` requests, exactly,
        its attention reading `context` cached tokens per request (at `kv_dtype` if given).

        A sweep repeats few distinct (tokens, batch, context) settings, so each distinct one is
        timed once and the times are scattered back: the answer for a setting does not depend
        on what else was asked for in the same call.
        """
        distinct, back = _distinct_rows(np.stack([np.maximum(tokens, 1.0), batch, context]))
        shape = uniform_passes(distinct[0], distinct[1], distinct[2])
        precision = self.precision if not kv_dtype or kv_dtype == self.precision.kv_dtype \
            else dataclasses.replace(self.precision, kv_dtype=kv_dtype)
        time = pass_cost(model, self.hw, shape, tp=self.tp, precision=precision).time_s
        return np.asarray(time[back] * (tokens > 0))


def _distinct_rows(columns: FloatArray) -> tuple[FloatArray, NDArray[np.intp]]:
    """The distinct settings of (k, S) `columns`, (k, U), and each setting's index among them.

    Each column's distinct values are found on their own (a 1-D sort each), the settings
    become one integer code (mixed radix over those counts) and the codes are sorted once:
    twice as fast as a lexicographic sort of the float columns, same result and order.
    """
    uniques, codes = [], []
    radix = 1
    for column in columns:
        values, inverse = np.unique(column, return_inverse=True)
        uniques.append(values)
        codes.append(inverse.ravel().astype(np.int64))
        radix *= max(values.size, 1)
    if radix >= 2**62:  # too many distinct values for one code: sort the columns themselves
        return _distinct_rows_lexsort(columns)
    key = codes[0]
    for values, code in zip(uniques[1:], codes[1:], strict=True):
        key = key * values.size + code
    distinct, back = np.unique(key, return_inverse=True)
    out = []
    for values in uniques[::-1]:
        out.append(values[distinct % values.size])
        distinct = distinct // values.size
    return np.stack(out[::-1]), back.ravel().astype(np.intp)


def _distinct_rows_lexsort(columns: FloatArray) -> tuple[FloatArray, NDArray[np.intp]]:
    """_distinct_rows by a lexicographic sort of the columns (any number of distinct values)."""
    order = np.lexsort(columns[::-1])
    ordered = columns[:, order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = np.any(ordered[:, 1:] != ordered[:, :-1], axis=0)
    back = np.empty(order.size, dtype=np.intp)
    back[order] = np.cumsum(new) - 1
    return ordered[:, new], back


def backbone(drafter: Drafter) -> Model:
    """The drafter's decoder layers and LM head as a model the roofline can time."""
    if drafter.model is not None:
        return drafter.model
    if drafter.kind.target_shaped_layers:  # MTP: one layer of the target's own layout
        target = drafter.target
        moe = dataclasses.replace(target.moe, dense_layers=0) if target.moe else None
        # a quantized self-drafter (QuantSpec) reads its layers at its own weight dtype
        dtype = drafter.weight_dtype if drafter.weight_dtype != "bf16" else target.weight_dtype
        return dataclasses.replace(target, slug=drafter.slug, num_layers=drafter.layers,
                                   layer_types=("full_attention",) * drafter.layers, moe=moe,
                                   weight_dtype=dtype)
    return Model(
        slug=drafter.slug, name=drafter.name, architecture=drafter.family,
        hidden_size=drafter.hidden_size, num_layers=drafter.layers,
        num_attention_heads=drafter.num_attention_heads, num_kv_heads=drafter.num_kv_heads,
        head_dim=drafter.head_dim, intermediate_size=drafter.intermediate_size,
        vocab_size=drafter.vocab_size, tie_word_embeddings=True,
        layer_types=("full_attention",) * drafter.layers, weight_dtype=drafter.weight_dtype)


def _fuse_s(env: _Env, drafter: Drafter, tokens: FloatArray) -> FloatArray:
    """The fc that fuses `fused_target_layers` target hidden states into the drafter's input."""
    if not drafter.fused_target_layers:
        return np.zeros_like(tokens)
    d = drafter.hidden_size
    return env.gemm_s(tokens, drafter.fused_target_layers * d, d)


def _autoregressive(env: _Env, drafter: Drafter, r: RoundShape) -> FloatArray:
    """One pass per level; the first also absorbs last round's accepted tokens.

    Only the first pass fuses target hidden states (those of the accepted tokens); later
    levels feed the drafter's own states back in. Each pass reads the K/V its cache kind
    holds (`Drafter.context_read`), and the round pays its cache's upkeep (`_cache_upkeep_s`).
    """
    model = backbone(drafter)
    context = drafter.context_read(r.context)
    first_tokens = np.maximum(r.accepted, r.width) * (r.depth > 0)
    first = env.pass_s(model, first_tokens, r.batch, context, _kv_dtype(env, drafter))
    later = env.pass_s(model, r.width, r.batch, context, _kv_dtype(env, drafter))
    fuse = _fuse_s(env, drafter, r.batch * first_tokens)
    upkeep = _cache_upkeep_s(env, drafter, r, r.depth)
    cross = _cross_attention_s(env, drafter, r.batch * first_tokens) \
        + np.maximum(r.depth - 1, 0) * _cross_attention_s(env, drafter, r.batch * r.width)
    return first + np.maximum(r.depth - 1, 0) * later + fuse + upkeep + cross


def _cross_attention_s(env: _Env, drafter: Drafter, tokens: FloatArray) -> FloatArray:
    """The query and output projections of each layer's cross-attention to the target's
    cache (GliDe, LongSpec), for `tokens` tokens of one pass; the K/V it reads are counted in
    the pass's attention (`Drafter.context_read`)."""
    if not drafter.kind.reads_target_kv:
        return np.zeros_like(tokens)
    d, qo = drafter.hidden_size, drafter.num_attention_heads * drafter.head_dim
    return drafter.layers * (env.gemm_s(tokens, d, qo) + env.gemm_s(tokens, qo, d))


def _kv_dtype(env: _Env, drafter: Drafter) -> str:
    """The dtype its attention reads K/V at: a quantized copy's, else the deployment's."""
    return drafter.cache_dtype if drafter.cache_kind == "quantized_copy" \
        else env.precision.kv_dtype


def _bytes_s(env: _Env, bytes_: FloatArray) -> FloatArray:
    """Time to move `bytes_` through HBM at the GPU's (efficiency-scaled) bandwidth."""
    return np.asarray(bytes_ / env.hw.hbm_bandwidth_bytes_per_s)


def _cache_upkeep_s(env: _Env, drafter: Drafter, r: RoundShape, passes: FloatArray
                    ) -> FloatArray:
    """Per round, what the cache kind costs beyond the passes' attention reads.

    state: each pass reads and writes its recurrent state (`state_elems` per layer, fp32);
    sparse_copy / quantized_copy: the accepted tokens' K/V are read from the target's cache
    and written into the copy (at `cache_dtype` for a quantized one). Own caches are written
    by the passes that absorb the accepted tokens; `target` and `none` keep nothing.
    """
    kind = drafter.cache_kind
    drafting = r.depth > 0
    if kind == "state":
        state = drafter.cache_layout(tp=env.tp, state_dtype=env.precision.state_dtype)
        per_request = 2.0 * state.fixed_bytes_per_request
        return _bytes_s(env, passes * r.batch * per_request) * drafting
    if kind in ("sparse_copy", "quantized_copy"):
        read = drafter.layer_kv_bytes_per_token(tp=env.tp, kv_dtype=env.precision.kv_dtype)
        write = drafter.layer_kv_bytes_per_token(tp=env.tp, kv_dtype=_kv_dtype(env, drafter))
        return _bytes_s(env, r.batch * r.accepted * (read + write)) * drafting
    return np.zeros_like(r.depth)


def _parallel_block(drafter: Drafter, r: RoundShape) -> FloatArray:
    """Positions one backbone pass covers per request: the trained block, or depth + 1."""
    if drafter.kind.block == "depth":
        return np.minimum(r.depth + 1, drafter.block_size)
    return np.full_like(r.depth, float(drafter.block_size))


def _injection_s(env: _Env, drafter: Drafter, r: RoundShape) -> FloatArray:
    """DFlash-style own cache: fuse the accepted tokens' target states, project and write K/V."""
    m = r.batch * r.accepted
    kv_out = 2 * kv_heads_per_gpu(drafter.num_kv_heads, env.tp) * drafter.head_dim
    kv_proj = env.gemm_s(m, drafter.hidden_size, kv_out, n_per_gpu=True)
    return _fuse_s(env, drafter, m) + drafter.layers * kv_proj


def _parallel(env: _Env, drafter: Drafter, r: RoundShape) -> FloatArray:
    """One backbone pass over the block (DEdit: plus its editing passes), then the heads."""
    model = backbone(drafter)
    context = drafter.context_read(r.context)
    block = _parallel_block(drafter, r) * (r.depth > 0)
    passes = 1 + drafter.edit_passes
    time = passes * env.pass_s(model, block, r.batch, context, _kv_dtype(env, drafter))
    if drafter.cache_kind in ("own_layers", "own_window"):
        time = time + _injection_s(env, drafter, r) * (r.depth > 0)
    else:  # fixed-size state rebuilt from the last hidden states every round
        time = time + _fuse_s(env, drafter, r.batch * (r.depth > 0))
    time = time + _cache_upkeep_s(env, drafter, r, passes * (r.depth > 0.0).astype(np.float64))
    if drafter.markov_rank:  # one low-rank transition GEMM per drafted position, in sequence
        markov = env.gemm_s(r.batch, drafter.markov_rank, drafter.target.vocab_size)
        time = time + r.depth * markov
    return np.asarray(time)


def _target_heads(env: _Env, drafter: Drafter, r: RoundShape) -> FloatArray:
    """Heads on the target's last hidden state: a residual block and an LM head each."""
    d, vocab = drafter.hidden_size, drafter.target.vocab_size
    heads = np.minimum(r.depth, drafter.medusa_heads)
    per_head = env.gemm_s(r.batch, d, d) + env.gemm_s(r.batch, d, vocab)
    return np.asarray(heads * per_head)


def _recurrent_cell(env: _Env, drafter: Drafter, r: RoundShape) -> FloatArray:
    """One step of the recurrent cell and the head per drafted level, `width` tokens per
    request each (ReDrafter's beams): the cell over [token embedding; state] for each gate,
    the projection of [target hidden state; cell state] to the head's width where they
    differ, `layers` residual blocks, the LM head; and the state read and written per step.
    Nothing of the context is read: the cell starts from the target's last hidden state."""
    m = r.batch * r.width * (r.depth > 0)
    width, d = drafter.state_elems, drafter.hidden_size
    wb = BYTES_PER_PARAM[drafter.weight_dtype]
    step = env.gemm_s(m, 2 * width, drafter.recurrent_gates * width, wb)
    if d != 2 * width:
        step = step + env.gemm_s(m, 2 * width, d, wb)
    step = step + drafter.layers * env.gemm_s(m, d, d, wb) \
        + env.gemm_s(m, d, drafter.vocab_size, wb)
    return np.asarray(r.depth * step + _cache_upkeep_s(env, drafter, r, r.depth))


TOKEN_ID_BYTES = 4.0  # an int32 token id, as vLLM and SGLang hold a request's tokens


def _lookup(env: _Env, drafter: Drafter, r: RoundShape) -> FloatArray:
    """String matching, no model: each request's token ids are scanned once per round for
    the n-gram (prompt lookup: the whole context) or walked down a suffix tree
    (`lookup_tokens`, its depth), as bytes through HBM. Engines that match on the host
    (vLLM's n-gram proposer) pay it as their per-round host work instead."""
    scanned = np.full_like(r.context, float(drafter.lookup_tokens)) if drafter.lookup_tokens \
        else r.context
    return _bytes_s(env, r.batch * scanned * TOKEN_ID_BYTES) * (r.depth > 0)


# The family table names a round-cost rule; this maps each rule to the function that times it.
COST_RULES: dict[RoundCost, Callable[[_Env, Drafter, RoundShape], FloatArray]] = {
    "autoregressive": _autoregressive,
    "parallel": _parallel,
    "target_heads": _target_heads,
    "lookup": _lookup,
    "recurrent_cell": _recurrent_cell,
}


def draft_time_s(drafter: Drafter, hw: Hardware, shape: RoundShape, *, tp: int = 1,
                 precision: Precision | None = None) -> FloatArray:
    """Seconds one round of drafting takes, for each of the S settings in `shape`."""
    env = _Env(hw=hw, tp=tp, precision=precision or Precision())
    return COST_RULES[drafter.kind.round_cost](env, drafter, shape)


def draft_passes(drafter: Drafter, depth: ArrayLike) -> FloatArray:
    """Sequential drafter passes per round: depth for autoregressive drafters, else 1 (+ edits)."""
    d = np.asarray(depth, dtype=np.float64)
    if drafter.kind.round_cost == "lookup":  # no model pass: the match is the drafting
        return np.zeros_like(d)
    if drafter.kind.parallel:
        return np.where(d > 0, 1.0 + drafter.edit_passes, 0.0)
    return d


def verify_share(drafter: Drafter) -> float:
    """Share of a verification pass still to run after drafting: 1, except for a drafter made
    of the target's first `layers` layers whose work verification reuses (LayerSkip's early
    exit: the draft tokens' K/V and hidden states of those layers are kept, and only the
    remaining layers verify), where it is the remaining layers' share. The LM head and
    embedding are counted with the layers (under 2% of a Llama-2-7B pass)."""
    if not drafter.kind.reuses_drafted_layers:
        return 1.0
    return 1.0 - min(drafter.layers, drafter.target.num_layers) / drafter.target.num_layers

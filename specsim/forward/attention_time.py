"""Time of one attention kernel from its tiles: FlashAttention's work split over the GPU's SMs.

The roofline (bytes / bandwidth, flops / peak) misses how a FlashAttention-2 kernel runs on
the GPU, which the measured A100 table (Vidur, Llama-70B shape at TP 2) shows plainly:

- Work is cut into CTAs of (sequence, head, block of BLOCK_M query rows); each walks the keys
  in blocks of BLOCK_N tokens (FlashAttention 2's split-KV kernel for head dim 128: 64 x 128).
  In decode with grouped-query attention the query heads of one KV head are the rows of one
  CTA, so a decode step has batch x KV-heads CTAs, which run ``sm_count`` at a time: the
  measured time jumps where batch x 4 passes 108, 216 and 432 (batch 28, 55, 109).
- When the CTAs fill less than 0.8 of the SMs, the keys of each CTA are split into
  ``num_splits`` chunks (FlashAttention 2's heuristic, `flash_splits`, a step function of the
  key length and the SM count) and a combine kernel merges them. The heuristic sees the
  launch's key length: over a paged cache that is the block table's width, which a profiler
  or a CUDA graph pads (``split_keys``; Vidur's table: 4,096, its maximum model length, so a
  short context is split as if it were 4,096 keys long). Splits past the real keys launch,
  find nothing and exit: the table's batch 14-21 at 32 keys take 16-17 us (5 splits, 280-420
  CTAs launched), batch 13 12 us (2 splits, 104 CTAs), batch 22 9 us (88 CTAs, no split); at
  batch 1 (16 splits of 2 blocks) the time stays flat from 129 keys on. Each wave of
  ``sm_count`` launched CTAs adds ``combine_s`` (partial results written and merged).
- Two CTAs fit on an SM (its shared memory holds two of the 64 x 128 tiles), so CTAs run in
  rounds of 2 x ``sm_count``; two resident CTAs share the SM's flops. A CTA streams its blocks
  at the bandwidth one CTA reaches (``sm_bandwidth``, latency bound: below one SM's share of
  the datasheet on the A100) or at its share of the HBM bandwidth (``bandwidth``), whichever
  is lower: at 4,032 keys batch 54 (216 CTAs, one round) takes 255 us, batch 55-108 (two
  rounds) 347-511 us.
- Causal prefill: the CTA of query block i sees only the keys before its last row, so the
  CTAs' work differs; ``causal_skip`` is the share of the masked key blocks the kernel skips
  (1: all, as FlashAttention does; fitted, since a chunked-prefill kernel over a paged cache
  may not).
- Where every query head is a CTA of its own (prefill), the heads of one grouped-query group
  read the same K/V blocks: DRAM serves each block once per group and the L2 the rest, so a
  CTA's block costs kv_heads / q_heads of its bytes in bandwidth. Without it the prefill fit
  needed the datasheet's full bandwidth and flops (both fractions at their limit 1.0, held
  out 6.0%); with it the flops fraction is 0.46 and the held-out error 5.6%.

Fitted on measured kernels by `specsim.measurement.attention_fit`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError
from specsim.forward.gemm import FloatArray
from specsim.specs.hardware import AttentionKernelEfficiency

__all__ = ["AttentionKernelEfficiency", "attention_kernel_time_s", "flash_splits"]

# FlashAttention 2, split-KV forward kernel for head dim <= 128 (flash_fwd_launch_template.h).
BLOCK_M = 64
BLOCK_N = 128
# Its split heuristic: no split once the CTAs fill this share of the SMs; pick the fewest
# splits whose wave efficiency is within SPLIT_TOLERANCE of the best; at most MAX_SPLITS.
SPLIT_FILL = 0.8
SPLIT_TOLERANCE = 0.85
MAX_SPLITS = 128
# CTAs resident on one SM: its shared memory holds two of the kernel's 64 x 128 tiles.
SLOTS_PER_SM = 2
# No fitted terms: the datasheet's bandwidth and flops, no overheads.
IDEAL = AttentionKernelEfficiency()


def flash_splits(ctas: ArrayLike, key_blocks: ArrayLike, sm_count: int) -> FloatArray:
    """Number of key chunks FlashAttention 2 splits each CTA's keys into (1: no split).

    Its heuristic: no split when the CTAs fill SPLIT_FILL of the SMs; else, over s = 1 ..
    min(MAX_SPLITS, sm_count, key_blocks) (skipping s that leave the blocks per chunk
    unchanged), the wave efficiency w / ceil(w) with w = ctas s / sm_count, and the smallest
    s within SPLIT_TOLERANCE of the best.
    """
    ctas_a, blocks_a = np.broadcast_arrays(np.asarray(ctas, dtype=np.float64),
                                           np.asarray(key_blocks, dtype=np.float64))
    out = np.ones(ctas_a.shape)
    split = ctas_a < SPLIT_FILL * sm_count
    if sm_count < 1 or not split.any():
        return out
    # Only under-filled launches split, and a sweep repeats few (ctas, blocks) pairs: search
    # the split count once per distinct pair.
    pairs, back = np.unique(ctas_a[split] + 1j * blocks_a[split], return_inverse=True)
    out[split] = _best_splits(pairs.real, pairs.imag, sm_count)[back.ravel()]
    return out


def _best_splits(ctas: FloatArray, blocks: FloatArray, sm_count: int) -> FloatArray:
    """The heuristic's split count for each (ctas, key blocks) of an under-filled launch."""
    limit = int(min(MAX_SPLITS, sm_count, max(float(blocks.max(initial=1.0)), 1.0)))
    s = np.arange(1, limit + 1, dtype=np.float64)
    waves = ctas[:, None] * s / sm_count
    eff = waves / np.ceil(np.maximum(waves, 1e-300))
    per_chunk = np.ceil(blocks[:, None] / s)
    previous = np.ceil(blocks[:, None] / np.maximum(s - 1, 1))
    eligible = (s <= np.minimum(blocks[:, None], sm_count)) & (
        (s == 1) | (per_chunk != previous))
    eff = np.where(eligible, eff, 0.0)
    best = eff.max(axis=-1, keepdims=True)
    return np.asarray(np.argmax(eligible & (eff >= SPLIT_TOLERANCE * best), axis=-1) + 1.0,
                      dtype=np.float64)


def attention_kernel_time_s(
    batch: ArrayLike, context: ArrayLike, queries: ArrayLike, *, q_heads: float,
    kv_heads: float, head_dim: float, causal: ArrayLike, bandwidth_bytes_per_s: float,
    flops_per_s: float, sm_count: int, act_bytes: float = 2.0,
    eff: AttentionKernelEfficiency = IDEAL,
) -> FloatArray:
    """Time of attention kernels: `batch` sequences, each `queries` new tokens over `context`
    cached ones (causal among the new tokens where `causal`), on one GPU.

    Args:
        batch, context, queries, causal: per kernel, broadcast together.
        q_heads, kv_heads, head_dim: per GPU.
        bandwidth_bytes_per_s, flops_per_s, sm_count: datasheet numbers of the GPU.
        act_bytes: bytes per cached K or V element.
        eff: fitted terms (AttentionKernelEfficiency).

    Returns:
        Seconds, the broadcast shape.
    """
    if sm_count < 1:
        raise SpecError("attention_kernel_time_s: need the GPU's sm_count >= 1")
    b, ctx, q, causal_a = np.broadcast_arrays(
        np.asarray(batch, dtype=np.float64), np.asarray(context, dtype=np.float64),
        np.asarray(queries, dtype=np.float64), np.asarray(causal, dtype=bool))
    group = q_heads / kv_heads
    # Decode with grouped queries: the group's query heads are the rows of one CTA.
    swap = (q == 1.0) & (group > 1.0)
    rows = np.where(swap, group, q)
    heads = np.where(swap, kv_heads, q_heads)
    # The same 64 x 128 tiles for prefill: the plain forward kernel's 128 x 64 tiles fit
    # the measured prefill worse (12.4% against 11.5% held out).
    prefill = rows > BLOCK_M
    block_m = np.full_like(rows, BLOCK_M)
    block_n = np.full_like(rows, BLOCK_N)
    m_blocks = np.ceil(rows / block_m)
    keys = ctx + q
    key_blocks = np.ceil(keys / block_n)
    ctas = b * heads * m_blocks
    # The heuristic sees the launch's (padded) key length; each split covers `per_split` of
    # those blocks, and splits past the real keys find nothing to do.
    seen_blocks = np.ceil(np.maximum(keys, eff.split_keys) / block_n)
    splits = flash_splits(ctas, seen_blocks, sm_count)
    per_split = np.ceil(seen_blocks / splits)
    work, longest = _cta_blocks(ctx, q, key_blocks, m_blocks, causal_a & ~swap, eff.causal_skip,
                                block_m, block_n)
    all_ctas = ctas * splits
    bw = eff.bandwidth * bandwidth_bytes_per_s
    # K and V of one head per key block; where every query head is a CTA of its own
    # (prefill), the group's heads read the same K/V block and all but one hit the L2.
    shared = np.where(swap, 1.0, kv_heads / q_heads)
    block_bytes = np.broadcast_to(2.0 * BLOCK_N * head_dim * act_bytes * shared, ctas.shape)
    block_flops = 4.0 * BLOCK_M * BLOCK_N * head_dim  # Q K^T and P V
    sm_flops = eff.flops * flops_per_s / sm_count

    def block_s(active: FloatArray, nbytes: FloatArray) -> FloatArray:
        """Time of one key block of a CTA while `active` CTAs run: the bandwidth one CTA
        reaches or its share of the HBM, and the SM's flops shared with a second resident."""
        cta_bw = np.minimum(eff.sm_bandwidth * bandwidth_bytes_per_s / sm_count,
                            bw / np.maximum(active, 1.0))
        resident = np.where(active > sm_count, 2.0, 1.0)
        return np.asarray(np.maximum(nbytes / cta_bw, resident * block_flops / sm_flops))

    # Equal CTAs (decode, or one query block): rounds of SLOTS_PER_SM x sm_count CTAs, each
    # CTA with keys walking min(its blocks, per_split); every round of launched CTAs, empty
    # ones included, pays the prologue.
    # Each point takes one of the two forms: only its own form is evaluated (a T(n) sweep
    # is mostly prefill, a decode sweep all equal CTAs).
    body = np.empty(ctas.shape)
    eq = ~prefill
    if eq.any():
        slots = SLOTS_PER_SM * sm_count
        c, lg, ps = ctas[eq], longest[eq], per_split[eq]
        busy = c * np.ceil(lg / ps)
        full = np.floor(busy / slots)
        rest = busy - full * slots
        body[eq] = np.ceil(all_ctas[eq] / slots) * eff.cta_s + np.minimum(lg, ps) * (
            full * block_s(np.full_like(full, slots), block_bytes[eq])
            + (rest > 0) * block_s(rest, block_bytes[eq]))
    if prefill.any():
        # Unequal CTAs (causal prefill): the makespan is the longer of the total work spread
        # over the SMs and the longest CTA.
        sp, launched = splits[prefill], all_ctas[prefill]
        body[prefill] = np.ceil(launched / sm_count) * eff.cta_s + np.maximum(
            ctas[prefill] * work[prefill] / sp / sm_count, np.ceil(longest[prefill] / sp)
        ) * block_s(np.minimum(launched, sm_count), block_bytes[prefill])
    combine = eff.combine_s * (splits > 1) * np.ceil(all_ctas / sm_count)
    return np.asarray(eff.floor_s + combine + body, dtype=np.float64)


def _cta_blocks(context: FloatArray, queries: FloatArray, key_blocks: FloatArray,
                m_blocks: FloatArray, causal: FloatArray, skip: float,
                block_m: FloatArray, block_n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Mean and largest number of key blocks per CTA (before splitting).

    A causal CTA of query block i (0-based) sees context + min((i + 1) BLOCK_M, queries) keys;
    of the key blocks past those it skips the share `skip`.
    """
    top = int(max(float(m_blocks.max(initial=1.0)), 1.0))
    i = np.arange(top, dtype=np.float64)
    seen = np.ceil((context[..., None] + np.minimum((i + 1) * block_m[..., None],
                                                    queries[..., None])) / block_n[..., None])
    masked = key_blocks[..., None] - seen
    blocks = np.where(causal[..., None], seen + (1.0 - skip) * masked, key_blocks[..., None])
    valid = i < m_blocks[..., None]
    mean = np.where(valid, blocks, 0.0).sum(axis=-1) / np.maximum(m_blocks, 1.0)
    longest = np.where(valid, blocks, 0.0).max(axis=-1)
    return np.asarray(mean), np.asarray(longest)

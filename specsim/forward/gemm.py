"""Time of one weight GEMM: the datasheet roofline plus fitted efficiency terms.

A weight GEMM multiplies ``m`` token rows by a ``k x n`` weight shard. The ideal (datasheet)
roofline is

    t = max(bytes / bandwidth, 2 m k n / peak_flops),  bytes = k n wb + m (k + n) ab

(weights read once, activations in and out). Measured kernels (Vidur's A100/A40 tables) deviate
from it in the ways below, each modelled by :class:`GemmEfficiency` fields whose defaults switch
it off, so that the default efficiency reproduces the ideal roofline exactly. Fitted values
quoted are for Llama-2-7B's GEMMs (all TP degrees) on the A100 / A40.

1. ``bandwidth``, ``flops``: effective fractions of the datasheet numbers (HBM and tensor cores
   never run at their peaks; 0.86 / 0.77 and 0.76 / 0.79).
2. ``floor_s``: a fixed latency on the memory path. A kernel that streams ``B`` bytes takes
   ``floor + B / bw``: small TP shards do not saturate HBM (launch, ramp-up, tail), so a 4 MB
   shard reaches ~35% of the bandwidth that a 500 MB one reaches. Fitted 5.7 / 2.0 us.
3. ``tile_rows``, ``tile_fraction``: token-tile quantization. Tensor-core kernels compute the
   output in tiles of ``tile_rows`` token rows (128 on Ampere; for ``m`` below one tile the
   library picks the smallest power-of-two tile >= ``m``, at least 16), so the MMA work is paid
   on ``m`` padded up to a tile multiple: the 15-45% steps just past multiples of 128 tokens.
   Only ``tile_fraction`` of the tile time scales with padded rows; the rest (predicated
   activation loads and stores) scales with the real rows. Fitted 0.62 / 0.48.
4. ``epilogue_k``: per-output-element overhead (pipeline prologue and epilogue of every output
   tile: filling the k-pipeline, writing C), in units of reduction steps, so compute time is
   ``2 m_eff (k + epilogue_k) n / flops``. It lowers the efficiency of short-k shards (TP 8
   output projections reach only ~60% of peak when the large ones reach ~75%); fitted 76 / 112.
5. ``overlap_p``: memory and compute overlap imperfectly near the knee. The two times are
   combined by a smooth maximum ``(t_mem^p + t_comp^p)^(1/p)`` (p = inf: hard max, p = 1: no
   overlap). The fitted p = 2.0 / 2.0 puts the knee near 128 tokens, not at peak_flops /
   bandwidth.
6. ``sm_count``, ``tile_cols``, ``wave_fraction``: wave quantization. The ceil(m / tile_rows)
   x ceil(n / tile_cols) output tiles run ``sm_count`` at a time (108 SMs on the A100, 84 on the
   A40); a last wave that is only partly full still takes a whole wave's time on the busy SMs.
   Only ``wave_fraction`` of that idle time is paid (the library also picks other tile shapes
   and split-K kernels, which fill part of it): fitted 0.17 / 0.08 with 128 x 128 tiles, the
   width of {64, 128, 256} with the lowest training loss summed over the two GPUs.

Each term was kept only if it lowered the cross-model holdout error on the Vidur tables (train
on one model, predict the summed layer GEMM time of every other model on the same GPU): mean
absolute error 32% / 29% for the datasheet roofline, 7.4% / 7.6% with the first three fields,
3.2% / 4.2% with all of them, every A100 model <= 3.8% (``tests/test_vidur_calibration.py``).
What is left is mostly the library's per-shape kernel choice (tile shape, split-K, step
positions that differ shape to shape and do not carry over between shapes). On the A40 it
bounds this form above 4% for some models: fitted to each model's own rows it leaves
CodeLlama-34B and InternLM-20B at 4.3-4.5%, and the parameters that minimize the held-out error
itself leave 4.0% pooled.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.errors import SpecError
from specsim.specs.hardware import GemmEfficiency, check_positive

FloatArray = NDArray[np.float64]

# Smallest token tile a tensor-core kernel uses (mma.m16n8k16 on Ampere and later).
MIN_TILE_ROWS = 16


def as_nonneg_array(name: str, value: ArrayLike) -> FloatArray:
    """float64 copy of value; SpecError if any element is negative or not finite."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.size and not (arr.min() >= 0.0 and arr.max() < math.inf):  # NaN fails both
        bad = ~(np.isfinite(arr) & (arr >= 0.0))
        raise SpecError(f"{name}: need finite values >= 0, got {arr[bad][:3].tolist()}")
    return arr


def padded_tokens(m: ArrayLike, tile_rows: int) -> FloatArray:
    """Token count padded to the output tile of a tensor-core GEMM kernel.

    Args:
        m: tokens in the pass, any shape.
        tile_rows: token rows of a full tile.

    Returns:
        Same shape as m: 0 for m = 0; the smallest power of two >= m (at least MIN_TILE_ROWS,
        at most tile_rows) while m <= tile_rows; else m rounded up to a multiple of tile_rows.
    """
    m_arr = np.atleast_1d(np.asarray(m, dtype=np.float64))
    padded = tile_rows * np.ceil(m_arr / tile_rows)  # 0 stays 0
    small = (m_arr > 0.0) & (m_arr <= tile_rows)
    if small.any():  # a sweep has few points below one tile: fix just those
        # Smallest power of two >= m: m = f 2^e with f in [0.5, 1) is one exactly at f = 0.5.
        fraction, exponent = np.frexp(np.maximum(m_arr[small], 1.0))
        pow2 = np.ldexp(1.0, exponent - (fraction == 0.5))
        padded[small] = np.clip(pow2, min(MIN_TILE_ROWS, tile_rows), tile_rows)
    result: FloatArray = padded.reshape(np.shape(m))
    return result


def wave_factor(padded_m: FloatArray, n: FloatArray, eff: GemmEfficiency) -> FloatArray:
    """Compute-time factor of the partly idle last wave of output tiles (1: whole waves).

    The kernel runs ceil(padded_m / tile_rows) x ceil(n / tile_cols) output tiles, sm_count at
    a time. With W = tiles / sm_count waves, the last one leaves ceil(W) - W of a wave idle;
    ``wave_fraction`` of that idle time is paid: factor = 1 + wave_fraction (ceil(W) - W) / W.

    Args:
        padded_m: tokens padded to the token tile (padded_tokens), any shape.
        n: output width of the weight shard, broadcast with padded_m.
        eff: supplies tile_rows, tile_cols, sm_count (>= 1) and wave_fraction.

    Returns:
        The factor (>= 1), the broadcast shape; 1 where there are no tiles.
    """
    # Integer tile counts first, so that whole waves divide exactly (no spurious extra wave);
    # padded_m is a whole number of token tiles, or one tile when it is below one.
    # (m = 0 has no tiles; counting it as one tile only scales a compute time of zero, and an
    # empty shard, n = 0, gets a finite factor for the same reason.)
    row_tiles = np.maximum(padded_m, eff.tile_rows) / eff.tile_rows
    waves = np.maximum(row_tiles * np.ceil(n / eff.tile_cols) / eff.sm_count, 1e-300)
    factor: FloatArray = 1.0 + eff.wave_fraction * ((np.ceil(waves) - waves) / waves)
    return factor


def smooth_max(a: FloatArray, b: FloatArray, p: float) -> FloatArray:
    """(a^p + b^p)^(1/p) for a, b >= 0, evaluated without overflow; p = inf gives max(a, b)."""
    if math.isinf(p):
        return np.maximum(a, b)
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    # hi (1 + r^p)^(1/p) with r = lo / hi in [0, 1]: the factor is read off a table of
    # SMOOTH_TABLE_SIZE intervals by linear interpolation, since powers on every point of a
    # 65,536-point sweep cost more than the rest of the pass. Relative error (measured on 2e6
    # ratios): below 1e-8 for p >= 2 (2e-9 at p = 2, 7e-9 at p = 16), 1.3e-7 at p = 1.5 and
    # 1.1e-6 at p = 1.2, where r^p bends sharply near r = 0; exact at p = 1 and at table points.
    values, slopes = _smooth_table(float(p))
    with np.errstate(divide="ignore", invalid="ignore"):
        x = lo * (SMOOTH_TABLE_SIZE / hi)  # r scaled to table intervals
    x = np.atleast_1d(x)
    x[~(hi > 0.0)] = 0.0  # both times zero: factor 1, result 0
    index = x.astype(np.int64)
    np.minimum(index, SMOOTH_TABLE_SIZE - 1, out=index)
    scale = np.take(values, index) + (x - index) * np.take(slopes, index)
    return np.asarray(hi * scale.reshape(np.shape(hi)), dtype=np.float64)


SMOOTH_TABLE_SIZE = 8192


@functools.lru_cache(maxsize=32)
def _smooth_table(p: float) -> tuple[FloatArray, FloatArray]:
    """(1 + r^p)^(1/p) at SMOOTH_TABLE_SIZE + 1 evenly spaced r in [0, 1], and the slope of
    each interval (per unit of the scaled ratio)."""
    r = np.linspace(0.0, 1.0, SMOOTH_TABLE_SIZE + 1)
    table: FloatArray = (1.0 + r**p) ** (1.0 / p)
    return table, np.diff(table)


def gemm_time_s(
    m: ArrayLike,
    k: ArrayLike,
    n: ArrayLike,
    *,
    weight_bytes_per_param: float,
    act_bytes_per_elem: float,
    bandwidth_bytes_per_s: float,
    flops_per_s: float,
    eff: GemmEfficiency = GemmEfficiency(),
) -> FloatArray:
    """Time of one weight GEMM (m tokens times a k x n weight shard on one GPU).

    With the default ``eff`` this is exactly the ideal roofline
    ``max((k n wb + m (k + n) ab) / bandwidth, 2 m k n / flops)``.

    Args:
        m: tokens in the pass (GEMM rows), >= 0; broadcast with k and n.
        k: reduction (input) width of the per-GPU weight shard, >= 0.
        n: output width of the per-GPU weight shard, >= 0.
        weight_bytes_per_param: bytes per weight (2 for fp16/bf16, 1 for fp8, 0.5 for int4).
        act_bytes_per_elem: bytes per activation element read or written.
        bandwidth_bytes_per_s: datasheet memory bandwidth, B/s.
        flops_per_s: datasheet peak flop rate for the compute dtype, flop/s.
        eff: fitted efficiency terms (default: the ideal roofline).

    Returns:
        Time in s, the broadcast shape of m, k, n.
    """
    check_positive("weight_bytes_per_param", weight_bytes_per_param)
    check_positive("act_bytes_per_elem", act_bytes_per_elem, allow_zero=True)
    check_positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    check_positive("flops_per_s", flops_per_s)
    # No explicit broadcast: the shape terms are folded into per-token coefficients first, so
    # a sweep over m costs a handful of array operations (k and n are usually scalars).
    m_a, k_a, n_a = as_nonneg_array("m", m), as_nonneg_array("k", k), as_nonneg_array("n", n)
    wb, ab = weight_bytes_per_param, act_bytes_per_elem
    bandwidth = eff.bandwidth * bandwidth_bytes_per_s
    # Roofline memory term: weights read once, activations read (m x k) and written (m x n).
    t_mem_s = (eff.floor_s + k_a * n_a * wb / bandwidth) + m_a * ((k_a + n_a) * ab / bandwidth)
    m_eff = m_a
    padded = m_a
    if eff.tile_fraction > 0.0 or eff.wave_fraction > 0.0:
        padded = padded_tokens(m_a, eff.tile_rows)
        m_eff = m_a + eff.tile_fraction * (padded - m_a)
    # 2 flops per multiply-add, each output element costs k (+ epilogue) reduction steps.
    t_comp_s = m_eff * (2.0 * (k_a + eff.epilogue_k) * n_a / (eff.flops * flops_per_s))
    if eff.wave_fraction > 0.0:
        t_comp_s = t_comp_s * wave_factor(padded, n_a, eff)
    out: FloatArray = np.broadcast_to(smooth_max(t_mem_s, t_comp_s, eff.overlap_p),
                                      np.broadcast_shapes(m_a.shape, k_a.shape, n_a.shape))
    return out


# --- fitting -------------------------------------------------------------------------------

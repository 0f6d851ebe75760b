"""The weight-GEMM efficiency terms of a GPU profile (one frozen dataclass, no I/O).

Its own module so that `specs.hardware` (profiles) and `specs.transferred` (the terms carried
over to GPUs without measurements) both import it and not each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specsim.errors import SpecError


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    """SpecError unless value is finite and > 0 (>= 0 with allow_zero)."""
    ok = math.isfinite(value) and (value >= 0.0 if allow_zero else value > 0.0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise SpecError(f"{name} = {value!r}: need a finite number {bound}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmEfficiency:
    """Fitted departures of a GPU's weight GEMMs from its datasheet roofline.

    The defaults are the ideal roofline (every term switched off).

    Attributes:
        bandwidth: effective fraction of the datasheet memory bandwidth (> 0).
        flops: effective fraction of the datasheet peak flop rate (> 0).
        floor_s: fixed latency of the memory path, s (>= 0).
        overlap_p: smooth-max exponent combining memory and compute time, in [1, inf]
            (inf: hard max, ideal overlap; 1: the two add up).
        tile_rows: token rows per output tile of the tensor-core kernel (>= 1).
        tile_fraction: share of the tile time paid on padded rows, in [0, 1] (0: no tile
            quantization).
        epilogue_k: per-output-element overhead in reduction steps (>= 0).
        sm_count: streaming multiprocessors of the GPU, which run the output tiles in waves
            (>= 0; 0: unknown, no wave term).
        tile_cols: weight columns (GEMM n) per output tile (>= 1).
        wave_fraction: share of the idle part of the last wave that is paid, in [0, 1]
            (0: no wave quantization; > 0 needs sm_count >= 1).
    """

    bandwidth: float = 1.0
    flops: float = 1.0
    floor_s: float = 0.0
    overlap_p: float = math.inf
    tile_rows: int = 128
    tile_fraction: float = 0.0
    epilogue_k: float = 0.0
    sm_count: int = 0
    tile_cols: int = 128
    wave_fraction: float = 0.0

    def __post_init__(self) -> None:
        check_positive("GemmEfficiency.bandwidth", self.bandwidth)
        check_positive("GemmEfficiency.flops", self.flops)
        check_positive("GemmEfficiency.floor_s", self.floor_s, allow_zero=True)
        check_positive("GemmEfficiency.epilogue_k", self.epilogue_k, allow_zero=True)
        if not (self.overlap_p >= 1.0):  # also rejects NaN
            raise SpecError(f"GemmEfficiency.overlap_p = {self.overlap_p!r}: need a number >= 1")
        for name in ("tile_fraction", "wave_fraction"):
            value = getattr(self, name)
            if not (0.0 <= value <= 1.0):
                raise SpecError(f"GemmEfficiency.{name} = {value!r}: need 0 <= value <= 1")
        for name, minimum in (("tile_rows", 1), ("tile_cols", 1), ("sm_count", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise SpecError(f"GemmEfficiency.{name} = {value!r}: need an integer >= {minimum}")
        if self.wave_fraction > 0.0 and self.sm_count < 1:
            raise SpecError(
                f"GemmEfficiency.wave_fraction = {self.wave_fraction!r} needs sm_count >= 1"
            )

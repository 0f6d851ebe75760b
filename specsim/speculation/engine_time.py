"""Round time as an engine runs it: kernel time plus the engine's host and launch terms.

    pass_s   = max(kernel_s / efficiency, kernels x launch_s) + per_pass_s + per_request_s B
    draft_s  = max(draft_kernel_s / efficiency, passes x drafter_kernels x launch_s)
               + passes x drafter_pass_s
    round_s  = verify pass_s + draft_s + round_s (engine)

Eager launches are asynchronous: the host issues kernels while the GPU runs earlier ones, so a
pass takes the longer of the two (CUDA-graph engines have no per-kernel launch term). The
efficiency turns datasheet kernel time into achieved time; a calibrated GPU profile already
carries its own and is left alone.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from specsim.forward.shapes import FloatArray
from specsim.specs.drafters import Drafter
from specsim.specs.engines import Engine
from specsim.specs.hardware import Hardware
from specsim.specs.models import Model


def model_kernels(engine: Engine, model: Model) -> float:
    """Eager kernels one forward pass of `model` launches."""
    return (model.num_layers * engine.kernels_per_layer
            + model.num_moe_layers * engine.moe_extra_kernels_per_layer
            + engine.kernels_per_pass)


def drafter_kernels(engine: Engine, drafter: Drafter | None) -> float:
    """Eager kernels of one drafter pass: its layers plus its head, top-k and bookkeeping."""
    if drafter is None:
        return 0.0
    return drafter.layers * engine.kernels_per_layer + engine.kernels_per_pass


def efficiency(engine: Engine, hw: Hardware) -> float:
    """Achieved fraction of datasheet speed: the engine's transfer for a datasheet profile."""
    return 1.0 if hw.is_calibrated else engine.bandwidth_efficiency


def pass_s(engine: Engine, hw: Hardware, kernel_s: ArrayLike, kernels: float,
           batch: ArrayLike) -> FloatArray:
    """Seconds of one target pass of `kernels` eager kernels taking `kernel_s` on the GPU."""
    gpu = np.asarray(kernel_s, dtype=np.float64) / efficiency(engine, hw)
    host = kernels * engine.kernel_launch_s if engine.eager else 0.0
    b = np.asarray(batch, dtype=np.float64)
    return np.asarray(np.maximum(gpu, host) + engine.per_pass_s + engine.per_request_s * b)


def draft_s(engine: Engine, hw: Hardware, kernel_s: ArrayLike, passes: ArrayLike,
            kernels_per_pass: float) -> FloatArray:
    """Seconds of a round's drafting: `passes` sequential drafter passes."""
    p = np.asarray(passes, dtype=np.float64)
    gpu = np.asarray(kernel_s, dtype=np.float64) / efficiency(engine, hw)
    host = p * kernels_per_pass * engine.kernel_launch_s if engine.eager else 0.0
    return np.asarray(np.where(p > 0, np.maximum(gpu, host) + p * engine.drafter_pass_s,
                               gpu))

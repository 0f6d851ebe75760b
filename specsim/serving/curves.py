"""T(n) curves a plan shows: forward-pass seconds of the target on several GPU profiles.

The report (`specsim.present.report_hardware`) picks the profiles and draws the curves; the
seconds are computed here, the way the rest of the library prices passes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from specsim.forward.cost import pass_cost
from specsim.forward.shapes import FloatArray, batch_mix_passes
from specsim.specs.hardware import Hardware
from specsim.specs.models import Model
from specsim.speculation.engine_time import expected_kernel_s


def tn_curves_s(model: Model, curves: Sequence[tuple[str, Hardware, bool]], tokens: ArrayLike,
                *, tp: int = 1) -> dict[str, FloatArray]:
    """Seconds of one pass scoring n tokens (one per request, no cached context), per curve.

    Args:
        curves: (label, profile, expected) per curve; expected: priced as every engine prices
            kernels (`engine_time.expected_kernel_s`: the profile at its expected efficiency),
            else the profile's own roofline (`pass_cost`).
        tokens: n per pass, shape (S,).
        tp: tensor-parallel degree.

    Returns:
        label -> seconds, shape (S,), in the order of `curves`.
    """
    n = np.atleast_1d(np.asarray(tokens, dtype=np.float64))
    shape = batch_mix_passes(1.0, n, np.array([0.0]))
    return {label: (expected_kernel_s(hw, model, shape, tp=tp) if expected
                    else pass_cost(model, hw, shape, tp=tp).time_s)
            for label, hw, expected in curves}

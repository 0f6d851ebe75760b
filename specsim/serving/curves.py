"""T(n) curves a plan shows: forward-pass seconds of the target on several GPU profiles.

Which profiles (`tn_curves`) and their seconds are computed here, the way the rest of the
library prices passes; the report (`specsim.present.report_hardware`) draws them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.forward.cost import pass_cost
from specsim.forward.shapes import FloatArray, batch_mix_passes
from specsim.specs.hardware import Efficiency, Hardware, load_hardware
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


# Tokens per pass of the report's T(n) table and figure.
TN_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
EXPECTED_LABEL = "expected real (ms)"


def calibrated_profiles() -> list[tuple[str, Hardware]]:
    """The built-in calibrated profiles (hardware/calibrated/*.yaml) by file stem."""
    from specsim.specs.io import builtin_dir

    folder = builtin_dir("hardware") / "calibrated"
    return [(p.stem, load_hardware(str(p))) for p in sorted(folder.glob("*.yaml"))]


def _builtin_calibrated(hw: Hardware) -> Hardware | None:
    """The built-in calibrated profile of this datasheet GPU (hardware/calibrated/<slug>-*)."""
    for slug, profile in calibrated_profiles():
        if slug.startswith(f"{hw.slug}-"):
            return profile
    return None


def tn_curves(hw: Hardware) -> list[tuple[str, Hardware]]:
    """(label, profile) per T(n) curve: the datasheet roofline; the expected real curve (the
    profile as the plan prices its kernels: `engine_time.expected_kernel_s`, a datasheet GPU at
    its expected efficiency) unless the profile is calibrated; the calibrated one when the
    profile is calibrated or a built-in calibrated profile exists for this GPU."""
    ideal = dataclasses.replace(hw, efficiency=Efficiency())
    curves = [("datasheet (ms)", ideal)]
    if hw.slug.startswith("transferred/"):
        return [*curves, ("expected real, transferred (ms)", hw)]
    if hw.is_calibrated:
        return [*curves, (f"calibrated {hw.slug} (ms)", hw)]
    curves.append((EXPECTED_LABEL, hw))
    cal = _builtin_calibrated(hw)
    if cal is not None:
        curves.append((f"calibrated {cal.slug} (ms)", cal))
    return curves


@dataclass(frozen=True, slots=True, kw_only=True)
class TnTable:
    """T(n) of a target at one TP degree with no cached context: seconds per curve label
    (`tn_curves`, in their order) at each of `tokens`."""

    tokens: tuple[int, ...]
    tp: int
    seconds: dict[str, FloatArray]


def tn_table(model: Model, hw: Hardware, *, tp: int = 1,
             tokens: tuple[int, ...] = TN_TOKENS) -> TnTable:
    """The report's T(n) curves of `model` on `hw` (and the related profiles of `tn_curves`)."""
    curves = [(label, p, label == EXPECTED_LABEL) for label, p in tn_curves(hw)]
    return TnTable(tokens=tokens, tp=tp, seconds=tn_curves_s(model, curves, tokens, tp=tp))

"""The T(n) a plan shows: forward-pass seconds of the target, as the plan prices them.

One GPU speed per plan (issue 24): the curve is the plain step the plan prices every setting
with (kernels on the GPU's one kernel model, `specs.hardware.kernel_profile`, plus the
engine's terms), beside the datasheet roofline for reference. Computed here, the
way the rest of the library prices passes; the report (`specsim.present.report_hardware`)
draws them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.forward.cost import pass_cost
from specsim.forward.shapes import FloatArray, batch_mix_passes
from specsim.specs.dtypes import Precision
from specsim.specs.engines import Engine
from specsim.specs.hardware import Efficiency, Hardware, load_hardware
from specsim.specs.models import Model
from specsim.speculation.engine_time import plain_step_s


def priced_tn_s(engine: Engine | None, hw: Hardware, model: Model, tokens: ArrayLike, *,
                tp: int = 1, precision: Precision | None = None) -> FloatArray:
    """Seconds of one plain step over n requests of one token each (no cached context), as the
    plan prices it: the kernels on the GPU's one kernel model (`specs.hardware.kernel_profile`)
    with the engine's kernel terms, plus the engine's host and launch
    terms per pass and per request (`engine_time.round_time`'s step; what `specsim roofline`
    prints as engine_ms). No engine (the roofline): the profile's kernels alone.

    Args:
        tokens: n per pass (= requests), shape (S,).
        tp: tensor-parallel degree.
        precision: the weights and KV cache as served (None: the model's own, bf16).

    Returns:
        Seconds, shape (S,).
    """
    n = np.atleast_1d(np.asarray(tokens, dtype=np.float64))
    shape = batch_mix_passes(1.0, n, np.array([0.0]))
    if engine is None:
        return np.asarray(pass_cost(model, hw, shape, tp=tp, precision=precision).time_s,
                          dtype=np.float64)
    return plain_step_s(engine, hw, model, shape, n, tp=tp, precision=precision)


# Tokens per pass of the report's T(n) table and figure.
TN_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
DATASHEET_LABEL = "datasheet roofline (ms)"


def priced_label(engine: Engine | None) -> str:
    """Column label of the T(n) the plan prices with (`priced_tn_s`)."""
    return f"priced by the plan, {engine.slug} (ms)" if engine else "priced by the plan (ms)"


def calibrated_profiles() -> list[tuple[str, Hardware]]:
    """The built-in calibrated profiles (hardware/calibrated/*.yaml) by file stem."""
    from specsim.specs.paths import builtin_dir

    folder = builtin_dir("hardware") / "calibrated"
    return [(p.stem, load_hardware(str(p))) for p in sorted(folder.glob("*.yaml"))]


@dataclass(frozen=True, slots=True, kw_only=True)
class TnTable:
    """T(n) of a target at one TP degree with no cached context: seconds per curve label
    (`tn_table`: the datasheet roofline, then the T(n) the plan prices with) at each of
    `tokens`."""

    tokens: tuple[int, ...]
    tp: int
    seconds: dict[str, FloatArray]


def tn_table(model: Model, hw: Hardware, engine: Engine | None, *, tp: int = 1,
             tokens: tuple[int, ...] = TN_TOKENS, precision: Precision | None = None
             ) -> TnTable:
    """The report's T(n): the datasheet roofline (the article's idealized GPU, for reference)
    and the one T(n) the plan prices with (`priced_tn_s`), in that order, at `precision`."""
    ideal = dataclasses.replace(hw, efficiency=Efficiency())
    n = np.asarray(tokens, dtype=np.float64)
    seconds = {DATASHEET_LABEL: priced_tn_s(None, ideal, model, n, tp=tp, precision=precision),
               priced_label(engine): priced_tn_s(engine, hw, model, n, tp=tp,
                                                 precision=precision)}
    return TnTable(tokens=tokens, tp=tp, seconds=seconds)

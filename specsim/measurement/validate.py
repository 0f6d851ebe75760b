"""Predicted against published speedups, with every fitted engine term held out by source.

For each row with a published tau and a measured speedup, the round is timed in the row's
setting with tau held at the published value, so only the time of a round is tested. The
engine terms in `FITTABLE` enter as

    speedup = tau (B0 + per_pass) / (V0 + per_pass + D0 + passes drafter_pass + round)

where B0, V0, D0 are the baseline, verification and drafting times with those terms at zero.
They are fitted (non-negative, least squares on log speedup) per engine on the rows of every
other source, and the row is predicted with that fit: the error reported is held out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from specsim.measurement.published import NO_DRAFTER_MODEL, OTHER_ENGINE, PublishedRow
from specsim.specs.drafters import Drafter, load_drafter
from specsim.specs.engines import FIT_BOUNDS, FITTABLE, Engine, load_engine
from specsim.specs.hardware import load_hardware
from specsim.specs.models import Model, load_model
from specsim.speculation import engine_time
from specsim.speculation.draft_cost import draft_passes
from specsim.speculation.speedup import Candidates, Setup, speedup_table

CONTEXT_TOKENS = 1024.0  # cached tokens per request when a row does not say (stated default)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundParts:
    """A row's achieved kernel times (seconds) and eager kernel counts, engine terms apart."""

    baseline_s: float
    verify_s: float
    draft_s: float
    passes: float
    target_kernels: float
    drafter_kernels: float
    request_s: float  # per_request_s x batch

    def speedup(self, tau: float, kernel_launch_s: float, per_pass_s: float,
                drafter_pass_s: float, round_s: float) -> float:
        host = self.target_kernels * kernel_launch_s
        fixed = per_pass_s + self.request_s
        baseline = max(self.baseline_s, host) + fixed
        verify = max(self.verify_s, host) + fixed
        draft = self.draft_s
        if self.passes > 0:
            draft = (max(self.draft_s, self.passes * self.drafter_kernels * kernel_launch_s)
                     + self.passes * drafter_pass_s)
        return tau * baseline / (verify + draft + round_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """One row: measured and predicted speedup, or why it is not predicted."""

    row: PublishedRow
    predicted: float | None = None
    reason: str = ""
    terms: dict[str, float] = dataclasses.field(default_factory=dict)
    held_out: bool = False

    @property
    def error(self) -> float | None:
        """Signed relative error of the prediction (predicted / measured - 1)."""
        if self.predicted is None or self.row.speedup is None:
            return None
        return self.predicted / self.row.speedup - 1.0

    @property
    def group(self) -> str:
        return self.row.group


def unpredictable(row: PublishedRow) -> str:
    """Why a row cannot be predicted ('' if it can)."""
    if row.method == "magicdec_selfspec":
        return ("self-speculation with a StreamingLLM sparse-KV draft at TP 8, long context; "
                "specsim has no sparse-KV drafter, and no tau is published")
    if row.drafter_spec is None:
        return f"method '{row.method}' has no drafter model in specsim"
    if row.engine == OTHER_ENGINE:
        return "engine not modelled (gpt-fast / own CUDA-graph code)"
    if row.tau is None:
        return "no published tau (only the speedup)"
    if row.speedup is None:
        return "no measured speedup (tau only)"
    if row.draft_tokens is None or row.depth is None:
        return "drafted tokens or depth not published"
    return ""


def row_parts(row: PublishedRow, engine: Engine) -> RoundParts:
    """Time the row's round with its engine's fittable terms at zero."""
    zero = engine.with_terms(**dict.fromkeys(FITTABLE, 0.0), per_request_s=0.0)
    target = load_model(row.model)
    drafter = _drafter(row, target)
    nodes, depth = float(row.draft_tokens or 0), float(row.depth or 0)
    assert row.tau is not None
    cands = Candidates(nodes=np.array([nodes]), depth=np.array([depth]),
                       tau=np.array([row.tau]),
                       max_width=np.array([2.0 if row.shape == "tree" else 1.0]),
                       shape=(row.shape,))
    setup = Setup(target=target, hardware=load_hardware(row.hardware), drafter=drafter,
                  context=CONTEXT_TOKENS, tp=row.tp, engine=zero,
                  draft_cost=0.0 if drafter is None else None)
    table = speedup_table(setup, [row.batch], cands)
    passes = 0.0 if drafter is None else float(draft_passes(drafter, depth))
    eager = engine.eager
    return RoundParts(baseline_s=float(table.baseline_s[0]), verify_s=float(table.verify_s[0, 0]),
                      draft_s=float(table.draft_s[0, 0]), passes=passes,
                      target_kernels=engine_time.model_kernels(engine, target) if eager else 0.0,
                      drafter_kernels=engine_time.drafter_kernels(engine, drafter) if eager
                      else 0.0, request_s=engine.per_request_s * row.batch)


def _drafter(row: PublishedRow, target: Model) -> Drafter | None:
    """The row's drafter on its target (None: drafting without a model)."""
    if row.drafter_spec in (None, NO_DRAFTER_MODEL):
        return None
    d = load_drafter(row.drafter_spec, target=target)
    if not row.drafter_takes_target_width or d.hidden_size == target.hidden_size:
        return d
    return dataclasses.replace(
        d, hidden_size=target.hidden_size, num_attention_heads=target.num_attention_heads,
        num_kv_heads=target.num_kv_heads, head_dim=target.head_dim,
        intermediate_size=target.intermediate_size, vocab_size=target.vocab_size)


def fit_terms(samples: list[tuple[RoundParts, float, float]]) -> dict[str, float]:
    """Non-negative engine terms minimizing squared log error over (parts, tau, measured)."""
    def residuals(x: np.ndarray) -> np.ndarray:
        return np.array([np.log(p.speedup(tau, *x) / measured) for p, tau, measured in samples])

    low = np.array([FIT_BOUNDS[k][0] for k in FITTABLE])
    high = np.array([FIT_BOUNDS[k][1] for k in FITTABLE])
    start = np.clip(np.array([7e-6, 1e-3, 1e-3, 1e-3]), low, high)
    fit = least_squares(residuals, start, bounds=(low, high), x_scale=np.array([1e-6, 1e-3,
                                                                                1e-3, 1e-3]))
    return dict(zip(FITTABLE, (float(v) for v in fit.x), strict=True))


def validate(rows: list[PublishedRow]) -> list[Validation]:
    """Every row: predicted with its engine's terms fitted on the other sources, or why not."""
    engines: dict[str, Engine] = {}
    parts: dict[str, RoundParts] = {}
    out: dict[str, Validation] = {}
    for row in rows:
        reason = unpredictable(row)
        if reason:
            out[row.id] = Validation(row=row, reason=reason)
            continue
        engine = engines.setdefault(row.engine, load_engine(row.engine))
        parts[row.id] = row_parts(row, engine)
    fittable = [r for r in rows if r.id in parts]
    for row in fittable:
        engine = engines[row.engine]
        train = [(parts[r.id], float(r.tau or 0), float(r.speedup or 0)) for r in fittable
                 if r.engine == row.engine and r.file != row.file]
        terms = fit_terms(train) if train else {k: getattr(engine, k) for k in FITTABLE}
        assert row.tau is not None
        out[row.id] = Validation(row=row, predicted=parts[row.id].speedup(row.tau, **terms),
                                 terms=terms, held_out=bool(train))
    return [out[r.id] for r in rows]


def full_fit(rows: list[PublishedRow], engine_slug: str) -> dict[str, float]:
    """Engine terms fitted on every predictable row of that engine (what its YAML ships)."""
    engine = load_engine(engine_slug)
    samples = [(row_parts(r, engine), float(r.tau or 0), float(r.speedup or 0)) for r in rows
               if r.engine == engine_slug and not unpredictable(r)]
    return fit_terms(samples)

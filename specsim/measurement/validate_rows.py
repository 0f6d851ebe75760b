"""A published row's setting and its round's kernel times, as `validate` predicts them.

`row_setup` sets a row up as a speedup-table setup with its one candidate (its context,
`row_context`; its drafter on its target); `row_parts` times its round once with the engine's
host terms at zero (ZEROED): the achieved kernel times of the plain step, verification and
drafting (`RoundParts`), a concurrency row's with the prompts arriving in steady state
(`prompt_tokens_per_step`). The engine terms enter afterwards, only through
`engine_time.round_time` (`RoundParts.times`). The built-in specs a row names are read once
per process.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from specsim.errors import SpecError
from specsim.measurement.published import NO_DRAFTER_MODEL, PublishedRow
from specsim.specs.drafters import Drafter, load_drafter
from specsim.specs.dtypes import Precision
from specsim.specs.engines import Engine
from specsim.specs.hardware import Hardware, load_hardware
from specsim.specs.models import Model, load_model
from specsim.speculation import engine_time
from specsim.speculation.draft_cost import draft_passes
from specsim.speculation.speedup import (
    Candidates,
    Setup,
    chunk_share_s,
    prefill_stall_s,
    speedup_table,
)

CONTEXT_TOKENS = 1024.0  # cached tokens per request when a row does not say (stated default)
# Host terms: kernel times are computed without them.
ZEROED = ("op_host_s", "kernel_s", "per_pass_s", "per_request_s", "drafter_pass_s",
          "drafter_request_s", "round_s", "round_request_s")


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundParts:
    """A row's achieved kernel times (seconds), its setting, and its engine; the engine terms
    enter only through `engine_time.round_time`."""

    engine: Engine  # as the row ran it (its spec_overlap)
    target: Model
    drafter: Drafter | None
    batch: float
    baseline_s: float
    verify_s: float
    draft_s: float
    passes: float
    weight_dtype: str = ""  # the target's weights as the row served them ("": its own)
    # the verification pass's softmax attention (kernel model seconds, included in verify_s
    # once): the engine's verify_attention_factor adds (factor - 1) x this
    verify_attention_s: float = 0.0

    def times(self, terms: dict[str, float]) -> tuple[float, float]:
        """(plain decoding step, speculative round) in seconds with these engine terms."""
        engine = _with_terms(self.engine, terms)
        verify = self.verify_s + (engine.verify_attention_factor - 1.0) * self.verify_attention_s
        rt = engine_time.round_time(
            engine, self.target, self.drafter, batch=self.batch,
            step_gpu_s=self.baseline_s, verify_gpu_s=verify, draft_gpu_s=self.draft_s,
            passes=self.passes, weight_dtype=self.weight_dtype)
        return float(rt.step_s), float(rt.round_s)


_ENGINES: dict[tuple[str, bool, tuple[tuple[str, float], ...]], tuple[Engine, Engine]] = {}


def _with_terms(engine: Engine, terms: dict[str, float]) -> Engine:
    """engine.with_terms(**terms), built once per engine and terms: a fit evaluates every row
    at the same terms, and building the record per row was a third of `specsim plan`'s time.
    A hit must be the same engine (equal records), not only the same name."""
    key = (engine.slug, engine.spec_overlap, tuple(sorted(terms.items())))
    hit = _ENGINES.get(key)
    if hit is not None and (hit[0] is engine or hit[0] == engine):
        return hit[1]
    if len(_ENGINES) >= 4096:
        _ENGINES.clear()
    built = engine.with_terms(**terms)
    _ENGINES[key] = (engine, built)
    return built


def row_setup(row: PublishedRow, engine: Engine) -> tuple[Setup, Candidates]:
    """The row's setting as a speedup-table setup with `engine`, and its one candidate."""
    target = _builtin_model(row.model)
    drafter = None if row.plain else _drafter(row, target)
    nodes, depth = (0.0, 0.0) if row.plain else (float(row.draft_tokens or 0),
                                                 float(row.depth or 0))
    cands = Candidates(nodes=np.array([nodes]), depth=np.array([depth]),
                       tau=np.array([row.tau or 1.0]),
                       max_width=np.array([2.0 if row.shape == "tree" else 1.0]),
                       shape=(row.shape,))
    setup = Setup(target=target, hardware=_builtin_hardware(row.hardware), drafter=drafter,
                  context=row_context(row), tp=row.tp, ep=row.ep,
                  engine=engine.with_spec_overlap(row.spec_overlap),
                  draft_cost=0.0 if drafter is None else None,
                  precision=Precision(weight_dtype=row.weight_dtype, kv_dtype=row.kv_dtype))
    return setup, cands


def row_context(row: PublishedRow) -> float:
    """Cached tokens per request while the row decodes: as the source states it, else the
    prompt plus half the output (the mean over a request's decoding), else CONTEXT_TOKENS."""
    if row.context is not None:
        return row.context
    if row.input_tokens is not None and row.output_tokens is not None:
        return row.input_tokens + row.output_tokens / 2.0
    return CONTEXT_TOKENS


def prompt_tokens_per_step(row: PublishedRow, tokens_per_round: float) -> float:
    """Prompt tokens per request that ride in each step (plain) or round of a concurrency run:
    in steady state a request finishes every output / tokens_per_round steps and a new one
    arrives, so each request brings tokens_per_round x input / output prompt tokens per step
    (a concurrency benchmark at C users prefills about C I / O tokens per plain step). A
    number without the requests' own prefill (TPOT) sees the others' only: (C - 1) / C of it.
    0 for a closed batch."""
    if not row.concurrency or not row.input_tokens or not row.output_tokens:
        return 0.0
    share = 1.0 if row.prefill_included else (row.batch - 1.0) / row.batch
    return share * tokens_per_round * row.input_tokens / row.output_tokens


def row_parts(row: PublishedRow, engine: Engine) -> RoundParts:
    """Time the row's round with its engine's host terms at zero (kernel times only); a
    concurrency row's passes carry the prompts arriving in steady state: as chunks riding in
    its steps (chunked prefill), or, on an engine that runs prompts as passes of their own
    (`Engine.prefill_mixed` false), as those passes' share of each step and round
    (`prefill_stall_s`, priced with the engine's terms as loaded: a prefill pass is no
    speculative round, so the fitted round terms do not enter it)."""
    setup, cands = row_setup(row, engine.with_terms(**dict.fromkeys(ZEROED, 0.0),
                                                    verify_attention_factor=1.0))
    table = speedup_table(setup, [row.batch], cands)
    depth = float(cands.depth[0])
    passes = 0.0 if setup.drafter is None else float(draft_passes(setup.drafter, depth))
    baseline, verify = float(table.baseline_s[0]), float(table.verify_s[0, 0])
    if row.concurrency:
        context = float(np.mean(setup.context))
        q = np.array([1.0, float(cands.nodes[0]) + 1.0])
        p = np.array([prompt_tokens_per_step(row, 1.0),
                      prompt_tokens_per_step(row, float(cands.tau[0]))])
        if engine.prefill_mixed or not row.input_tokens:
            extra = chunk_share_s(setup, q, p, float(row.batch), context)
        else:
            arrivals = float(row.batch) * p / float(row.input_tokens)
            full, _ = row_setup(row, engine)
            extra = prefill_stall_s(full, float(row.input_tokens), arrivals)
        baseline, verify = baseline + float(extra[0]), verify + float(extra[1])
    return RoundParts(
        engine=engine.with_spec_overlap(row.spec_overlap), target=setup.target,
        drafter=setup.drafter, batch=float(row.batch), baseline_s=baseline, verify_s=verify,
        draft_s=float(table.draft_s[0, 0]), passes=passes,
        weight_dtype=setup.precision.weight_dtype,
        verify_attention_s=float(np.asarray(table.verify_attention_s).reshape(-1)[0]))


# A published row names built-in specs only (published.py checks), and the samples of one
# validation read the same few dozen files over a hundred times: each is read once.
@functools.cache
def _builtin_model(name: str) -> Model:
    return load_model(name)


@functools.cache
def _builtin_hardware(name: str) -> Hardware:
    return load_hardware(name)


@functools.cache
def _builtin_drafter(name: str, target: str, checked: bool = True) -> Drafter:
    """The drafter on the row's target, through the one compatibility check every command
    uses (a drafter made for another model is refused, naming both) unless the row takes the
    spec only as an architecture at its target's width (`checked` False)."""
    from specsim.speculation.setup import check_compatible

    drafter = load_drafter(name, target=_builtin_model(target))
    if checked:
        check_compatible(load_drafter(name).target, drafter, _builtin_model(target), name)
    return drafter


def _drafter(row: PublishedRow, target: Model) -> Drafter | None:
    """The row's drafter on its target (None: drafting without a model)."""
    if row.drafter_spec in (None, NO_DRAFTER_MODEL):
        return None
    try:
        d = _builtin_drafter(row.drafter_spec, target.slug, not (
            row.drafter_takes_target_width or row.drafter_spec_stands_in))
    except SpecError as err:
        raise SpecError(f"{row.file}.yaml row {row.id}: field 'drafter_spec': {err} (if the "
                        "spec only stands for the architecture of a checkpoint made for this "
                        "target, say drafter_spec_stands_in: true)") from None
    if not row.drafter_takes_target_width or d.hidden_size == target.hidden_size:
        return d
    # Widened to the target's shapes; an own LM head keeps its draft vocabulary (EAGLE-3's
    # 32,000 of the target's), a shared one is the target's.
    return dataclasses.replace(
        d, hidden_size=target.hidden_size, num_attention_heads=target.num_attention_heads,
        num_kv_heads=target.num_kv_heads, head_dim=target.head_dim,
        intermediate_size=target.intermediate_size,
        vocab_size=d.vocab_size if d.own_lm_head else target.vocab_size)

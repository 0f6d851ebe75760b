"""What a speculation question is asked about: the specs, the context and the acceptance.

`load_setup` turns names and values (as a command line or a notebook gives them) into the
`Setup` a speedup table is computed for and the `AcceptanceProfile` it uses. Acceptance comes,
in this order, from an explicit constant alpha, from a workload, or from the drafter's
published value; a workload also gives the context when none is given.
"""

from __future__ import annotations

from dataclasses import replace

from specsim.engines import check_engine_runs, check_engine_serves, precision_cautions
from specsim.errors import SpecError, check_number, parameter_error
from specsim.specs.acceptance import AcceptanceProfile, constant_profile
from specsim.specs.defaults import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_DRAFTER,
    DEFAULT_ENGINE,
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    MAX_DRAFT_COST,
)
from specsim.specs.drafters import Drafter, load_drafter
from specsim.specs.dtypes import Precision
from specsim.specs.engines import engine_or_none, load_engine
from specsim.specs.hardware import load_hardware
from specsim.specs.models import Model, check_tensor_parallel, load_model
from specsim.specs.workloads import Workload, load_workload
from specsim.speculation.speedup import Setup


def choose_acceptance(*, alpha: float | None, workload: Workload | None,
                      drafter: Drafter | None, allow_none: bool = False
                      ) -> AcceptanceProfile | None:
    """The acceptance to use: alpha, else the drafter's on the workload (`Workload.profile_for`:
    its own measurement before another drafter's of its family, with its provenance), else the
    drafter's published one (None only with `allow_none`, when a ranks file will give it)."""
    if alpha is not None and workload is not None:
        raise parameter_error("alpha", "give a constant alpha or a workload, not both")
    if alpha is not None:
        return constant_profile(alpha)
    if workload is not None:
        return workload.profile_for(drafter)
    if drafter is not None and drafter.acceptance is not None:
        return drafter.acceptance
    if allow_none:
        return None
    what = f"drafter {drafter.slug} has no published acceptance" if drafter is not None \
        else "no drafter given"
    raise SpecError(f"no acceptance ({what}): give a constant alpha or a workload")


def load_setup(*, hardware: str = DEFAULT_HARDWARE, model: str | None = None,
               drafter: str | None = None, alpha: float | None = None,
               workload: str | None = None, context: float | tuple[float, ...] | None = None,
               tp: int = 1, draft_cost: float | None = None,
               precision: Precision | None = None, engine: str = DEFAULT_ENGINE,
               ep: int = 1, ranks: str | None = None
               ) -> tuple[Setup, AcceptanceProfile]:
    """The setup and acceptance profile of a speculation question, from spec names.

    hardware, model, drafter, workload: built-in slugs or YAML paths. model defaults to the
    drafter's target, else DEFAULT_MODEL. drafter: when none is given (and no draft_cost),
    DEFAULT_DRAFTER where the target is its target, so that the default setup is one
    (`default_drafter`). context: cached tokens per request, or a mix of
    lengths the batch spreads over evenly; default: the workload's, else DEFAULT_CONTEXT_TOKENS.
    engine: a serving engine (`engines/`) whose host and launch terms every pass pays; the
    built-in "roofline" is the idealized GPU with no engine.
    """
    if drafter is None and draft_cost is None:
        drafter = default_drafter(model)
    target, draft, notes = load_target_and_drafter(model, drafter)
    check_tensor_parallel(target, tp)
    check_number(draft_cost, "draft_cost", low=0.0, high=MAX_DRAFT_COST)
    check_number(alpha, "alpha", low=0.0, high=1.0)
    load = load_workload(workload) if workload else None
    profile = choose_acceptance(alpha=alpha, workload=load, drafter=draft,
                                allow_none=ranks is not None)
    if ranks is not None:
        profile = with_ranks(profile, ranks)
    if profile is None:
        raise SpecError("no acceptance: give a constant alpha, a workload or a ranks file")
    if context is None:
        context = load.context if load else DEFAULT_CONTEXT_TOKENS
    timing = engine_or_none(load_engine(engine))
    gpu = load_hardware(hardware)
    if timing is not None:
        check_engine_serves(timing.base_slug, gpu.vendor, gpu.slug)  # on its vendor's GPUs
        check_engine_runs(timing.base_slug, draft)  # an engine that refuses what it lacks
    setup = Setup(target=target, hardware=gpu, drafter=draft,
                  context=context, tp=tp, draft_cost=draft_cost,
                  precision=precision or Precision(), engine=timing, ep=ep, notes=notes)
    return replace(setup, notes=(*notes, *precision_cautions(setup))), profile


def load_target_and_drafter(model: str | None, drafter: str | None
                            ) -> tuple[Model, Drafter | None, tuple[str, ...]]:
    """The target and the drafter a question names, the drafter checked against the target
    (`check_compatible`: one made for another model is refused, a variant of its own target
    noted). model: default the drafter's own target, else DEFAULT_MODEL (None: not given; ''
    is refused as a name)."""
    target = load_model(model) if model is not None else None
    draft = load_drafter(drafter, target=target) if drafter is not None else None
    notes: tuple[str, ...] = ()
    if draft is not None and target is not None:
        note = check_compatible(load_drafter(drafter).target, draft,  # type: ignore[arg-type]
                                target, drafter)
        notes = (note,) if note else ()
    if target is None:
        target = draft.target if draft else load_model(DEFAULT_MODEL)
    return target, draft, notes


def default_drafter(model: str | None) -> str | None:
    """DEFAULT_DRAFTER when the target is its target (no model given, or DEFAULT_MODEL,
    which is the default drafter's target), else None: no drafter is guessed for another
    model."""
    return DEFAULT_DRAFTER if model in (None, "", DEFAULT_MODEL) else None


def with_ranks(profile: AcceptanceProfile | None, path: str) -> AcceptanceProfile:
    """The profile with measured per-rank acceptance from a ranks file (`--ranks`); without
    another profile, chains use a_0 at every position."""
    from specsim.speculation.rank_files import read_ranks

    ranks = read_ranks(path)
    if profile is None:
        return AcceptanceProfile(position_alphas=ranks[:1], rank_acceptance=ranks,
                                 source=f"ranks file {path} (chains: a_0 at every position)")
    return replace(profile, rank_acceptance=ranks, ranks_from_chain=False,
                   source=f"{profile.source}; ranks from {path}")


# Architecture numbers a quantized or renamed variant of a model shares with it.
_ARCHITECTURE = ("hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "head_dim",
                 "intermediate_size", "vocab_size", "moe", "mla")


def check_compatible(own_target: Model, drafter: Drafter, target: Model,
                     name: str | None = None) -> str:
    """A drafter runs on `target` only if it was made for it: same hidden size where it reads
    the target's hidden states, same vocabulary, and the target it was trained for, or a
    variant of it with the same architecture (a quantized or renamed checkpoint: Qwen3-8B-FP8
    for a Qwen3-8B drafter), accepted with the note returned ('' for its own target). name:
    the drafter as the user gave it (a slug or a path), in the messages."""
    who = f"drafter {name or drafter.slug} (made for {own_target.slug})"
    if own_target.slug != target.slug and all(
            getattr(own_target, k) == getattr(target, k) for k in _ARCHITECTURE):
        return (f"{target.slug} has the architecture of {own_target.slug}, the target "
                f"{drafter.slug} was trained for (a quantized or renamed variant): its "
                "acceptance is assumed to carry over; measure it with `specsim acceptance fit`")
    if own_target.vocab_size != target.vocab_size:
        raise SpecError(f"{who} does not fit target {target.slug}: vocabulary "
                        f"{own_target.vocab_size} vs {target.vocab_size}")
    reads_hidden = drafter.kind.cache != "model" and drafter.fused_target_layers > 0
    if reads_hidden and own_target.hidden_size != target.hidden_size:
        raise SpecError(f"{who} does not fit target {target.slug}: it reads hidden states of "
                        f"size {own_target.hidden_size}, the target has {target.hidden_size}")
    if drafter.kind.cache != "model" and own_target.slug != target.slug:
        raise SpecError(f"{who} was trained for {own_target.slug}, not {target.slug}; pass a "
                        f"drafter YAML whose 'target' is {target.slug} if one was trained for it")
    return ""

"""The capacity plan: every number `specsim plan` reports, computed from the library.

`make_plan` loads the specs, runs the serving model for each drafter at each TP degree, picks
the setting that meets the per-user SLO with the fewest GPUs (and the plain-decoding answer to
compare), recommends a chain or tree per batch size, and simulates the batch-level policies.
Rendering lives in `specsim.present.report`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from specsim.errors import SpecError
from specsim.forward.memory import serving_memory
from specsim.serving.capacity import (
    BATCH_GRID,
    TP_DEGREES,
    ServingTable,
    Setting,
    best_setting,
    check_fits_somewhere,
    fastest_setting,
    serving_table,
)
from specsim.serving.policies import PolicySweep, simulate_policies
from specsim.serving.scenarios import Scenario, load_scenario
from specsim.specs.drafters import Drafter, load_drafter
from specsim.specs.engines import engine_or_none, load_engine
from specsim.specs.hardware import Hardware, load_hardware
from specsim.specs.io import builtin_names
from specsim.specs.models import Model, load_model
from specsim.speculation.acceptance import AcceptanceProfile
from specsim.speculation.recommend import Recommendation, recommend
from specsim.speculation.speedup import (
    Candidates,
    Setup,
    SpeedupTable,
    candidates_for,
    speedup_sweep,
)

MAX_NODES = 64
RECOMMEND_BATCH = (1, 4, 16, 64, 256)
SPEEDUP_BATCH = (1, 8, 32, 128)
SPEEDUP_NODES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
# Per-user speed SLO when none is given: a fast reader, tokens/s (a stated default).
DEFAULT_MIN_TOKENS_PER_S_PER_USER = 30.0
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class DrafterPlan:
    """One drafter's part of the plan (name "none" for plain decoding only)."""

    name: str
    drafter: Drafter | None
    profile: AcceptanceProfile | None
    tables: list[ServingTable]
    speedup: SpeedupTable | None
    recommendation: Recommendation | None
    setup: Setup | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Everything the report shows; settings are None when no setting meets the SLO."""

    hardware: Hardware
    model: Model
    engine: str
    scenario: Scenario
    setup: Setup
    drafters: list[DrafterPlan]
    min_tokens_per_s_per_user: float
    target_tokens_per_s: float | None
    best: Setting | None
    best_plain: Setting | None
    closest: Setting | None
    policies: PolicySweep | None
    policy_drafter: str
    notes: list[str] = field(default_factory=list)

    @property
    def tables(self) -> dict[str, list[ServingTable]]:
        return {d.name: d.tables for d in self.drafters}


def default_drafters(model: Model) -> list[str]:
    """Built-in drafters trained for the model (by their `target`)."""
    names = []
    for slug in builtin_names("drafters"):
        try:
            if load_drafter(slug).target.slug == model.slug:
                names.append(slug)
        except SpecError:
            continue
    return names


def _candidates(drafter: Drafter, profile: AcceptanceProfile) -> Candidates:
    return candidates_for(drafter, profile, shape="auto", max_nodes=MAX_NODES)


def _drafter_plan(base: Setup, scenario: Scenario, name: str, tps: tuple[int, ...],
                  progress: Progress) -> DrafterPlan:
    drafter = load_drafter(name, target=base.target)
    profile = scenario.profile_for(drafter)
    setup = dataclasses.replace(base, drafter=drafter, context=scenario.decode_context_tokens)
    cands = _candidates(drafter, profile)
    tables = []
    for tp in tps:
        progress(f"  {name}: serving model at TP {tp} ({cands.nodes.size} candidates x "
                 f"{len(BATCH_GRID)} batch sizes)")
        tables.append(serving_table(setup, scenario, cands, tp=tp))
    tp = next((t.tp for t in tables if t.weights_fit), tps[0])
    one = dataclasses.replace(setup, tp=tp)
    sweep = speedup_sweep(one, profile, SPEEDUP_BATCH, SPEEDUP_NODES, shape="auto")
    rec = recommend(one, profile, RECOMMEND_BATCH, max_nodes=MAX_NODES, shape="auto")
    return DrafterPlan(name=name, drafter=drafter, profile=profile, tables=tables,
                       speedup=sweep, recommendation=rec, setup=one)


def _plain_plan(base: Setup, scenario: Scenario, tps: tuple[int, ...]) -> DrafterPlan:
    none = Candidates(nodes=np.zeros(1), depth=np.zeros(1), tau=np.ones(1),
                      max_width=np.zeros(1), shape=("chain",))
    setup = dataclasses.replace(base, drafter=None, draft_cost=0.0)
    return DrafterPlan(name="none", drafter=None, profile=None,
                       tables=[serving_table(setup, scenario, none, tp=tp) for tp in tps],
                       speedup=None, recommendation=None)


def make_plan(*, hardware: str, model: str, drafters: list[str] | None, engine: str,
              workload: str, min_tokens_per_s_per_user: float | None = None,
              target_tokens_per_s: float | None = None,
              acceptance: AcceptanceProfile | None = None,
              tps: tuple[int, ...] = TP_DEGREES, progress: Progress = _quiet,
              policy_seed: int = 0) -> Plan:
    """The capacity plan for a model on a GPU under a workload (see the module docstring).

    drafters: slugs or paths (None: the built-in drafters trained for the model);
    acceptance: one profile for every drafter (e.g. `specsim acceptance fit` output).
    """
    if target_tokens_per_s is not None and target_tokens_per_s <= 0:
        raise SpecError(f"option --target-throughput: must be > 0, got {target_tokens_per_s:g}")
    if min_tokens_per_s_per_user is not None and min_tokens_per_s_per_user < 0:
        raise SpecError("option --min-tokens-per-s-per-user: must be >= 0, got "
                        f"{min_tokens_per_s_per_user:g}")
    scenario = load_scenario(workload)
    if acceptance is not None:
        scenario = scenario.with_acceptance(acceptance)
    target = load_model(model)
    hw = load_hardware(hardware)
    base = Setup(target=target, hardware=hw, context=scenario.decode_context_tokens,
                 engine=engine_or_none(load_engine(engine)))
    names = drafters if drafters is not None else default_drafters(target)
    notes = [] if names else [f"no built-in drafter is trained for {target.slug}; plain "
                              "decoding only (give --drafter to add one)"]
    progress(f"plan: {target.name} on {hw.name}, workload {scenario.slug}, engine {engine}")
    plain = _plain_plan(base, scenario, tps)
    check_fits_somewhere(plain.tables, target.name, hw.name)
    parts = [_drafter_plan(base, scenario, n, tps, progress) for n in names]
    slo = DEFAULT_MIN_TOKENS_PER_S_PER_USER if min_tokens_per_s_per_user is None \
        else min_tokens_per_s_per_user
    tables = {p.name: p.tables for p in parts}
    best = best_setting(tables, min_tokens_per_s_per_user=slo,
                        target_tokens_per_s=target_tokens_per_s) if tables else None
    best_plain = best_setting({"none": plain.tables}, min_tokens_per_s_per_user=slo,
                              target_tokens_per_s=target_tokens_per_s)
    closest = fastest_setting({**tables, "none": plain.tables})
    policies, policy_drafter = None, ""
    if parts and parts[0].drafter is not None and parts[0].profile is not None:
        policy_drafter = parts[0].name
        progress(f"  policies: load sweep with {policy_drafter}")
        fit_tp = next(t.tp for t in plain.tables if t.weights_fit)
        setup = dataclasses.replace(base, drafter=parts[0].drafter, tp=fit_tp)
        policies = simulate_policies(setup, parts[0].profile, seed=policy_seed)
    return Plan(hardware=hw, model=target, engine=engine, scenario=scenario, setup=base,
                drafters=[*parts, plain], min_tokens_per_s_per_user=slo,
                target_tokens_per_s=target_tokens_per_s, best=best, best_plain=best_plain,
                closest=closest, policies=policies, policy_drafter=policy_drafter, notes=notes)


def memory_by_context(plan: Plan, contexts: tuple[float, ...]) -> list[dict[str, float]]:
    """Per TP degree and context: weights, cache per request and max concurrency (first
    drafter's cache included when there is one)."""
    drafter = plan.drafters[0].drafter
    rows = []
    for tp in sorted({t.tp for t in plan.drafters[0].tables}):
        for ctx in contexts:
            m = serving_memory(plan.model, plan.hardware, 1.0, ctx, drafter=drafter, tp=tp)
            rows.append({"tp": tp, "context_tokens": ctx,
                         "weights_gb": (m.weights_bytes + m.drafter_weights_bytes) / 1e9,
                         "cache_per_request_gb": m.per_request_bytes / 1e9,
                         "max_concurrency": m.max_requests})
    return rows

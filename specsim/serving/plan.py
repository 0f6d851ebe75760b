"""The capacity plan: every number `specsim plan` reports, computed from the library.

`make_plan` loads the specs, runs the serving model for each drafter at each TP degree, picks
the setting that meets the per-user SLO with the fewest GPUs (and the plain-decoding answer to
compare), recommends a chain or tree per batch size, and simulates the batch-level policies.
The serving model considers only what an engine builds (`engine_candidates`: the candidates
`specsim recommend` weighs: chains for vLLM, SGLang's trees or block), so every setting the plan
names has a command (`setting_commands`); the best tree of any shape is kept as a bound only.
Each drafter's part of the plan (`DrafterPlan`, its candidates and tables) is computed in
`specsim.serving.drafter_plan`.
The plan carries `specsim validate`'s held-out error (`Plan.validation`), which the report
quotes. Rendering lives in `specsim.present.report`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from specsim.engines import (
    EngineAdapter,
    adapters,
    check_engine_runs,
    check_engine_serves,
    precision_cautions,
)
from specsim.engines.parallel import parallel_commands
from specsim.errors import SpecError, check_number, parameter_error
from specsim.forward.cost import check_layout
from specsim.forward.memory import serving_memory
from specsim.measurement.validate_summary import (
    RATES,
    GroupError,
    held_out_summary,
    rates_group,
)
from specsim.serving.capacity import (
    TP_DEGREES,
    Demand,
    ServingTable,
    Setting,
    Slo,
    best_setting,
    check_fits_somewhere,
    fastest_setting,
    layout_text,
    pareto_front,
    serving_table,
)
from specsim.serving.curves import TnTable, calibrated_profiles, tn_table
from specsim.serving.disaggregate import Disaggregated, disaggregate
from specsim.serving.drafter_plan import (
    MAX_NODES,
    DrafterPlan,
    Layout,
    Progress,
    deployable,
    fastest_per_user,
    make_drafter_plan,
    plain_decoding_tables,
)
from specsim.serving.policies import PolicySweep, simulate_policies
from specsim.serving.scenarios import Scenario, load_scenario
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.defaults import MAX_TOKENS_PER_S, MAX_TOKENS_PER_S_PER_USER
from specsim.specs.drafters import load_drafter
from specsim.specs.dtypes import Precision
from specsim.specs.engines import Engine, engine_or_none, load_engine
from specsim.specs.hardware import (
    Hardware,
    layout_problem,
    load_hardware,
)
from specsim.specs.models import (
    Model,
    check_parallel,
    check_tensor_parallel,
    ep_problem,
    load_model,
    tp_problem,
)
from specsim.specs.paths import builtin_names
from specsim.speculation.recommend import (
    Choice,
    EngineCommand,
    Recommendation,
    limit_depth,
)
from specsim.speculation.setup import check_compatible
from specsim.speculation.speedup import (
    Candidates,
    Setup,
    speedup_table,
)

# Longest latency bound accepted, ms (an hour).
MAX_LATENCY_MS = 3.6e6
# Cached tokens per request of the report's memory table.
MEMORY_CONTEXTS = (512.0, 2048.0, 8192.0, 32768.0, 131072.0)
# Per-user speed SLO when none is given: a fast reader, tokens/s (a stated default).
DEFAULT_MIN_TOKENS_PER_S_PER_USER = 30.0
# Demand when none is given: concurrent users of a mid-size service (a stated default, so that
# every plan answers with a GPU count).
DEFAULT_USERS = 1000.0


def _quiet(_: str) -> None:
    return None


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
    demand: Demand
    slo: Slo
    best: Setting | None
    best_plain: Setting | None
    # the best setting that drafts (N > 0), where `best` is plain decoding: what speculation
    # would need for the same demand
    best_speculative: Setting | None = None
    closest: Setting | None
    policies: PolicySweep | None
    policy_drafter: str
    notes: list[str] = field(default_factory=list)
    # `specsim validate`'s held-out error of the round-time model, all rows first, then per
    # drafter family, then of the absolute decode rates per GPU vendor and dense / MoE model
    # (the same for every plan; computed once per process).
    validation: tuple[GroupError, ...] = ()
    # The decode-rate group this plan's own setup falls in (its GPU's vendor, its model's
    # kind; `validate_summary.rates_group`), where published rows exist: its GPU count rests on it.
    rate_error: GroupError | None = None
    # What the report shows, computed here (the report only renders): T(n) at the answer's TP,
    # memory by context, the Pareto front, engines and commands, calibrated profiles.
    tn: TnTable | None = None
    memory: tuple[dict[str, float], ...] = ()
    pareto: tuple[FrontierPoint, ...] = ()
    best_engines: tuple[str, ...] = ()
    best_plain_engines: tuple[str, ...] = ()
    answer_commands: tuple[EngineCommand, ...] = ()
    why: str = ""  # why speculation does or does not pay at the answer's batch (`why_text`)
    engine_spec: Engine | None = None
    # --disaggregate: the prefill and decode pools (None: not asked, or no setting meets the
    # per-user SLO on the decode side)
    disaggregated: Disaggregated | None = None
    calibrated: tuple[tuple[str, Hardware], ...] = ()

    @property
    def tables(self) -> dict[str, list[ServingTable]]:
        return {d.name: d.tables for d in self.drafters}

    @property
    def throughput_gain(self) -> float | None:
        """Throughput per GPU of the setting with speculation over plain decoding's at the same
        SLO; None unless both meet it and the best one speculates."""
        b, p = self.best, self.best_plain
        if b is None or p is None or not b.nodes:
            return None
        return b.throughput_per_gpu / p.throughput_per_gpu


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


# Nodes a replica may span when the model fits no single node (2 or 4 of them).
SPAN_NODES = (2, 4)


def beyond_node_layouts(model: Model, hw: Hardware, notes: list[str]) -> tuple[Layout, ...]:
    """Layouts past one node for a model that fits none within it: TP over 2 or 4 nodes, and
    for a MoE model TP within a node with the experts spread over 2 or 4 nodes (data-parallel
    attention groups of that TP, vLLM's --data-parallel-size with --enable-expert-parallel).
    Those the model's dimensions or the interconnect refuse are left out with a note."""
    if hw.node is None:
        return ()
    within = max(hw.node.gpus, max(TP_DEGREES))
    spans = [(within * k, 1) for k in SPAN_NODES]
    if model.moe is not None and model.num_moe_layers:
        spans += [(within, within * k) for k in SPAN_NODES]
    kept = []
    for tp, ep in spans:
        problem = tp_problem(model, tp) or ep_problem(model, ep) or layout_problem(hw, tp, ep)
        if problem is None:
            kept.append((tp, ep))
        else:
            notes.append(f"{layout_text(tp, ep)} left out for {model.name}: {problem}")
    return tuple(kept)


def make_plan(*, hardware: str, model: str, drafters: list[str] | None, engine: str,
              workload: str, min_tokens_per_s_per_user: float | None = None,
              target_tokens_per_s: float | None = None, users: float | None = None,
              requests_per_s: float | None = None, max_ttft_p90_ms: float | None = None,
              max_itl_p99_ms: float | None = None,
              acceptance: AcceptanceProfile | None = None,
              tps: tuple[int, ...] = TP_DEGREES, ep: int | None = None,
              disaggregate: bool = False, progress: Progress = _quiet,
              policy_seed: int = 0, precision: Precision | None = None) -> Plan:
    """The capacity plan for a model on a GPU under a workload (see the module docstring).

    drafters: slugs or paths (None: the built-in drafters trained for the model);
    acceptance: one profile for every drafter (e.g. `specsim acceptance fit` output);
    users / requests_per_s / target_tokens_per_s: the demand (at most one; none: DEFAULT_USERS
    concurrent users, stated as a default); max_ttft_p90_ms, max_itl_p99_ms: latency SLOs, ms;
    tps: the TP degrees tried (one: pinned); ep: the expert-parallel degree pinned (None: 1,
    and for a model that fits no single node of a GPU with a `node` block, the layouts past
    one node of `beyond_node_layouts` as well); disaggregate: also plan separate prefill and
    decode pools (`serving.disaggregate`, `Plan.disaggregated`); precision: weights and KV
    cache as served (None: the model's own, bf16), for timing, memory and commands alike."""
    check_number(target_tokens_per_s, "target_tokens_per_s", low=0.0,
                 high=MAX_TOKENS_PER_S, low_open=True)
    check_number(min_tokens_per_s_per_user, "min_tokens_per_s_per_user", low=0.0,
                 high=MAX_TOKENS_PER_S_PER_USER)
    for value, name in ((max_ttft_p90_ms, "max_ttft_p90_ms"),
                        (max_itl_p99_ms, "max_itl_p99_ms")):
        check_number(value, name, low=0.0, high=MAX_LATENCY_MS, low_open=True)
    scenario = load_scenario(workload)
    given = [v for v in (users, requests_per_s, target_tokens_per_s) if v is not None]
    if len(given) > 1:
        raise parameter_error("users", "give one demand: --users, --requests-per-s or "
                              "--target-throughput, not several")
    demand = Demand(users=users, requests_per_s=requests_per_s,
                    tokens_per_s=target_tokens_per_s, output_tokens=scenario.output.mean) \
        if given else Demand(users=DEFAULT_USERS, default=True)
    if acceptance is not None:
        scenario = scenario.with_acceptance(acceptance)
    target = load_model(model)
    hw = load_hardware(hardware)
    base = Setup(target=target, hardware=hw, context=scenario.decode_context_tokens,
                 engine=engine_or_none(load_engine(engine)), precision=precision or Precision())
    if base.engine is not None:
        check_engine_serves(base.engine.base_slug, hw.vendor, hw.slug)
    names = drafters if drafters is not None else default_drafters(target)
    notes = [] if names else [f"no built-in drafter is trained for {target.slug}; plain "
                              "decoding only (give --drafter to add one)"]
    notes += precision_cautions(base)
    # Everything that can be refused is read before the first progress line, so bad input
    # ends in one line; TP degrees a model cannot be split over are left out with a note.
    if len(tps) == 1:  # a pinned TP (--tp): it must split the target, or one clear error
        check_tensor_parallel(target, tps[0])
    tps = _splittable(target, tps, notes)
    if len(tps) > 1:  # tried, not pinned: a node of 3 or 6 GPUs cannot form TP 4 or 8
        tps = _formable(hw, tps, ep or 1, notes)
    layouts = tuple((tp, ep or 1) for tp in tps)
    if disaggregate and hw.node is None:
        raise parameter_error("disaggregate", f"{hw.path or hw.name} has no 'node' block: the KV "
                              "cache of each prompt crosses the network between the pools, and "
                              "the profile gives none to price it")
    if ep is not None:  # a pinned EP (--ep): it must divide the experts and fit the links
        for tp in tps:
            check_parallel(target, tp=tp, ep=ep)
            check_layout(hw, tp, ep)
    loaded = [load_drafter(n, target=target) for n in names]
    for n, d in zip(names, loaded, strict=True):
        if drafters is not None and base.engine is not None:  # asked for by name: an engine
            check_engine_runs(base.engine.base_slug, d)  # that refuses what it lacks says so
        # a drafter made for another model is refused; a variant of its target, noted
        note = check_compatible(load_drafter(n).target, d, target, n)
        notes += [note] if note else []
        scenario.profile_for(d)
    progress(f"plan: {target.name} on {hw.name}, workload {scenario.slug}, engine {engine}")
    plain_tables = plain_decoding_tables(base, scenario, layouts)
    if len(tps) > 1 and ep is None and not any(t.weights_fit for t in plain_tables):
        wider = beyond_node_layouts(target, hw, notes)
        if wider:
            progress(f"  {target.name} fits no single node: trying "
                     + ", ".join(layout_text(*w) for w in wider))
        layouts += wider
        plain_tables += plain_decoding_tables(base, scenario, wider)
    plain = DrafterPlan(name="none", drafter=None, profile=None, tables=plain_tables,
                        speedup=None, recommendation=None)
    check_fits_somewhere(plain.tables, target.name, hw.name)
    all_tps = tuple(sorted({tp for tp, _ in layouts}))
    drafter_layouts = [
        tuple(lay for lay in layouts if lay[0] in _splittable(d.model, all_tps, notes))
        if d.model is not None else layouts for d in loaded]
    parts = [make_drafter_plan(base, scenario, n, d, lay, progress)
             for n, d, lay in zip(names, loaded, drafter_layouts, strict=True)]
    # The drafter the single-drafter sections (memory, policies) show: of the drafters an
    # engine runs (where there is one), the one that serves a user fastest; the others follow
    # in the same order.
    parts.sort(key=lambda p: (not deployable(p, hw.vendor), -fastest_per_user(p.tables)))
    slo = DEFAULT_MIN_TOKENS_PER_S_PER_USER if min_tokens_per_s_per_user is None \
        else min_tokens_per_s_per_user
    bounds = Slo(min_tokens_per_s_per_user=slo,
                 max_ttft_p90_s=None if max_ttft_p90_ms is None else max_ttft_p90_ms / 1e3,
                 max_itl_p99_s=None if max_itl_p99_ms is None else max_itl_p99_ms / 1e3)
    # The answer is one a team can deploy: drafters an engine runs (vLLM or SGLang has a
    # method for their family) where there is one; the others stay in the tables and figures
    # as specsim's model (and are the answer only when no runnable drafter was given).
    runnable = {p.name: p.tables for p in parts if deployable(p, hw.vendor)}
    model_only = [p.name for p in parts if p.name not in runnable]
    if runnable and model_only:
        them = "it" if len(model_only) == 1 else "them"
        notes.append(f"{', '.join(model_only)}: no engine runs {them} on {hw.vendor} GPUs "
                     f"(none that serves on them has a method for the family), so the answer "
                     f"leaves {them} out; the tables "
                     f"and figures show specsim's model of {them}")
    tables = runnable or {p.name: p.tables for p in parts}
    best = best_setting(tables, slo=bounds, demand=demand) if tables else None
    best_plain = best_setting({"none": plain.tables}, slo=bounds, demand=demand)
    drafting = best if best is not None and best.nodes else (
        best_setting(tables, slo=bounds, demand=demand, speculate=None) if tables else None)
    closest = fastest_setting({**tables, "none": plain.tables})
    split = None
    if disaggregate:
        progress("  disaggregated: decode pool without prompts, prefill pool for them")
        split = _disaggregated(tables, plain.tables, scenario, demand, slo)
        if split is None:
            notes.append("--disaggregate: no decode setting meets the per-user SLO")
    policies, policy_drafter = None, ""
    if parts and parts[0].drafter is not None and parts[0].profile is not None:
        policy_drafter = parts[0].name
        progress(f"  policies: load sweep with {policy_drafter}")
        fit = next(t for t in plain.tables if t.weights_fit)
        if parts[0].tables and (fit.tp, fit.ep) not in {(t.tp, t.ep) for t in parts[0].tables}:
            # the drafter cannot be split over the target's TP: its own smallest that fits
            fit = next((t for t in parts[0].tables if t.weights_fit), parts[0].tables[0])
        setup = dataclasses.replace(base, drafter=parts[0].drafter, tp=fit.tp, ep=fit.ep)
        policies = simulate_policies(setup, parts[0].profile, seed=policy_seed)
    plan = Plan(hardware=hw, model=target, engine=engine, scenario=scenario, setup=base,
                drafters=[*parts, plain], min_tokens_per_s_per_user=slo,
                target_tokens_per_s=demand.rate_tokens_per_s, demand=demand, slo=bounds,
                best=best, best_plain=best_plain, best_speculative=drafting,
                closest=closest, policies=policies, policy_drafter=policy_drafter, notes=notes,
                validation=(summary := held_out_summary()), disaggregated=split,
                rate_error=next((g for g in summary if g.group == f"{RATES}=" + rates_group(
                    hw.vendor, target.moe is not None)), None))
    answer = best or best_plain
    tn = tn_table(target, hw, base.engine, tp=answer.tp if answer else 1, precision=base.precision)
    return dataclasses.replace(
        plan, tn=tn, why=why_text([p for p in parts if p.name in tables], answer, tn)
        if answer else "",
        memory=tuple(memory_by_context(plan, MEMORY_CONTEXTS)),
        pareto=tuple(pareto_points(plan)),
        best_engines=tuple(setting_engines(plan, best)) if best else (),
        best_plain_engines=tuple(setting_engines(plan, best_plain)) if best_plain else (),
        answer_commands=tuple(setting_commands(plan, answer)) if answer else (),
        notes=[*notes, *(f"No command for {answer.layout}: {reason}"
                         for reason in layout_refusals(plan, answer))] if answer else notes,
        engine_spec=load_engine(engine), calibrated=tuple(calibrated_profiles()))


def _disaggregated(tables: dict[str, list[ServingTable]], plain: list[ServingTable],
                   scenario: Scenario, demand: Demand, min_tokens_per_s_per_user: float
                   ) -> Disaggregated | None:
    """Both pools: the decode setting with the fewest GPUs on decode-only tables (the drafter
    there alone) at the per-user SLO, and the prefill pool at the smallest layout whose target
    weights fit, for the arrivals of the demand (`serving.disaggregate.disaggregate`)."""
    decode = {name: [serving_table(t.setup, t.scenario, t.candidates, tp=t.tp, prefill=False)
                     for t in per] for name, per in {**tables, "none": plain}.items()}
    best = best_setting(decode, slo=Slo(min_tokens_per_s_per_user=min_tokens_per_s_per_user),
                        demand=demand)
    if best is None:
        return None
    table = next(t for t in decode[best.drafter] if (t.tp, t.ep) == (best.tp, best.ep))
    rate = demand.rate_tokens_per_s
    if rate is None:
        assert demand.users is not None
        rate = demand.users * best.tokens_per_s_per_user
    prefill = next(t for t in plain if t.weights_fit)
    return disaggregate(prefill, table, best, scenario, rate)


def _knee_tokens(tn: TnTable) -> int | None:
    """Tokens per pass at which the priced pass time (the table's last curve, `tn_table`)
    first reaches twice T(1) (the end of the flat, memory-bound part of T(n)); None beyond
    the table."""
    curve = list(tn.seconds.values())[-1]
    over = np.nonzero(curve >= 2.0 * curve[0])[0]
    return int(tn.tokens[int(over[0])]) if over.size else None


def why_text(parts: list[DrafterPlan], answer: Setting, tn: TnTable) -> str:
    """One sentence: at the answer's batch and TP, what the fastest draft of any drafter costs
    per round against a plain step and what it yields."""
    best: tuple[float, DrafterPlan, ServingTable, int, int, int] | None = None
    for part in parts:
        grid = next((t for t in part.tables if (t.tp, t.ep) == (answer.tp, answer.ep)),
                    None)
        if grid is None or not (grid.candidates.nodes == 0).any():
            continue
        table = serving_table(grid.setup, grid.scenario, grid.candidates,
                              batch=[answer.batch], tp=answer.tp)
        i = 0
        speed = np.where(table.candidates.nodes > 0, table.tokens_per_s_per_user[i], -np.inf)
        k = int(np.argmax(speed))
        plain = int(np.nonzero(table.candidates.nodes == 0)[0][0])
        gain = float(speed[k] / table.tokens_per_s_per_user[i, plain])
        if np.isfinite(speed[k]) and (best is None or gain > best[0]):
            best = (gain, part, table, i, k, plain)
    if best is None:
        return ""
    gain, part, table, i, k, plain = best
    c, b = table.candidates, int(table.batch[i])
    ratio = float(table.round_s[i, k] / table.round_s[i, plain])
    knee = _knee_tokens(tn)
    nodes = int(c.nodes[k])
    what = (f"a chain of {nodes}" if c.shape[k] == "chain" else f"a tree of {nodes} nodes")
    verdict = ("pays" if answer.nodes else "gains too little") if gain > 1.0 else "does not pay"
    # the round's parts: GPU (verification and drafting) against the engine's host work
    one = Candidates(nodes=c.nodes[k:k + 1], depth=c.depth[k:k + 1], tau=c.tau[k:k + 1],
                     max_width=c.max_width[k:k + 1], shape=c.shape[k:k + 1])
    st = speedup_table(table.setup, [float(b)], one)
    gpu = float(st.verify_s[0, 0] + st.draft_s[0, 0])
    host = float(max(np.max(st.round_overhead_s), np.max(st.round_host_overlap_s)))
    engine = table.setup.engine
    who = (f"the engine's host work per speculative round (engines/{engine.slug}.yaml)"
           if engine else "host work")
    prefill = float(table.prefill_s[i, k])
    overlap = engine is not None and engine.spec_overlap
    host_text = (f"; of its {table.round_s[i, k] * 1e3:,.1f} ms"
                 + (f" ({prefill * 1e3:,.1f} ms of it the arriving prompts' prefill)"
                    if prefill > 0.0 else "")
                 + f", the GPU's verification and drafting take {gpu * 1e3:,.1f} ms and {who} "
                 + f"{host * 1e3:,.1f} ms"
                 + (", done while the GPU runs (the engine overlaps the two)" if overlap
                    else "")
                 if host > 0.25 * float(table.round_s[i, k]) else "")
    return (f"Why speculation {verdict} here: at batch {b:,} on TP {answer.tp}, the fastest "
            f"draft ({part.name}, {what}) makes each pass score {b * (nodes + 1):,} tokens "
            f"instead of {b:,}, so a round takes {ratio:.2f}x a plain step"
            + (f" (this GPU's pass time doubles from one token at about {knee:,} tokens)"
               if knee else "")
            + host_text
            + f", and yields \u03c4 = {c.tau[k]:.2f} tokens: {gain:.2f}x plain decoding per "
            "user.")


def _splittable(model: Model, tps: tuple[int, ...], notes: list[str]) -> tuple[int, ...]:
    """The TP degrees `model` can be split over (a note for each left out; none: an error)."""
    problems = {tp: tp_problem(model, tp) for tp in tps}
    kept = tuple(tp for tp in tps if problems[tp] is None)
    if not kept:
        raise SpecError(f"{model.path or model.name}: cannot be split over any TP degree of "
                        f"{', '.join(map(str, tps))}: {problems[tps[0]]}")
    notes.extend(f"TP {tp} left out for {model.name}: {problems[tp]}" for tp in tps
                 if problems[tp] is not None)
    return kept


def _formable(hw: Hardware, tps: tuple[int, ...], ep: int, notes: list[str]
              ) -> tuple[int, ...]:
    """The TP degrees tried that the GPU's node and interconnect can form (a note for each left
    out); all of them where none can, so that the pinned --ep's check names the problem."""
    problems = {tp: layout_problem(hw, tp, ep) for tp in tps}
    kept = tuple(tp for tp in tps if problems[tp] is None)
    notes.extend(f"TP {tp} left out on {hw.name}: {problems[tp]}" for tp in tps
                 if kept and problems[tp] is not None)
    return kept or tps


@dataclass(frozen=True, slots=True, kw_only=True)
class FrontierPoint:
    """A usable setting that no other setting of the same drafter beats on both per-user speed
    and throughput per GPU: `candidates` column `candidate` at `batch` on TP `tp`."""

    drafter: str
    tokens_per_s_per_user: float
    throughput_per_gpu: float
    tp: int
    batch: int
    candidates: Candidates
    candidate: int


def pareto_points(plan: Plan) -> list[FrontierPoint]:
    """Per drafter (plain decoding last), its usable settings on the Pareto front of per-user
    speed against throughput per GPU, over every TP degree, by ascending per-user speed."""
    points: list[FrontierPoint] = []
    for d in plan.drafters:
        us, ts, where = [], [], []
        for t in d.tables:
            idx = np.nonzero(t.usable)
            us.append(t.tokens_per_s_per_user[idx])
            ts.append(t.throughput_per_gpu[idx])
            where += [(t, int(i), int(k)) for i, k in zip(*idx, strict=True)]
        u, th = np.concatenate(us), np.concatenate(ts)
        for j in pareto_front(u, th):
            t, i, k = where[j]
            points.append(FrontierPoint(
                drafter=d.name, tokens_per_s_per_user=float(u[j]),
                throughput_per_gpu=float(th[j]), tp=t.tp, batch=int(t.batch[i]),
                candidates=t.candidates, candidate=k))
    return points


def memory_by_context(plan: Plan, contexts: tuple[float, ...]) -> list[dict[str, float]]:
    """Per TP degree and context: weights, cache per request and max concurrency (first
    drafter's cache included when there is one)."""
    drafter = plan.drafters[0].drafter
    rows = []
    layouts = sorted({(t.tp, t.ep) for t in plan.drafters[0].tables})
    wide = any(ep > 1 for _, ep in layouts)  # an EP column only where a layout has one
    for tp, ep in layouts:
        for ctx in contexts:
            m = serving_memory(plan.model, plan.hardware, 1.0, ctx, drafter=drafter, tp=tp,
                               ep=ep, precision=plan.setup.precision)
            rows.append({"tp": tp, **({"ep": ep} if wide else {}), "context_tokens": ctx,
                         "weights_gb": (m.weights_bytes + m.drafter_weights_bytes) / 1e9,
                         "cache_per_request_gb": m.per_request_bytes / 1e9,
                         "max_concurrency": m.max_requests})
    return rows


def setting_adapters(plan: Plan, s: Setting) -> list[EngineAdapter]:
    """The engines that build a setting: chain engines (vLLM) for a chain of a method they
    have, EAGLE-tree engines (SGLang) for what their algorithm builds; empty for plain
    decoding or a drafter no engine runs."""
    part = next((d for d in plan.drafters if d.name == s.drafter), None)
    if s.nodes == 0 or part is None or part.drafter is None or part.profile is None:
        return []
    drafter = part.drafter
    block = limit_depth(dataclasses.replace(plan.setup, drafter=drafter), part.profile,
                        MAX_NODES, None, [])
    return [a for a in adapters(plan.hardware.vendor)
            if a.builds_setting(drafter, _choice(s), block)]


def setting_engines(plan: Plan, s: Setting) -> list[str]:
    """The names of the engines that build a setting ("vLLM", "SGLang"), as printed; for a
    layout past one TP group or node, those that record its flags (`engines.parallel`)."""
    wide = s.ep > 1 or s.unit_gpus > plan.hardware.gpus_per_node
    return [a.name for a in setting_adapters(plan, s) if not a.precision_problem(plan.setup)
            and (not wide or isinstance(a.args.rules.get("parallel"), dict))]


def _choice(s: Setting) -> Choice:
    return Choice(batch=s.batch, shape=s.shape, nodes=s.nodes, depth=s.depth,
                  max_width=s.max_width, tau=s.tau, round_s=s.round_s,
                  speedup=float("nan"), tokens_per_s_per_user=s.tokens_per_s_per_user,
                  throughput=s.throughput_per_gpu * s.tp, fits=True)


def setting_commands(plan: Plan, s: Setting) -> list[EngineCommand]:
    """Commands that start a server with exactly this setting (its TP and EP, its draft length
    or tree, its batch cap), from each engine adapter; only the engines that build it (every
    engine for plain decoding). A replica over several nodes gets one command per node; an
    engine that records no flags for such a layout gets none (`layout_refusals` says why)."""
    return [c for c in _all_commands(plan, s) if c.argv]


def layout_refusals(plan: Plan, s: Setting) -> list[str]:
    """Why an engine that builds the setting has no command for its layout (no recorded data-,
    expert-parallel or multi-node flags)."""
    return [c.reason for c in _all_commands(plan, s) if not c.argv and c.reason]


def _all_commands(plan: Plan, s: Setting) -> list[EngineCommand]:
    """`setting_commands` with the refusals of `engines.parallel.parallel_commands` kept."""
    if s.nodes == 0:  # plain decoding: every engine serves it (a target with a Hub id)
        if not plan.model.hf_id:
            return []
        plain = dataclasses.replace(plan.setup, drafter=None, tp=s.tp, ep=s.ep)
        return [c for a in adapters(plan.hardware.vendor)
                for c in _spread(plan, a, s, a.plain_command(plain, s.batch), a.cap_args(s.batch))]
    engines = setting_adapters(plan, s)
    part = next((d for d in plan.drafters if d.name == s.drafter), None)
    if not engines or part is None or part.setup is None:
        return []
    choice = _choice(s)
    chains = [choice] if any(a.builds == "chains" for a in engines) else []
    trees = [choice] if any(a.builds == "eagle_trees" for a in engines) else None
    rec = Recommendation(best=[choice], best_chain=chains, schedule_chain=chains,
                         objective="throughput", engine_trees=trees)
    setup = dataclasses.replace(part.setup, tp=s.tp, ep=s.ep)
    out = []
    for a in engines:
        cap = a.cap_args(s.batch, s.batch * (1 + s.nodes))
        for c in a.commands(rec, setup):
            if c.argv:
                out += _spread(plan, a, s, dataclasses.replace(c, argv=(*c.argv, *cap)), cap)
    return out


def _spread(plan: Plan, engine: EngineAdapter, s: Setting, command: EngineCommand,
            cap: tuple[str, ...]) -> list[EngineCommand]:
    """`command` for the setting's layout (`engines.parallel.parallel_commands`)."""
    return parallel_commands(engine, command, tp=s.tp, ep=s.ep, tail=cap,
                             gpus_per_node=plan.hardware.gpus_per_node)

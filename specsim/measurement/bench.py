"""The user's-GPU loop: a short benchmark plan whose results identify the engine's host terms
on the user's own GPU, and the fit of those terms to the engines' own result files.

Plan (`make_bench_plan`): servers of the target with plain decoding and with a chain of K
draft tokens whose acceptance the engine is told to fake (vLLM 0.33.0's
`rejection_sample_method: synthetic` with `synthetic_acceptance_length`, SGLang 0.5.23's
`SGLANG_SIMULATE_ACC_LEN`), so that the round is timed whatever the drafter's quality, and the
engines' own benchmark clients at a few concurrencies (`vllm bench serve --save-result`,
`python -m sglang.bench_serving --output-file --output-details`), each writing `<point>.json`
or `<point>.jsonl`. The points and why each is there:

- plain decoding at concurrency 1 and two larger ones: the host time of a step (per_pass_s:
  the intercept) and per request (per_request_s: the slope over concurrency);
- a chain of K_SHORT at the same concurrencies: the host time of a speculative round
  (round_s) and per request and round (round_request_s);
- a chain of K_LONG at concurrency 1 and the largest: the host time of each drafter pass
  (drafter_pass_s: what a longer draft adds beyond its kernels);
- K_LONG with another forced acceptance at the middle concurrency: a check that the round's
  time does not depend on how many tokens it accepts (it is not fitted differently).

Fit (`fit_bench`): each point's measured mean TPOT (its own prefill excluded, the others'
chunks included, as specsim predicts a concurrency benchmark) is predicted with `validate`'s
round time, the five terms fitted by least squares on the log error within their data bounds
(no host term exceeds the measured time it is part of); each point is also predicted with the
terms fitted on the others (leave one point out). `engine_yaml` writes the engine profile every
command takes as `--engine PATH`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specsim.engines import adapter
from specsim.errors import SpecError, check_number, parameter_error
from specsim.measurement.engine_results import EngineRun, read_engine_results
from specsim.specs.defaults import MAX_BATCH, MAX_TP, MAX_TREE_NODES
from specsim.specs.drafters import Drafter, load_drafter
from specsim.specs.engines import FittedTerm, load_engine
from specsim.specs.fields import show
from specsim.specs.hardware import load_hardware
from specsim.specs.io import read_yaml
from specsim.specs.models import check_tensor_parallel, load_model
from specsim.specs.paths import builtin_dir, builtin_names, probe

ENGINES = ("vllm", "sglang")
TERMS = ("per_pass_s", "per_request_s", "round_s", "round_request_s", "drafter_pass_s")
K_SHORT, K_LONG = 2, 4
CONCURRENCIES = (1, 8, 32)
# Prompts per point: enough rounds after the first wave that the mean TPOT settles, at least
# MIN_PROMPTS and WAVES times the concurrency.
MIN_PROMPTS, WAVES = 32, 4
# The acceptance forced: tokens per round of a chain of K (1 + K / 2: every run drafts and
# rejects), and the check point's other value.
PLAN_FILE = "bench-plan.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchPoint:
    """One benchmark run: `concurrency` clients against the server of a chain of
    `draft_tokens` (0: plain decoding) forced to `tokens_per_round`; why it is there."""

    id: str
    concurrency: int
    draft_tokens: int
    tokens_per_round: float
    num_prompts: int
    why: str
    server: str  # the id of its server in `BenchPlan.servers`


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchPlan:
    """What to run on the user's machine (see the module docstring), and what it is for."""

    engine: str
    engine_version: str
    model: str
    hardware: str
    drafter: str
    tp: int
    input_tokens: int
    output_tokens: int
    points: tuple[BenchPoint, ...]
    servers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # id -> argv
    server_env: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> environment
    model_id: str = ""  # the Hub id the servers load (what the clients' results name)

    def client_argv(self, point: BenchPoint, model_id: str, results: str) -> tuple[str, ...]:
        """The engine's own benchmark client for one point, writing `<results>/<id>.json(l)`."""
        common = ("--dataset-name", "random", "--random-input-len", str(self.input_tokens),
                  "--random-output-len", str(self.output_tokens),
                  "--num-prompts", str(point.num_prompts),
                  "--max-concurrency", str(point.concurrency))
        if self.engine == "vllm":
            return ("vllm", "bench", "serve", "--model", model_id, *common,
                    "--random-range-ratio", "0", "--ignore-eos", "--save-result",
                    "--result-dir", results, "--result-filename", f"{point.id}.json")
        return ("python", "-m", "sglang.bench_serving", "--backend", "sglang", *common,
                "--random-range-ratio", "1", "--output-file", f"{results}/{point.id}.jsonl",
                "--output-details")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _forced_setting(engine: str, drafter: Drafter, k: int, tau: float) -> tuple[
        tuple[str, ...], dict[str, str]]:
    """The speculative flags of a chain of k with its acceptance forced to tau tokens per
    round, and the environment the server needs (SGLang reads the forcing from it)."""
    if engine == "vllm":
        from specsim.engines.vllm import VLLM, config_args

        method = VLLM.method(drafter)
        if method is None:
            raise SpecError(f"vLLM has no method for drafter {drafter.slug} "
                            f"(family {drafter.family})")
        config: dict[str, object] = {"method": method}
        if VLLM.args.rules["methods"][method]["requires_model"]:
            config["model"] = drafter.checkpoint
        forced = VLLM.args.rules["forced_acceptance"]
        config.update({"num_speculative_tokens": k, forced["method_key"]: forced["method"],
                       forced["length_key"]: tau})
        found = VLLM.problems(config, drafter.target.architecture)
        if found:
            raise SpecError(f"internal: the forced vLLM setting breaks engines/vllm.yaml: "
                            f"{found}")
        return tuple(config_args(config)), {}
    from specsim.engines.sglang import SGLANG, speculative_args
    from specsim.speculation.recommend import Choice

    if SGLANG.method(drafter) is None:
        raise SpecError(f"SGLang has no method for drafter {drafter.slug} "
                        f"(family {drafter.family})")
    choice = Choice(batch=1, shape="chain", nodes=k, depth=k, max_width=1, tau=tau,
                    round_s=math.nan, speedup=math.nan, tokens_per_s_per_user=math.nan,
                    throughput=math.nan, fits=True)
    flags = speculative_args(drafter, choice)
    flags[SGLANG.args.rules["draft_flag"]] = drafter.checkpoint
    found = SGLANG.problems(flags, drafter.target.architecture)
    if found:
        raise SpecError(f"internal: the forced SGLang setting breaks engines/sglang.yaml: "
                        f"{found}")
    # synchronous rounds (--disable-overlap-schedule): their host work shows in the round's
    # time, which the overlap would hide behind the GPU's; the profile's terms are that work,
    # and `--engine PROFILE` overlaps them again as SGLang does by default
    words = (*(w for key, value in flags.items() for w in (key, str(value))),
             SGLANG.args.rules["sync_flag"])
    return words, {SGLANG.args.rules["forced_acceptance"]["env"]: f"{tau:g}"}


def make_bench_plan(*, engine: str, model: str, hardware: str, drafter: str, tp: int = 1,
                    input_tokens: int = 512, output_tokens: int = 256,
                    concurrencies: Sequence[int] = CONCURRENCIES) -> BenchPlan:
    """The benchmark plan of the module docstring for built-in specs (slugs, any case): the
    plan names them by slug and `bench fit` prices its points with them, so a spec given by
    path (whose slug would name the built-in file or none) is refused naming the parameter."""
    if engine not in ENGINES:
        raise parameter_error("engine", f"{engine!r} has no benchmark client specsim reads; "
                              f"one of {', '.join(ENGINES)}")
    check_number(input_tokens, "input_tokens", low=1, high=1e6)
    check_number(output_tokens, "output_tokens", low=8, high=1e6)
    levels = sorted({int(c) for c in concurrencies})
    if len(levels) < 2 or levels[0] < 1:
        raise parameter_error("concurrencies", "give at least two, all >= 1 (the slope over "
                              f"concurrency needs two), got "
                              f"{', '.join(map(str, concurrencies))}")
    target = load_model(model)
    _check_builtin("models", "model", model, target)
    check_tensor_parallel(target, tp)
    hw = load_hardware(hardware)
    _check_builtin("hardware", "hardware", hardware, hw)
    hardware = hw.slug
    draft = load_drafter(drafter, target=target)
    _check_builtin("drafters", "drafter", drafter, draft)
    from specsim.speculation.setup import check_compatible

    # as every command checks it, before the plan's rows (whose messages name a file and
    # fields the user never wrote) would
    check_compatible(load_drafter(drafter).target, draft, target, drafter)
    if not draft.checkpoint:
        raise SpecError(f"drafter {draft.slug} has no checkpoint to serve: add its "
                        "`checkpoint` (specsim drafters import ... --checkpoint)")
    top, middle = levels[-1], levels[len(levels) // 2]
    runner = adapter(engine)
    from specsim.engines.base import target_id
    from specsim.speculation.speedup import Setup

    setup = Setup(target=target, hardware=load_hardware(hardware), context=0.0, tp=tp,
                  drafter=draft)  # the target's id as the drafter was trained for it
    plain = runner.plain_command(setup, top)
    servers: dict[str, tuple[str, ...]] = {"plain": plain.argv}
    env: dict[str, dict[str, str]] = {"plain": {}}
    points: list[BenchPoint] = []

    def server(k: int, tau: float) -> str:
        sid = f"k{k}-tau{tau:g}"
        words, extra = _forced_setting(engine, draft, k, tau)
        head = plain.argv[: len(plain.argv) - len(runner.cap_args(top))]
        servers[sid] = (*head, *words, *runner.cap_args(top, top * (1 + k)))
        env[sid] = extra
        return sid

    def add(sid: str, k: int, tau: float, c: int, why: str) -> None:
        points.append(BenchPoint(id=f"{sid}-c{c}", concurrency=c, draft_tokens=k,
                                 tokens_per_round=tau, why=why, server=sid,
                                 num_prompts=max(MIN_PROMPTS, WAVES * c)))

    for c in levels:
        add("plain", 0, 1.0, c, "plain step: host time per step (at concurrency 1) and per "
            "request (its growth with concurrency)")
    short = server(K_SHORT, 1.0 + K_SHORT / 2)
    for c in levels:
        add(short, K_SHORT, 1.0 + K_SHORT / 2, c, "speculative round: host time per round "
            "(at concurrency 1) and per request and round (its growth)")
    long_ = server(K_LONG, 1.0 + K_LONG / 2)
    for c in (levels[0], top):
        add(long_, K_LONG, 1.0 + K_LONG / 2, c, f"a longer draft ({K_LONG} against "
            f"{K_SHORT}): host time per drafter pass")
    check = server(K_LONG, 2.0)
    add(check, K_LONG, 2.0, middle, "the same draft accepting fewer tokens: the round's time "
        "should not change (a check, weighed like any point)")
    return BenchPlan(engine=engine, engine_version=f"{runner.name} {runner.version}",
                     model=target.slug,
                     hardware=hardware, drafter=draft.slug, tp=tp, input_tokens=input_tokens,
                     output_tokens=output_tokens, points=tuple(points), servers=servers,
                     server_env=env, model_id=target_id(setup))


def _check_builtin(kind: str, parameter: str, name: str, spec: Any) -> None:
    """Refuse a spec that is not the built-in file of its slug: a plan records specs by slug
    (as published rows do), and `bench fit` prices its points with the built-in spec of that
    slug, so a user's file would be silently replaced (or, named otherwise, stop the plan on
    a row of bench-plan.json)."""
    slug, folder = str(spec.slug), builtin_dir(kind)
    builtin = slug in builtin_names(kind) and probe(folder, "is_dir") and \
        Path(spec.path).resolve() == (folder / f"{slug}.yaml").resolve()
    if not builtin:
        listing = f"specsim {kind} list"
        raise parameter_error(parameter, f"{show(name, 60)} is not a built-in {parameter} "
                              "spec: a bench plan names its specs by slug and `bench fit` "
                              f"prices the points with them; give one of `{listing}`")


def _plan_rows(plan: BenchPlan, runs: dict[str, EngineRun] | None = None
               ) -> list[dict[str, Any]]:
    """The plan's points as published concurrency rows: with their runs' measured lengths and
    TPOT, or (no runs) the plan's lengths and a TPOT the prediction does not read."""
    out = []
    for p in plan.points:
        run = None if runs is None else runs.get(p.id)
        if runs is not None and run is None:
            continue
        out.append(_row(plan, p, run))
    return out


def predict_plan_tpot_s(plan: BenchPlan) -> dict[str, float]:
    """Each point's mean TPOT with the built-in engine's terms, s (what the plan expects)."""
    from specsim.measurement.published import _row as published_row
    from specsim.measurement.validate import _samples
    from specsim.measurement.validate_rows import ZEROED

    rows = [published_row(r, Path(PLAN_FILE), i) for i, r in enumerate(_plan_rows(plan))]
    samples = _samples(rows, plan.engine)
    engine = load_engine(plan.engine)
    terms = {t: getattr(engine, t) for t in ZEROED}
    return {r.id: samples[r.id].predict(terms) / 1e3 for r in rows}


def expected_duration_s(plan: BenchPlan) -> float:
    """Seconds the plan's benchmark clients run: per point, its waves of requests (prompts /
    concurrency) each taking the output tokens at the predicted TPOT."""
    tpot = predict_plan_tpot_s(plan)
    return float(sum(math.ceil(p.num_prompts / p.concurrency) * plan.output_tokens * tpot[p.id]
                     for p in plan.points))


def read_bench_plan(path: Path) -> BenchPlan:
    """A plan written by `specsim bench plan` (its bench-plan.json), each field of the type
    `bench fit` reads it as (`_check_plan_fields`)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SpecError(f"{path}: not a plan written by `specsim bench plan` ({err})") from None
    _check_plan_fields(data, path)
    try:
        points = tuple(BenchPoint(**p) for p in data.pop("points"))
        servers = {k: tuple(v) for k, v in data.pop("servers").items()}
        return BenchPlan(points=points, servers=servers, **data)
    except TypeError as err:  # a key no plan has
        raise SpecError(f"{path}: not a plan written by `specsim bench plan` ({err})") from None


def _check_plan_fields(data: object, path: Path) -> None:
    """A hand-edited bench-plan.json, refused naming the field: a number or null as
    engine_version, servers that are not a mapping, a point naming no server or without a
    draft_tokens were an AttributeError or a KeyError of `bench fit`; a count of any type (a
    string, -1, NaN) was carried into the fit."""
    if not isinstance(data, dict):
        raise SpecError(f"{path}: not a plan written by `specsim bench plan` (a JSON object)")

    def check(block: dict[str, Any], key: str, kind: str, where: str = "",
              low: float = 1, high: float = 1e6) -> None:
        value = block.get(key)
        if kind == "text":
            ok = isinstance(value, str) and bool(value.strip())
            need = "a non-empty string"
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and \
                (kind == "number" or isinstance(value, int)) and low <= value <= high
            need = f"a number in [{low:g}, {high:g}]" if kind == "number" else \
                f"an integer in {int(low):,}..{int(high):,}"
        if not ok:
            raise SpecError(f"{path}: field '{where}{key}' must be {need}, got {show(value)}")

    for key in ("engine", "engine_version", "model", "hardware", "drafter"):
        check(data, key, "text")
    if data["engine"] not in ENGINES:
        raise SpecError(f"{path}: field 'engine' = {show(data['engine'])} is not one of "
                        f"{', '.join(ENGINES)}")
    for key, low, high in (("tp", 1, MAX_TP), ("input_tokens", 1, 1e6),
                           ("output_tokens", 8, 1e6)):
        check(data, key, "integer", low=low, high=high)
    if not isinstance(data.get("model_id", ""), str):
        raise SpecError(f"{path}: field 'model_id' must be a string, got "
                        f"{show(data['model_id'])}")
    servers, env = data.get("servers"), data.get("server_env", {})
    if not isinstance(servers, dict) or not all(
            isinstance(v, list) and all(isinstance(w, str) for w in v) for v in servers.values()):
        raise SpecError(f"{path}: field 'servers' must map each server id to the words of its "
                        f"command, got {show(servers)}")
    if not isinstance(env, dict) or not all(
            isinstance(v, dict) and all(isinstance(x, str) for x in (*v, *v.values()))
            for v in env.values()):
        raise SpecError(f"{path}: field 'server_env' must map each server id to its "
                        f"environment (names and values), got {show(env)}")
    points = data.get("points")
    if not isinstance(points, list) or not points:
        raise SpecError(f"{path}: field 'points' must be a list of the plan's points, got "
                        f"{show(points)}")
    ids: set[str] = set()
    for i, point in enumerate(points):
        where = f"points[{i}]."
        if not isinstance(point, dict):
            raise SpecError(f"{path}: field 'points[{i}]' must be a mapping of a point's "
                            f"fields, got {show(point)}")
        for key in ("id", "why", "server"):
            check(point, key, "text", where)
        for key, low, high in (("concurrency", 1, MAX_BATCH), ("draft_tokens", 0, MAX_TREE_NODES),
                               ("num_prompts", 1, 1e6)):
            check(point, key, "integer", where, low=low, high=high)
        check(point, "tokens_per_round", "number", where, high=point["draft_tokens"] + 1)
        if point["server"] not in servers:
            raise SpecError(f"{path}: field '{where}server' = {show(point['server'])} names no "
                            "server of the plan's 'servers'")
        if point["id"] in ids:
            raise SpecError(f"{path}: field '{where}id' = {show(point['id'])} is given twice")
        ids.add(point["id"])


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchFit:
    """Fitted terms (seconds), their bounds, and per point: measured and predicted mean TPOT
    (s) with all points and with the point left out."""

    plan: BenchPlan
    terms: dict[str, float]
    bounds: dict[str, tuple[float, float]]
    points: tuple[BenchPoint, ...]
    measured_s: tuple[float, ...]
    predicted_s: tuple[float, ...]
    held_out_s: tuple[float, ...]
    files: tuple[str, ...]

    @property
    def held_out_error_pct(self) -> float:
        """Median |leave-one-point-out error|, %."""
        m, h = np.array(self.measured_s), np.array(self.held_out_s)
        return float(np.median(np.abs(h / m - 1.0)) * 100.0)


def _row(plan: BenchPlan, point: BenchPoint, run: EngineRun | None) -> dict[str, Any]:
    """The point as a published concurrency row `validate` predicts: its run's measured
    lengths and mean TPOT, or without a run the plan's lengths (and a TPOT of 1 ms: a row
    must state what it measured, and a prediction does not read it)."""
    plain = point.draft_tokens == 0
    # vLLM counts the accepted tokens of the timed run; SGLang's accept_length is the server's
    # lifetime average, so the forced value stands for it
    tau = point.tokens_per_round if plain or run is None or run.engine == "sglang" or \
        run.tokens_per_round is None else run.tokens_per_round
    source = f"{run.file} (specsim bench fit)" if run else f"{PLAN_FILE} (expected)"
    row: dict[str, Any] = {
        "id": point.id, "source": source, "model": plan.model,
        "hardware": plan.hardware, "engine": plan.engine, "batch": point.concurrency,
        "tp": plan.tp, "benchmark": "concurrency", "dataset": "random",
        "method": "plain" if plain else "forced-acceptance chain", "shape": "chain",
        "input_tokens": max(1, round(run.input_tokens_per_request)) if run
        else plan.input_tokens,
        "output_tokens": max(1, round(run.output_tokens_per_request)) if run
        else plan.output_tokens,
        "prefill_included": False, "tpot_ms": run.tpot_mean_s * 1e3 if run else 1.0,
        # the plan's speculative servers run synchronous rounds (SGLang's sync flag)
        "spec_overlap": False}
    if not plain:
        row.update(drafter_spec=plan.drafter, draft_tokens=point.draft_tokens,
                   depth=point.draft_tokens, tau=tau)
    return row


def _match(plan: BenchPlan, results: Path) -> list[tuple[BenchPoint, EngineRun]]:
    """Each point's run, from `<results>/<point id>.json(l)` (one line naming what is wrong)."""
    suffix = ".json" if plan.engine == "vllm" else ".jsonl"
    out = []
    for point in plan.points:
        path = results / f"{point.id}{suffix}"
        if not path.is_file():
            continue
        runs = read_engine_results([path], require_concurrency=True)
        if runs[-1].engine != plan.engine:
            raise SpecError(f"{path}: written by the {runs[-1].engine} client; the plan is for "
                            f"{plan.engine}")
        run = runs[-1]  # an appended file: its last run
        version = plan.engine_version.split()[-1]
        if run.engine_version and run.engine_version != version:
            raise SpecError(f"{path}: field 'server_info.version' = {run.engine_version}; the "
                            f"plan is for {plan.engine_version}")
        if plan.model_id and run.model_id and run.model_id != plan.model_id:
            raise SpecError(f"{path}: field 'model_id' = {run.model_id}; the plan serves "
                            f"{plan.model_id}")
        if run.max_concurrency != point.concurrency:
            raise SpecError(f"{path}: field 'max_concurrency' = {run.max_concurrency}; the "
                            f"plan's point {point.id} runs {point.concurrency}")
        out.append((point, run))
    return out


def fit_bench(plan: BenchPlan, results: Path) -> BenchFit:
    """The engine terms of the module docstring fitted to the plan's result files."""
    from specsim.measurement.published import _row as published_row
    from specsim.measurement.validate import _samples, fit_terms

    matched = _match(plan, results)
    if not matched:
        raise SpecError(f"{results}: no result file of the plan's points (expected "
                        f"<point>.json{'l' if plan.engine == 'sglang' else ''}, e.g. "
                        f"{plan.points[0].id})")
    have = {p.id for p, _ in matched}
    missing = [p for p in plan.points if p.id not in have]
    # (drafts, least concurrency) a point must have to identify each term
    identify = {"per_pass_s": (0, 1), "per_request_s": (0, 2), "round_s": (K_SHORT, 1),
                "round_request_s": (K_SHORT, 2), "drafter_pass_s": (K_LONG, 1)}

    def needs(p: BenchPoint, k: int, c: int) -> bool:
        return p.draft_tokens == k and p.concurrency >= c

    for term, (k, c) in identify.items():
        if not any(needs(p, k, c) for p, _ in matched):
            wanted = next((p.id for p in missing if needs(p, k, c)), "")
            raise SpecError(f"{results}: no point identifies {term}"
                            + (f"; run point {wanted}" if wanted else ""))
    base = load_engine(plan.engine)
    rows = [published_row(_row(plan, p, r), Path(r.file), i)
            for i, (p, r) in enumerate(matched)]
    measured = np.array([r.tpot_mean_s for _, r in matched])
    # no host term exceeds the measured time it is part of
    plain = [r.tpot_mean_s for p, r in matched if p.draft_tokens == 0]
    rounds = [r.tpot_mean_s * (p.tokens_per_round) for p, r in matched if p.draft_tokens]
    top = max(p.concurrency for p, _ in matched)
    bounds = {"per_pass_s": (0.0, min(plain)), "per_request_s": (0.0, max(plain) / top),
              "round_s": (0.0, min(rounds)), "round_request_s": (0.0, max(rounds) / top),
              "drafter_pass_s": (0.0, min(rounds) / K_LONG)}
    fits = {t: FittedTerm(value=getattr(base, t), range=bounds[t],
                          range_source="at most the measured time it is part of",
                          held_out=bounds[t]) for t in TERMS}
    engine = dataclasses.replace(base, fits=fits)
    samples = _samples(rows, plan.engine)
    order = [samples[r.id] for r in rows]
    terms = fit_terms(engine, order)
    predicted = np.array([s.predict(terms) for s in order]) / 1e3
    held = []
    for j in range(len(order)):
        rest = fit_terms(engine, order[:j] + order[j + 1:])
        held.append(order[j].predict(rest) / 1e3)
    return BenchFit(plan=plan, terms={t: terms[t] for t in TERMS}, bounds=bounds,
                    points=tuple(p for p, _ in matched), measured_s=tuple(measured),
                    predicted_s=tuple(float(v) for v in predicted),
                    held_out_s=tuple(float(v) for v in held),
                    files=tuple(r.file for _, r in matched))


def engine_yaml(fit: BenchFit, name: str) -> dict[str, Any]:
    """The engine profile of a fit: the built-in engine's YAML with the fitted terms as its
    priors, each sourced to the result files, its bounds and the held-out error; `engine:`
    names the engine it measured. Every command takes it as `--engine PATH`."""
    plan = fit.plan
    data = read_yaml(builtin_dir("engines") / f"{plan.engine}.yaml")
    data.pop("fitted", None)
    data["name"] = name
    data["version"] = f"{plan.engine_version}, host terms fitted by specsim bench fit"
    data["engine"] = plan.engine
    data["source"] = (f"calibrated by specsim bench fit on {plan.hardware} ({plan.model}, "
                      f"drafter {plan.drafter}, TP {plan.tp}) from {len(fit.files)} result "
                      f"files: median leave-one-point-out error of the mean TPOT "
                      f"{fit.held_out_error_pct:.1f}%")
    priors = data.setdefault("priors", {})
    files = ", ".join(Path(f).name for f in fit.files)
    for term in TERMS:
        lo, hi = fit.bounds[term]
        priors[term] = {"value": float(f"{fit.terms[term]:.4g}"), "source": (
            f"fitted by specsim bench fit on the user's {plan.hardware} within "
            f"[{lo:.3g}, {hi:.3g}] s (no host term exceeds the measured time it is part of) "
            f"to the mean TPOT of {files}; leave-one-point-out median error "
            f"{fit.held_out_error_pct:.1f}%")}
    return data

"""Predicted against published measurements, with every fitted engine term held out by source.

Each row is timed in its setting with tau held at the published value, so only the time of a
round (or of a plain decoding step) is tested. What a row measured decides what is predicted:
the speedup over plain decoding; tokens/s with speculation (tau B / round time) when the source
gives no speedup; tokens/s of plain decoding (B / step time) for a `plain` row. With the engine's
host terms at zero, the row's achieved kernel times (baseline, verification, drafting) are
computed once; the engine terms then enter through the one round-time formula,
`speculation.engine_time.round_time`, as in every other command. The terms an engine fits
(`Engine.fittable`: those under its YAML's `fitted:`) are fitted, bounded to the physical
ranges stated there (`Engine.fit_range`), by least squares on the log error over the rows of
that engine from every other source, and the row is predicted with that fit: the error
reported is held out.

A row's setting and its round's kernel times are in `validate_rows`; the error by group of
rows and the held-out summary kept between runs in `validate_summary`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from specsim.forward.shapes import FloatArray
from specsim.measurement.pool import pool_occupancy
from specsim.measurement.published import OTHER_ENGINE, PublishedRow
from specsim.measurement.validate_rows import ZEROED, RoundParts, row_parts
from specsim.specs.engines import FACTORS, Engine, load_engine
from specsim.speculation import engine_time

FIT_GRID = (0.1, 0.5, 0.9)  # shares of each term's bound range on which the loss is screened
FIT_STARTS = 9  # with three terms or more, the fit runs from this many of the grid's lowest
# points (from all of them with one or two terms)
FIT_TOL = 1e-6  # relative tolerance of each fit (terms to ~0.0001%, far below their spread)
RIDGE = 0.01  # pull of each fitted term towards the middle of its bounds (log-error units)
NO_TAU = "no published tau (only the speedup or tokens/s)"
NO_MEASURED = "no measured speedup or tokens/s (tau only)"
METRICS = ("speedup", "tokens_per_s", "plain_tokens_per_s", "plain_tpot_ms", "spec_tpot_ms",
           "relative_speedup", "speedup_versus")
# Absolute rates (a plain step's or a round's time), against ratios of two times (speedups).
ABSOLUTE = ("tokens_per_s", "plain_tokens_per_s", "plain_tpot_ms", "spec_tpot_ms")
# The metrics that are times per token (lower is faster); the others are rates or speedups.
TIME_METRICS = ("plain_tpot_ms", "spec_tpot_ms")
# relative_speedup: a batch-sweep row without tau, its speedup over that of the sweep's
# reference row (same setting, another batch); tau cancels, the trend with batch is tested.
# speedup_versus: a row's tokens/s over another speculative setting's at the same batch (both
# with tau), the two rounds' times against each other.



class PartsTimer:
    """`RoundParts.times` of many parts at once: one `engine_time.counted_round_time` call per
    engine (and spec_overlap) over arrays of the parts' kernel times and op counts, element by
    element the same numbers as each part's own call. A fit evaluates every row at each of its
    trial terms, and timing the rows one by one was most of `specsim plan`'s time."""

    FIELDS = ("batch", "baseline_s", "verify_s", "draft_s", "passes", "verify_attention_s")

    def __init__(self, parts: list[RoundParts]) -> None:
        self.parts: list[RoundParts] = []  # each once, in the order first given
        self.index: dict[int, int] = {}  # id() of a part -> its place in `parts`
        by_engine: list[tuple[Engine, list[int]]] = []
        for p in parts:
            if id(p) in self.index:
                continue
            self.index[id(p)] = len(self.parts)
            group = next((g for e, g in by_engine if e is p.engine or e == p.engine), None)
            if group is None:
                by_engine.append((p.engine, group := []))
            group.append(len(self.parts))
            self.parts.append(p)
        self._groups: list[tuple[Engine, np.ndarray, engine_time.OpCounts,
                                 dict[str, np.ndarray]]] = []
        for engine, places in by_engine:
            members = [self.parts[i] for i in places]
            counts = [engine_time.op_counts(engine, p.target, p.drafter, p.weight_dtype)
                      for p in members]
            columns = {name: np.array([getattr(c, name) for c in counts], dtype=np.float64)
                       for name in ("target", "drafter", "round", "loop")}
            self._groups.append((engine, np.array(places), engine_time.OpCounts(**columns), {
                name: np.array([getattr(p, name) for p in members], dtype=np.float64)
                for name in self.FIELDS}))

    def __call__(self, terms: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
        """(step, round) seconds of every part (`parts`' order) with these engine terms."""
        step, round_s = np.empty(len(self.parts)), np.empty(len(self.parts))
        for engine, places, counts, a in self._groups:
            timed = engine.with_terms(**terms)
            verify = a["verify_s"] + (timed.verify_attention_factor - 1.0) \
                * a["verify_attention_s"]
            rt = engine_time.counted_round_time(
                timed, counts, batch=a["batch"],
                step_gpu_s=a["baseline_s"], verify_gpu_s=verify,
                draft_gpu_s=a["draft_s"], passes=a["passes"])
            step[places], round_s[places] = rt.step_s, rt.round_s
        return step, round_s


@dataclass(frozen=True, slots=True)
class Run:
    """A benchmark run as waves: the parts at each batch the run goes through and the time it
    spends there, in mean request lengths (`specsim.measurement.pool.pool_occupancy`). A client
    keeping `batch` requests in flight over a pool of `requests` prompts of equal output
    lengths runs requests // batch full waves, then one of the remainder; lengths that spread
    drain the batch as the shorter requests end. The run's tokens/s is requests x the mean
    request's tokens / the summed wave times. `spec_waves` are the speculative run's where
    they differ (a server that runs fewer requests at once with speculation: `spec_waves_of`);
    None: the same waves as plain decoding."""

    waves: tuple[tuple[RoundParts, float], ...]
    spec_waves: tuple[tuple[RoundParts, float], ...] | None = None

    @property
    def speculative(self) -> tuple[tuple[RoundParts, float], ...]:
        """The waves of the run with speculation."""
        return self.waves if self.spec_waves is None else self.spec_waves

    def predict(self, metric: str, tau: float, terms: dict[str, float]) -> float:
        """The run's metric (see METRICS, relative_speedup aside) with these engine terms."""
        baseline = round_s = 0.0
        for parts, count in self.waves:
            step, rnd = parts.times(terms)
            baseline += count * step
            if self.spec_waves is None:  # the same waves: time each part once
                round_s += count * rnd
        for parts, count in self.spec_waves or ():
            round_s += count * parts.times(terms)[1]
        return run_metric(metric, tau, baseline=baseline, round_s=round_s,
                          requests=self.requests, steps=self.steps,
                          spec_steps=self.spec_steps)

    @property
    def requests(self) -> float:
        """Requests over the run's waves."""
        requests = 0.0
        for parts, count in self.waves:
            requests += count * parts.batch
        return requests

    @property
    def steps(self) -> float:
        """Waves the run goes through without speculation."""
        return sum(count for _, count in self.waves)

    @property
    def spec_steps(self) -> float:
        """Waves the run goes through with speculation."""
        return sum(count for _, count in self.speculative)


Number = TypeVar("Number", float, FloatArray)


def run_metric(metric: str, tau: Number, *, baseline: Number, round_s: Number,
               requests: Number, steps: Number | float, spec_steps: Number | float | None = None
               ) -> Number:
    """A run's metric (see METRICS, relative_speedup aside) from its summed wave times
    (plain steps, rounds), requests and waves (without and with speculation; spec_steps None:
    the same): floats for one run, or arrays over runs that share the metric."""
    if metric == "plain_tokens_per_s":
        return requests / baseline
    if metric == "plain_tpot_ms":  # each request's time per token, over the run's waves
        return 1e3 * baseline / steps
    if metric == "spec_tpot_ms":  # a round over the tokens it yields, over the run's waves
        return 1e3 * round_s / ((steps if spec_steps is None else spec_steps) * tau)
    if metric == "tokens_per_s":
        return tau * requests / round_s
    return tau * baseline / round_s


def spec_waves_of(batch: int, requests: int | None, cap: int | None, cv: float = 0.0
                  ) -> dict[int, float]:
    """{batch: time at it, in mean request lengths} of the run with speculation on a server
    that runs at most `cap` requests at once with it (None: no cap): the clients beyond the
    cap wait in its queue, so the run goes through the prompt pool `cap` at a time, or, with
    the batch kept full (no pool), decodes `batch` requests' tokens at `cap` at a time: batch /
    cap waves of `cap`. cv: the spread of the pool's output lengths (`pool_occupancy`)."""
    if cap is None or batch <= cap:
        return pool_occupancy(batch, requests, cv)
    if requests is None:
        return {cap: batch / cap}
    return pool_occupancy(cap, requests, cv)


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """One row: measured and predicted value of its metric, or why it is not predicted."""

    row: PublishedRow
    metric: str = "speedup"
    measured: float | None = None
    predicted: float | None = None
    reason: str = ""
    terms: dict[str, float] = dataclasses.field(default_factory=dict)
    held_out: bool = False

    @property
    def error(self) -> float | None:
        """Signed relative error of the prediction (predicted / measured - 1)."""
        if self.predicted is None or self.measured is None:
            return None
        return self.predicted / self.measured - 1.0

    @property
    def speed_error(self) -> float | None:
        """The signed error in the direction of speed, positive where the prediction runs
        faster than measured (more tokens/s, a larger speedup, a shorter time per token):
        `error` for rates and speedups, measured / predicted - 1 for times per token. A group's
        signed median needs it: a time per token predicted too short and a rate predicted too
        high are the same mistake, which `error` gives opposite signs."""
        if self.predicted is None or self.measured is None:
            return None
        if self.metric in TIME_METRICS:
            return self.measured / self.predicted - 1.0
        return self.predicted / self.measured - 1.0

    @property
    def group(self) -> str:
        return self.row.group

    @property
    def wrong_sign(self) -> bool:
        """A speedup predicted on the other side of 1 than measured (a gain called a loss, or
        the reverse, or one method called faster than another where it was slower); only
        speedup rows can have one."""
        if self.metric not in ("speedup", "speedup_versus") or self.predicted is None \
                or self.measured is None:
            return False
        return (self.predicted > 1.0) != (self.measured > 1.0)


def metric_of(row: PublishedRow, reference: PublishedRow | None = None
              ) -> tuple[str, float] | None:
    """What the row measured that specsim predicts, and its value (None: nothing usable).
    reference: the row's sweep reference, for a row that has one and no tau."""
    if row.tau is None and reference is not None and row.speedup and reference.speedup:
        return "relative_speedup", row.speedup / reference.speedup
    if row.versus is not None and row.tau is not None and row.speedup is not None:
        return "speedup_versus", row.speedup
    if row.plain:
        if row.tpot_ms is not None:  # a row's own time per token before its throughput
            return "plain_tpot_ms", row.tpot_ms
        if row.baseline_tokens_per_s is not None:
            return "plain_tokens_per_s", row.baseline_tokens_per_s
        return None
    if row.tau is None:
        return None
    if row.speedup is not None:
        return "speedup", row.speedup
    if row.tpot_ms is not None:  # a round over its tau, as a client measures each request
        return "spec_tpot_ms", row.tpot_ms
    if row.spec_tokens_per_s is not None:
        return "tokens_per_s", row.spec_tokens_per_s
    return None


def unpredictable(row: PublishedRow) -> str:
    """Why a row cannot be predicted ('' if it can)."""
    if row.engine == OTHER_ENGINE:
        return "engine not modelled (gpt-fast / own CUDA-graph code)"
    if row.plain:
        return "" if row.baseline_tokens_per_s or row.tpot_ms else \
            "plain row without a measured tokens/s or TPOT"
    if row.drafter_spec is None:
        return f"method '{row.method}' has no drafter model in specsim"
    if row.tau is None and row.sweep_reference is None:
        return NO_TAU
    if row.tau is None:
        return ""
    if metric_of(row) is None:
        return NO_MEASURED
    if row.draft_tokens is None or row.depth is None:
        return "drafted tokens or depth not published"
    return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """A predictable row: its run, metric, tau and measured value (and for a
    relative_speedup row, the run of its sweep's reference row)."""

    run: Run
    metric: str
    tau: float
    measured: float
    reference: Run | None = None
    reference_tau: float = 1.0  # a speedup_versus row's reference's tau

    def predict(self, terms: dict[str, float]) -> float:
        (run, metric, tau), over = self.quotient
        value = run.predict(metric, tau, terms)
        if over is None:
            return value
        return value / over[0].predict(over[1], over[2], terms)

    @property
    def quotient(self) -> tuple[tuple[Run, str, float], tuple[Run, str, float] | None]:
        """What the prediction is: a run's metric (run, metric, tau), over another's or not."""
        if self.reference is None:
            return (self.run, self.metric, self.tau), None
        if self.metric == "speedup_versus":
            return ((self.run, "tokens_per_s", self.tau),
                    (self.reference, "tokens_per_s", self.reference_tau))
        return (self.run, "speedup", 1.0), (self.reference, "speedup", 1.0)


class SamplePredictor:
    """`Sample.predict` of many samples at once, element by element the same numbers: every
    part timed in one `PartsTimer` call, each run's waves summed in the same order as
    `Run.predict` (a run with fewer waves adds zeros), `run_metric` over the runs of each
    metric. A fit's residuals at each trial of its terms."""

    def __init__(self, samples: list[Sample]) -> None:
        runs: list[tuple[Run, str, float]] = []  # numerators, then denominators
        over: list[int] = []  # each sample's denominator in `runs`, -1 if none
        for sample in samples:
            runs.append(sample.quotient[0])
        for sample in samples:
            denominator = sample.quotient[1]
            over.append(-1 if denominator is None else len(runs))
            if denominator is not None:
                runs.append(denominator)
        self.samples = len(samples)
        self.over = np.array(over)
        self.has_over = self.over >= 0
        self.timer = PartsTimer([parts for run, _, _ in runs
                                 for parts, _ in (*run.waves, *run.speculative)])
        self.plain = self._places([run.waves for run, _, _ in runs])
        self.spec = self._places([run.speculative for run, _, _ in runs])
        self.requests = np.array([run.requests for run, _, _ in runs])
        self.steps = np.array([run.steps for run, _, _ in runs], dtype=np.float64)
        self.spec_steps = np.array([run.spec_steps for run, _, _ in runs], dtype=np.float64)
        self.tau = np.array([tau for _, _, tau in runs], dtype=np.float64)
        self.metrics = [(metric, np.array([j for j, r in enumerate(runs) if r[1] == metric]))
                        for metric in sorted({metric for _, metric, _ in runs})]

    def _places(self, runs_waves: list[tuple[tuple[RoundParts, float], ...]]
                ) -> tuple[np.ndarray, np.ndarray]:
        """(wave, run) arrays: the part each run times in its k-th wave and how often (0: no
        k-th wave)."""
        width = max((len(waves) for waves in runs_waves), default=0)
        place = np.zeros((width, len(runs_waves)), dtype=np.int64)
        count = np.zeros((width, len(runs_waves)))
        for j, waves in enumerate(runs_waves):
            for k, (parts, times) in enumerate(waves):
                place[k, j], count[k, j] = self.timer.index[id(parts)], times
            place[len(waves):, j] = place[0, j]
        return place, count

    def __call__(self, terms: dict[str, float]) -> np.ndarray:
        """Every sample's prediction with these engine terms, (samples,)."""
        step, rnd = self.timer(terms)
        baseline, round_s = np.zeros(len(self.tau)), np.zeros(len(self.tau))
        for place, count in zip(*self.plain, strict=True):
            baseline = baseline + count * step[place]
        for place, count in zip(*self.spec, strict=True):
            round_s = round_s + count * rnd[place]
        value = np.empty(len(self.tau))
        with np.errstate(divide="ignore", invalid="ignore"):
            for metric, j in self.metrics:
                value[j] = run_metric(metric, self.tau[j], baseline=baseline[j],
                                      round_s=round_s[j], requests=self.requests[j],
                                      steps=self.steps[j], spec_steps=self.spec_steps[j])
        out = value[:self.samples].copy()
        out[self.has_over] = out[self.has_over] / value[self.over[self.has_over]]
        return out


def fit_terms(engine: Engine, samples: list[Sample]) -> dict[str, float]:
    """The engine's fittable terms minimizing squared log error over the samples, bounded to
    their physical ranges; every other term keeps the engine's own value."""
    terms = {k: getattr(engine, k) for k in (*ZEROED, *FACTORS)}
    names = engine.fittable
    if not names or not samples:
        return terms

    low = np.array([engine.fit_range(k)[0] for k in names])
    high = np.array([engine.fit_range(k)[1] for k in names])
    middle, span = (low + high) / 2, high - low

    predict = SamplePredictor(samples)
    measured = np.array([sample.measured for sample in samples], dtype=np.float64)

    def residuals(x: np.ndarray) -> np.ndarray:
        t = {**terms, **dict(zip(names, (float(v) for v in x), strict=True))}
        errors = np.log(predict(t) / measured)
        return np.concatenate([errors, RIDGE * (x - middle) / span])

    # Starts from a grid inside the bounds, never the YAML's shipped values (fitted on every
    # row, the held-out source's included). Two terms can trade off along a ridge of equal
    # loss (eager op cost against round cost) and a floor below the GEMM time is a plateau,
    # so one start would decide the answer: the fit runs from every grid point of one or two
    # terms (from the FIT_STARTS of lowest loss with more: 81 full fits of SGLang's four terms
    # would double the time of `specsim plan`) and the best is kept; the weak pull towards
    # the middle of the bounds picks one point on a ridge.
    from scipy.optimize import least_squares  # here: a plan whose summary is cached skips it

    grid = [low + np.array(share) * span
            for share in itertools.product(FIT_GRID, repeat=len(names))]
    if len(names) > 2:
        grid = sorted(grid, key=lambda x: float(np.sum(residuals(x) ** 2)))[:FIT_STARTS]
    fits = [least_squares(residuals, start, bounds=(low, high), x_scale=span / 10,
                          ftol=FIT_TOL, xtol=FIT_TOL, gtol=FIT_TOL) for start in grid]
    best = min(fits, key=lambda f: float(f.cost))
    return {**terms, **dict(zip(names, (float(v) for v in best.x), strict=True))}


def validate(rows: list[PublishedRow]) -> list[Validation]:
    """Every row: predicted with its engine's terms fitted on the other sources, or why not."""
    samples = _samples(rows)
    engines: dict[str, Engine] = {}
    fits: dict[tuple[str, str | None], tuple[dict[str, float], bool]] = {}
    out: dict[str, Validation] = {}
    # Sources with rows to fit on, per engine: a row of any other source (a `fit: false` file)
    # is predicted with the fit on every fitting row of its engine, computed once.
    fitting = {(r.engine, r.source_key) for r in rows if r.fit and r.id in samples}
    for row in rows:
        if row.id not in samples:
            out[row.id] = Validation(row=row, reason=_reason(row, rows))
            continue
        if row.engine not in engines:
            engines[row.engine] = load_engine(row.engine)
        engine = engines[row.engine]
        # the rows of one source share their fit
        held_out = (row.engine, row.source_key if (row.engine, row.source_key) in fitting
                    else None)
        if held_out not in fits:
            train = [samples[r.id] for r in rows if r.id in samples and r.engine == row.engine
                     and r.source_key != held_out[1] and r.fit]
            fits[held_out] = (fit_terms(engine, train), bool(train))
        terms, trained = fits[held_out]
        sample = samples[row.id]
        out[row.id] = Validation(row=row, metric=sample.metric, measured=sample.measured,
                                 predicted=sample.predict(terms), terms=terms,
                                 held_out=trained or not engine.fittable)
    return [out[r.id] for r in rows]


def _reason(row: PublishedRow, rows: list[PublishedRow]) -> str:
    """Why a row has no sample: unpredictable, or the reference of a sweep."""
    reason = unpredictable(row)
    if reason == NO_MEASURED and any(r.versus == row.id for r in rows):
        return "the setting other rows' speedups are over (versus): tau only"
    if row.tau is None and any(r.sweep_reference == row.id for r in rows) and (
            not reason or reason == NO_TAU):
        return "reference of its batch sweep (no tau): the sweep's other rows divide by it"
    return reason


def spec_cap(row: PublishedRow, engine: Engine) -> int | None:
    """Requests the row's server ran at once with speculation: the row's own cap (its launch's
    or its version's), else its engine's default (`Engine.spec_max_running`), else none."""
    return row.max_running if row.max_running is not None else engine.spec_max_running


def _samples(rows: list[PublishedRow], engine_slug: str | None = None) -> dict[str, Sample]:
    """A Sample for every predictable row (of one engine, if given)."""
    by_id = {r.id: r for r in rows}
    engines: dict[str, Engine] = {}
    parts: dict[tuple[str, int], RoundParts] = {}
    out: dict[str, Sample] = {}

    def timed(r: PublishedRow, engine: Engine, waves: Mapping[int, float]
              ) -> tuple[tuple[RoundParts, float], ...]:
        out = []
        for batch, count in waves.items():
            if (r.id, batch) not in parts:
                parts[r.id, batch] = row_parts(dataclasses.replace(r, batch=batch), engine)
            out.append((parts[r.id, batch], count))
        return tuple(out)

    def run(r: PublishedRow, engine: Engine) -> Run:
        plain = pool_occupancy(r.batch, r.requests, r.output_cv)
        spec = plain if r.plain else spec_waves_of(r.batch, r.requests, spec_cap(r, engine),
                                                    r.output_cv)
        return Run(timed(r, engine, plain), None if spec == plain else timed(r, engine, spec))

    for row in rows:
        if unpredictable(row) or (engine_slug is not None and row.engine != engine_slug):
            continue
        reference = by_id.get(row.sweep_reference or "") if row.tau is None else None
        found = metric_of(row, reference)
        if found is None:
            continue
        if found[0] == "speedup_versus":
            reference = by_id[row.versus or ""]
            if unpredictable(reference) not in ("", NO_MEASURED):
                continue
        if row.engine not in engines:
            engines[row.engine] = load_engine(row.engine)
        engine = engines[row.engine]
        out[row.id] = Sample(run=run(row, engine), metric=found[0], tau=float(row.tau or 1.0),
                             measured=found[1],
                             reference=None if reference is None else run(reference, engine),
                             reference_tau=float(reference.tau or 1.0) if reference else 1.0)
    return out


def full_fit(rows: list[PublishedRow], engine_slug: str) -> dict[str, float]:
    """Engine terms fitted on every predictable row of that engine (what its YAML ships)."""
    return fit_terms(load_engine(engine_slug),
                     list(_samples([r for r in rows if r.fit], engine_slug).values()))

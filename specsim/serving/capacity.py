"""A server under steady load: speculation rounds sharing their passes with chunked prefill.

On top of the engine round time of `speedup_table` (batch B, candidate k of N nodes):

- Concurrency is limited by memory at the scenario's decoding context (prompt + half the
  output on average): weights, the target's and the drafter's caches (`serving_memory`).
- Chunked prefill: in steady state a batch of B requests finishes B tau / L_out requests per
  round, and as many new prompts arrive; their L_in tokens each ride in the verification pass,
  p = tau L_in / L_out tokens per request per round. The round pays the marginal kernel time
  of those tokens: T(B (N + 1 + p)) - T(B (N + 1)). An engine that runs arriving prompts as
  passes of their own (SGLang: `Engine.prefill_mixed` false) pays instead their share of a
  prefill pass per round, B tau / L_out of them (`speedup.prefill_stall_s`); the latency
  simulation below still prices a round's prompts as the chunk it carries.
- Time per output token TPOT = round / tau. Time to first token and the gaps between streamed
  chunks, as distributions (median, p90, p99), come from `serving.latency`: arrivals queue for
  the round's prefill budget C = the engine's token budget per pass minus the decode tokens
  (vLLM schedules decode first and fills the rest with prefill chunks). A batch whose prefill
  demand B p exceeds C cannot keep up with arrivals (`stable` is False).
- Tensor parallelism TP shards one replica over TP GPUs; throughput per GPU = B tau / round / TP.
  Data-parallel replicas multiply throughput (`Demand.gpus`): for N concurrent users, TP
  ceil(N / B) GPUs (each replica then runs ceil(N / replicas) requests); for an output rate,
  TP ceil(rate / replica throughput). Under expert parallelism (EP > TP) EP / TP TP groups,
  each with its own batch B, share one set of experts spread over EP GPUs: GPUs come in whole
  EP groups (`ServingTable.unit_gpus`), which may span nodes (their collectives priced over the
  network, `forward.cost`).
- Batch sizes: every integer to 16, then steps of about 4% to 1,024 (BATCH_GRID).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError, check_number
from specsim.forward.memory import DEFAULT_WORKSPACE_TOKENS, serving_memory
from specsim.forward.shapes import BoolArray, FloatArray
from specsim.serving.latency import CHUNK_FRACTIONS, Latency, simulate
from specsim.serving.scenarios import Scenario
from specsim.specs.defaults import MAX_TOKENS_PER_S
from specsim.speculation.speedup import (
    Candidates,
    Setup,
    chunk_share_s,
    prefill_stall_s,
    speedup_table,
)

TP_DEGREES = (1, 2, 4, 8)
# Every batch size to 16, then about 4% apart up to 1,024 (a user count divides into replicas
# of any size, not only powers of two).
BATCH_GRID = tuple(int(b) for b in np.unique(np.round(np.geomspace(1, 1024, 180))))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingTable:
    """Every candidate at every batch size on one TP group; 2-D arrays are (batch, candidate).

    round_s: a round including its share of prefill, s; prefill_s: that share, s;
    fits: batch within the memory-limited concurrency; stable: prefill keeps up with arrivals;
    setup, scenario: what the table was computed for (its TP in `setup`), for latency.
    """

    tp: int
    batch: FloatArray
    candidates: Candidates
    round_s: FloatArray
    prefill_s: FloatArray
    fits: BoolArray
    stable: BoolArray
    max_concurrency: int
    weights_fit: bool
    weights_per_gpu_bytes: float
    usable_bytes: float
    setup: Setup
    scenario: Scenario
    with_prefill: bool = True  # False: a disaggregated decode pool (`serving_table`)

    @property
    def tokens_per_s_per_user(self) -> FloatArray:
        return self.candidates.tau / self.round_s

    @property
    def ep(self) -> int:
        """GPUs the routed experts are spread over (1: split by TP)."""
        return self.setup.ep

    @property
    def unit_gpus(self) -> int:
        """GPUs of the smallest deployable replica: its TP group, or the EP group's EP / TP
        TP groups (each with its own batch) that share one set of experts."""
        return max(self.tp, self.setup.ep)

    @property
    def tpot_s(self) -> FloatArray:
        return self.round_s / self.candidates.tau

    @property
    def throughput_per_gpu(self) -> FloatArray:
        """Output tokens per second per GPU of the TP group."""
        return self.batch[:, None] * self.tokens_per_s_per_user / self.tp

    @property
    def usable(self) -> BoolArray:
        """(batch, candidate): fits in memory and keeps up with arrivals."""
        return self.fits[:, None] & self.stable


def prefill_share_s(setup: Setup, batch: FloatArray, candidates: Candidates,
                    scenario: Scenario) -> FloatArray:
    """(batch, candidate) seconds the prompts each round admits add to it (see module doc)."""
    per_request = candidates.tau * scenario.prompt.mean / scenario.output.mean
    if setup.engine is not None and not setup.engine.prefill_mixed:
        arrivals = batch[:, None] * candidates.tau[None, :] / scenario.output.mean
        stall = prefill_stall_s(setup, float(scenario.prompt.mean), arrivals.ravel())
        return stall.reshape(arrivals.shape)
    b = np.repeat(batch, candidates.nodes.size)
    q = np.tile(candidates.nodes + 1.0, batch.size)
    extra = chunk_share_s(setup, q, np.tile(per_request, batch.size), b,
                          scenario.decode_context_tokens)
    return extra.reshape(batch.size, candidates.nodes.size)


def prompt_prefill_s(setup: Setup, prompt_tokens: float) -> float:
    """Achieved seconds of one prompt's prefill kernels: the marginal time of its tokens in a
    pass beside one decoding token, causal over the prompt itself (`chunk_share_s` at no
    cached context)."""
    if prompt_tokens <= 0:
        return 0.0
    return float(chunk_share_s(setup, np.array([1.0]), np.array([float(prompt_tokens)]),
                               1.0, 0.0)[0])


def serving_table(setup: Setup, scenario: Scenario, candidates: Candidates, *,
                  batch: ArrayLike = BATCH_GRID, tp: int = 1, prefill: bool = True
                  ) -> ServingTable:
    """The serving model on TP GPUs for every candidate at every batch size. prefill False:
    the decode pool of a disaggregated server (`serving.disaggregate`): no prompt rides in its
    rounds, so they carry no prefill share and always keep up."""
    s = dataclasses.replace(setup, tp=tp, context=scenario.decode_context_tokens)
    b = np.atleast_1d(np.asarray(batch, dtype=np.float64))
    memory = serving_memory(s.target, s.hardware, b, scenario.decode_context_tokens,
                            drafter=s.drafter, tp=tp, memory_fraction=s.memory_fraction,
                            precision=s.precision, ep=s.ep)
    concurrency = memory.max_requests
    table = speedup_table(s, b, candidates)
    share = prefill_share_s(s, b, candidates, scenario) if prefill \
        else np.zeros((b.size, candidates.nodes.size))
    round_s = table.round_s + share
    decode_tokens = b[:, None] * (candidates.nodes + 1.0)
    demand = b[:, None] * candidates.tau * scenario.prompt.mean \
        / scenario.output.mean
    return ServingTable(
        tp=tp, batch=b, candidates=candidates, round_s=round_s, prefill_s=share,
        fits=b <= concurrency, stable=(demand <= DEFAULT_WORKSPACE_TOKENS - decode_tokens)
        | (not prefill),
        max_concurrency=concurrency, weights_fit=concurrency > 0,
        weights_per_gpu_bytes=memory.weights_bytes + memory.drafter_weights_bytes
        + memory.workspace_bytes, usable_bytes=memory.usable_bytes, setup=s, scenario=scenario,
        with_prefill=prefill)


def table_latency(table: ServingTable, i: ArrayLike, k: ArrayLike, *, closed_loop: bool = False
                  ) -> tuple[FloatArray, FloatArray]:
    """TTFT and chunk-gap quantiles (`serving.latency.QUANTILES`), (M, 3) each, of the cells
    (i[m], k[m]) of a table: its decoding part, prefill budget, arrival rate and the price of
    a round's prompt chunk at CHUNK_FRACTIONS of the budget (`chunk_share_s`). closed_loop:
    a benchmark's clients keep `batch` requests in flight (`serving.latency.simulate`)."""
    rows = np.atleast_1d(np.asarray(i, dtype=np.int64))
    cols = np.atleast_1d(np.asarray(k, dtype=np.int64))
    c, sc = table.candidates, table.scenario
    b = table.batch[rows]
    q = c.nodes[cols] + 1.0
    cap = np.maximum(DEFAULT_WORKSPACE_TOKENS - b * q, 1.0)
    x = cap[:, None] * CHUNK_FRACTIONS[None, :]
    f = chunk_share_s(table.setup, np.repeat(q, CHUNK_FRACTIONS.size), (x / b[:, None]).ravel(),
                      np.repeat(b, CHUNK_FRACTIONS.size), sc.decode_context_tokens)
    ttft, gaps = simulate(table.round_s[rows, cols] - table.prefill_s[rows, cols], cap,
                          b * c.tau[cols] / sc.output.mean, f.reshape(x.shape), sc.prompt,
                          closed_loop=b if closed_loop else 0)
    unusable = ~table.usable[rows, cols]
    ttft[unusable], gaps[unusable] = np.inf, np.inf
    return ttft, gaps


@dataclass(frozen=True, slots=True, kw_only=True)
class Demand:
    """What the service must carry, one of: `users` concurrent users (each at the SLO),
    `requests_per_s` (with the scenario's mean output length) or `tokens_per_s` output tokens/s
    in total. `default`: the stated default, not given by the user."""

    users: float | None = None
    requests_per_s: float | None = None
    tokens_per_s: float | None = None
    output_tokens: float = 1.0  # mean output tokens per request (for requests_per_s)
    default: bool = False

    def __post_init__(self) -> None:
        given = [v for v in (self.users, self.requests_per_s, self.tokens_per_s) if v is not None]
        if len(given) != 1:
            raise SpecError("give one demand: --users, --requests-per-s or --target-throughput "
                            f"(got {len(given)})")
        # users and requests/s at most one per output token/s a service may deliver
        for value, name in ((self.users, "users"), (self.requests_per_s, "requests_per_s"),
                            (self.tokens_per_s, "target_tokens_per_s")):
            check_number(value, name, low=0.0, high=MAX_TOKENS_PER_S, low_open=True)

    @property
    def rate_tokens_per_s(self) -> float | None:
        """Output tokens/s the demand asks for (None for a user count)."""
        if self.tokens_per_s is not None:
            return self.tokens_per_s
        if self.requests_per_s is not None:
            return self.requests_per_s * self.output_tokens
        return None

    def replicas(self, batch: ArrayLike, replica_tokens_per_s: ArrayLike) -> np.ndarray:
        """Replicas (TP groups) that carry the demand at `batch` requests per replica, each
        giving `replica_tokens_per_s` (broadcast)."""
        rate = self.rate_tokens_per_s
        if rate is None:
            assert self.users is not None
            return np.ceil(self.users / np.asarray(batch, dtype=np.float64) - 1e-9)
        return np.ceil(rate / np.asarray(replica_tokens_per_s, dtype=np.float64) - 1e-9)

    def text(self) -> str:
        """'1,000 concurrent users' / '20 requests/s (10,240 output tokens/s)' / ..."""
        if self.users is not None:
            what = f"{self.users:,.0f} concurrent users"
        elif self.requests_per_s is not None:
            what = (f"{self.requests_per_s:,.4g} requests/s ({self.rate_tokens_per_s:,.0f} "
                    "output tokens/s at the scenario's mean output)")
        else:
            what = f"{self.tokens_per_s:,.0f} output tokens/s"
        return what + (" (a default: give --users, --requests-per-s or --target-throughput)"
                       if self.default else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Slo:
    """What each user must see: output tokens/s at least, and optionally TTFT p90 and the p99
    gap between streamed chunks at most (seconds; None: not constrained)."""

    min_tokens_per_s_per_user: float = 0.0
    max_ttft_p90_s: float | None = None
    max_itl_p99_s: float | None = None

    @property
    def has_latency(self) -> bool:
        return self.max_ttft_p90_s is not None or self.max_itl_p99_s is not None

    def latency_ok(self, ttft: FloatArray, gaps: FloatArray) -> BoolArray:
        """(M,) whether quantiles (M, 3) of TTFT and chunk gaps meet the latency bounds."""
        ok = np.isfinite(ttft[:, 1])
        if self.max_ttft_p90_s is not None:
            ok &= ttft[:, 1] <= self.max_ttft_p90_s
        if self.max_itl_p99_s is not None:
            ok &= gaps[:, 2] <= self.max_itl_p99_s
        return np.asarray(ok)


def layout_text(tp: int, ep: int) -> str:
    """'TP 8', or 'TP 8 x EP 16' under expert parallelism."""
    return f"TP {tp}" + (f" x EP {ep}" if ep > 1 else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One (drafter, TP, batch, candidate) point of the serving model and what it gives:
    `latency` (TTFT and chunk-gap quantiles) and, for a demand, `gpus` (0: no demand)."""

    drafter: str
    tp: int
    batch: int
    shape: str
    nodes: int
    depth: int
    max_width: int
    tau: float
    round_s: float
    tokens_per_s_per_user: float
    throughput_per_gpu: float
    latency: Latency
    gpus: int = 0
    ep: int = 1  # GPUs the routed experts are spread over (1: split by TP)

    @property
    def unit_gpus(self) -> int:
        """GPUs of one deployable replica: max(TP, EP) (`ServingTable.unit_gpus`)."""
        return max(self.tp, self.ep)

    @property
    def layout(self) -> str:
        """'TP 8' or 'TP 8 x EP 16' (`layout_text`)."""
        return layout_text(self.tp, self.ep)

    @property
    def tpot_s(self) -> float:
        """Time per output token: seconds per round over tokens per round."""
        return self.round_s / self.tau

    @property
    def ttft_s(self) -> float:
        """Median time to first token, s."""
        return self.latency.ttft_s[0]

    @property
    def ttft_p90_s(self) -> float:
        return self.latency.ttft_s[1]

    @property
    def replicas(self) -> int:
        """Deployable replicas: TP groups, or EP groups of EP / TP TP groups each."""
        return self.gpus // self.unit_gpus

    @property
    def replica_throughput(self) -> float:
        """Output tokens per second of one TP group."""
        return self.throughput_per_gpu * self.tp

    def gpus_for(self, target_tokens_per_s: float) -> int:
        """GPUs for a target throughput: TP x replicas, replicas = ceil(target / replica)."""
        return self.tp * int(np.ceil(target_tokens_per_s / self.replica_throughput - 1e-9))


def setting_at(table: ServingTable, drafter: str, i: int, k: int, gpus: int = 0) -> Setting:
    """The setting at batch index i and candidate index k of a table, with its latency."""
    c = table.candidates
    ttft, gaps = table_latency(table, i, k)
    return Setting(
        drafter=drafter, tp=table.tp, batch=int(table.batch[i]),
        shape="none" if c.nodes[k] == 0 else c.shape[k], nodes=int(c.nodes[k]),
        depth=int(c.depth[k]), max_width=int(c.max_width[k]), tau=float(c.tau[k]),
        round_s=float(table.round_s[i, k]),
        tokens_per_s_per_user=float(table.tokens_per_s_per_user[i, k]),
        throughput_per_gpu=float(table.throughput_per_gpu[i, k]),
        latency=Latency(ttft_s=_three(ttft[0]), itl_s=_three(gaps[0]),
                        tpot_s=float(table.tpot_s[i, k])),
        gpus=gpus, ep=table.ep)


def _three(q: FloatArray) -> tuple[float, float, float]:
    return float(q[0]), float(q[1]), float(q[2])


def slo_mask(table: ServingTable, slo: Slo) -> BoolArray:
    """(batch, candidate): usable and meeting the SLO. The latency bounds are searched per
    candidate by bisection over batch (latency grows with batch: a longer round, a smaller
    prefill budget, more arrivals per round), all candidates at once."""
    ok = table.usable & (table.tokens_per_s_per_user >= slo.min_tokens_per_s_per_user)
    if not slo.has_latency or not ok.any():
        return np.asarray(ok)
    cols = np.nonzero(ok.any(axis=0))[0]
    rows = np.arange(ok.shape[0])[:, None]
    first = np.where(ok[:, cols], rows, ok.shape[0]).min(axis=0)  # smallest row to try
    last = np.where(ok[:, cols], rows, -1).max(axis=0)  # largest row to try
    # the smallest batch first: where it fails, the candidate never passes
    passes = slo.latency_ok(*table_latency(table, first, cols))
    lo = np.where(passes, first, -1)  # largest row known to pass (-1: none)
    top = np.where(passes, last, first - 1)
    while True:
        open_ = lo < top
        if not open_.any():
            break
        mid = np.where(open_, (lo + top + 1) // 2, lo)
        idx = np.nonzero(open_)[0]
        ttft, gaps = table_latency(table, mid[idx], cols[idx])
        good = slo.latency_ok(ttft, gaps)
        lo[idx] = np.where(good, mid[idx], lo[idx])
        top[idx] = np.where(good, top[idx], mid[idx] - 1)
    keep = np.zeros_like(ok)
    for c, passing in zip(cols, lo, strict=True):
        if passing >= 0:
            keep[: passing + 1, c] = ok[: passing + 1, c]
    return keep


def best_setting(tables: dict[str, list[ServingTable]], *, min_tokens_per_s_per_user: float = 0.0,
                 target_tokens_per_s: float | None = None, speculate: bool | None = True,
                 slo: Slo | None = None, demand: Demand | None = None) -> Setting | None:
    """The usable setting that meets the SLO with the fewest GPUs for the demand (without a
    demand: the most throughput per GPU); None when no setting meets the SLO.

    tables: per drafter name, its serving tables (one per TP degree). slo: the per-user bounds
    (default: min_tokens_per_s_per_user only); demand: default a target throughput when one is
    given. speculate False keeps plain decoding only (N = 0), None speculative settings only
    (N > 0: what speculation needs even where it does not pay). Ties: more throughput per GPU,
    then lower TP, smaller batch, fewer nodes. For a user count, the setting returned runs at
    the batch each replica then serves (ceil(users / replicas)), re-evaluated there.
    """
    slo = slo or Slo(min_tokens_per_s_per_user=min_tokens_per_s_per_user)
    if demand is None and target_tokens_per_s:
        demand = Demand(tokens_per_s=target_tokens_per_s)
    best: tuple[tuple[float, ...], str, ServingTable, int, int, int] | None = None
    for name, per_tp in tables.items():
        for t in per_tp:
            ok = slo_mask(t, slo)
            if speculate is False:
                ok = ok & (t.candidates.nodes == 0)
            elif speculate is None:
                ok = ok & (t.candidates.nodes > 0)
            if not ok.any():
                continue
            rows, cols = np.nonzero(ok)
            tput = t.throughput_per_gpu[rows, cols]
            # TP groups for the demand, in whole replicas of unit_gpus (an EP group holds
            # EP / TP of them)
            gpus = (t.unit_gpus * np.ceil(t.tp * demand.replicas(t.batch[rows], tput * t.tp)
                                          / t.unit_gpus - 1e-9)
                    if demand is not None else np.zeros(rows.size))
            keys = (t.candidates.nodes[cols], t.batch[rows], -np.round(tput, 9), gpus)
            j = int(np.lexsort(keys)[0])
            key = (float(gpus[j]), -round(float(tput[j]), 9), float(t.tp),
                   float(t.batch[rows[j]]), float(t.candidates.nodes[cols[j]]))
            if best is None or key < best[0]:
                best = (key, name, t, int(rows[j]), int(cols[j]), int(gpus[j]))
    if best is None:
        return None
    _, name, table, row, col, count = best
    if demand is not None and demand.users is not None and count:
        # each replica serves ceil(users / replicas) requests: the setting at that batch
        need = float(np.ceil(demand.users / (count // table.tp) - 1e-9))
        c = table.candidates
        one = Candidates(nodes=c.nodes[col:col + 1], depth=c.depth[col:col + 1],
                         tau=c.tau[col:col + 1], max_width=c.max_width[col:col + 1],
                         shape=c.shape[col:col + 1])
        table = serving_table(table.setup, table.scenario, one, batch=[need], tp=table.tp,
                              prefill=table.with_prefill)
        row, col = 0, 0
    return setting_at(table, name, row, col, count)


def fastest_setting(tables: dict[str, list[ServingTable]]) -> Setting | None:
    """The usable setting with the highest tokens/s per user (what comes closest to an SLO)."""
    best: tuple[float, str, ServingTable, int, int] | None = None
    for name, per_tp in tables.items():
        for t in per_tp:
            per_user = np.where(t.usable, t.tokens_per_s_per_user, -np.inf)
            if not np.isfinite(per_user).any():
                continue
            i, k = np.unravel_index(int(np.argmax(per_user)), per_user.shape)
            if best is None or per_user[i, k] > best[0]:
                best = (float(per_user[i, k]), name, t, int(i), int(k))
    return None if best is None else setting_at(best[2], best[1], best[3], best[4])


def pareto_front(per_user: ArrayLike, throughput: ArrayLike) -> np.ndarray:
    """Indices of the points no other point beats on both axes, by ascending per-user speed.

    A point is kept when its throughput is higher than every point at least as fast per user.
    """
    u = np.asarray(per_user, dtype=np.float64).ravel()
    t = np.asarray(throughput, dtype=np.float64).ravel()
    if u.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-t, -u))  # fastest per user first; ties: more throughput first
    ts = t[order]
    before = np.concatenate([[-np.inf], np.maximum.accumulate(ts)[:-1]])
    keep = order[ts > before]
    return np.asarray(keep[::-1], dtype=np.int64)


def check_fits_somewhere(tables: list[ServingTable], model: str, hardware: str) -> None:
    """One clear error when the model fits at no TP degree, with what it would need."""
    if any(t.weights_fit for t in tables):
        return
    widest = max(tables, key=lambda t: t.tp)
    raise SpecError(
        f"{model} does not fit on {hardware} at any TP degree up to {widest.tp}: weights, "
        f"drafter and workspace take {widest.weights_per_gpu_bytes / 1e9:.1f} GB per GPU at TP "
        f"{widest.tp} against {widest.usable_bytes / 1e9:.1f} GB usable; it needs a GPU with "
        f"more memory, a lower-precision weight dtype, or TP above {widest.tp}")

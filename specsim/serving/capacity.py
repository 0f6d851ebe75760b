"""A server under steady load: speculation rounds sharing their passes with chunked prefill.

On top of the engine round time of `speedup_table` (batch B, candidate k of N nodes):

- Concurrency is limited by memory at the scenario's decoding context (prompt + half the
  output on average): weights, the target's and the drafter's caches (`serving_memory`).
- Chunked prefill: in steady state a batch of B requests finishes B tau / L_out requests per
  round, and as many new prompts arrive; their L_in tokens each ride in the verification pass,
  p = tau L_in / L_out tokens per request per round. The round pays the marginal kernel time
  of those tokens: T(B (N + 1 + p)) - T(B (N + 1)).
- Time per output token TPOT = round / tau; time to first token TTFT = ceil(L_in / C) rounds,
  where C = the engine's token budget per pass minus the decode tokens (vLLM schedules decode
  first and fills the rest with prefill chunks), plus the prompt's own prefill kernel time,
  which those rounds carry (queueing is not modelled: the batch is in steady state). A batch
  whose prefill demand B p exceeds C cannot keep up with arrivals (`stable` is False).
- Tensor parallelism TP shards one replica over TP GPUs; throughput per GPU = B tau / round / TP.
  Data-parallel replicas multiply throughput: GPUs for a target = TP ceil(target / replica).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.errors import SpecError
from specsim.forward.memory import DEFAULT_WORKSPACE_TOKENS, serving_memory
from specsim.forward.shapes import BoolArray, FloatArray
from specsim.serving.scenarios import Scenario
from specsim.speculation.speedup import Candidates, Setup, chunk_share_s, speedup_table

TP_DEGREES = (1, 2, 4, 8)
BATCH_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingTable:
    """Every candidate at every batch size on one TP group; 2-D arrays are (batch, candidate).

    round_s: a round including its share of prefill, s; prefill_s: that share, s;
    fits: batch within the memory-limited concurrency; stable: prefill keeps up with arrivals;
    ttft_s / ttft_p90_s: time to first token at the median / p90 prompt, s.
    """

    tp: int
    batch: FloatArray
    candidates: Candidates
    round_s: FloatArray
    prefill_s: FloatArray
    ttft_s: FloatArray
    ttft_p90_s: FloatArray
    fits: BoolArray
    stable: BoolArray
    max_concurrency: int
    weights_fit: bool
    weights_per_gpu_bytes: float
    usable_bytes: float

    @property
    def tokens_per_s_per_user(self) -> FloatArray:
        return self.candidates.tau / self.round_s

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
    """(batch, candidate) marginal seconds of the prompts each round admits (see module doc)."""
    per_request = candidates.tau * scenario.prompt.mean / scenario.output.mean
    b = np.repeat(batch, candidates.nodes.size)
    q = np.tile(candidates.nodes + 1.0, batch.size)
    extra = chunk_share_s(setup, q, np.tile(per_request, batch.size), b,
                          scenario.decode_context_tokens)
    return extra.reshape(batch.size, candidates.nodes.size)


def ttft_s(prompt_tokens: float, round_s: FloatArray, decode_tokens: FloatArray,
           budget_tokens: float = DEFAULT_WORKSPACE_TOKENS, prefill_s: float = 0.0
           ) -> FloatArray:
    """Rounds to push a prompt through the chunk budget left by decoding, times the round,
    plus the prompt's own prefill kernel time (`prompt_prefill_s`), which those rounds carry
    on top of their decoding: a round that admits a whole 8,000-token prompt takes that
    prompt's prefill longer than a decoding round."""
    chunk = budget_tokens - decode_tokens
    rounds = np.ceil(prompt_tokens / np.maximum(chunk, 1e-9))
    return np.where(chunk > 0, rounds * round_s + prefill_s, np.inf)


def prompt_prefill_s(setup: Setup, prompt_tokens: float) -> float:
    """Achieved seconds of one prompt's prefill kernels: the marginal time of its tokens in a
    pass beside one decoding token, causal over the prompt itself (`chunk_share_s` at no
    cached context)."""
    if prompt_tokens <= 0:
        return 0.0
    return float(chunk_share_s(setup, np.array([1.0]), np.array([float(prompt_tokens)]),
                               1.0, 0.0)[0])


def serving_table(setup: Setup, scenario: Scenario, candidates: Candidates, *,
                  batch: ArrayLike = BATCH_GRID, tp: int = 1) -> ServingTable:
    """The serving model on TP GPUs for every candidate at every batch size."""
    s = dataclasses.replace(setup, tp=tp, context=scenario.decode_context_tokens)
    b = np.atleast_1d(np.asarray(batch, dtype=np.float64))
    memory = serving_memory(s.target, s.hardware, b, scenario.decode_context_tokens,
                            drafter=s.drafter, tp=tp, memory_fraction=s.memory_fraction,
                            precision=s.precision, ep=s.ep)
    concurrency = memory.max_requests
    table = speedup_table(s, b, candidates)
    prefill = prefill_share_s(s, b, candidates, scenario)
    round_s = table.round_s + prefill
    decode_tokens = b[:, None] * (candidates.nodes + 1.0)
    demand = b[:, None] * candidates.tau * scenario.prompt.mean \
        / scenario.output.mean
    return ServingTable(
        tp=tp, batch=b, candidates=candidates, round_s=round_s, prefill_s=prefill,
        ttft_s=ttft_s(scenario.prompt.median, round_s, decode_tokens,
                      prefill_s=prompt_prefill_s(s, scenario.prompt.median)),
        ttft_p90_s=ttft_s(scenario.prompt.p90, round_s, decode_tokens,
                          prefill_s=prompt_prefill_s(s, scenario.prompt.p90)),
        fits=b <= concurrency, stable=demand <= DEFAULT_WORKSPACE_TOKENS - decode_tokens,
        max_concurrency=concurrency, weights_fit=concurrency > 0,
        weights_per_gpu_bytes=memory.weights_bytes + memory.drafter_weights_bytes
        + memory.workspace_bytes, usable_bytes=memory.usable_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One (drafter, TP, batch, candidate) point of the serving model and what it gives."""

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
    ttft_s: float
    ttft_p90_s: float

    @property
    def tpot_s(self) -> float:
        """Time per output token: seconds per round over tokens per round."""
        return self.round_s / self.tau

    @property
    def replica_throughput(self) -> float:
        """Output tokens per second of one TP group."""
        return self.throughput_per_gpu * self.tp

    def gpus_for(self, target_tokens_per_s: float) -> int:
        """GPUs for a target throughput: TP x replicas, replicas = ceil(target / replica)."""
        return self.tp * int(np.ceil(target_tokens_per_s / self.replica_throughput - 1e-9))


def setting_at(table: ServingTable, drafter: str, i: int, k: int) -> Setting:
    """The setting at batch index i and candidate index k of a table."""
    c = table.candidates
    return Setting(
        drafter=drafter, tp=table.tp, batch=int(table.batch[i]),
        shape="none" if c.nodes[k] == 0 else c.shape[k], nodes=int(c.nodes[k]),
        depth=int(c.depth[k]), max_width=int(c.max_width[k]), tau=float(c.tau[k]),
        round_s=float(table.round_s[i, k]),
        tokens_per_s_per_user=float(table.tokens_per_s_per_user[i, k]),
        throughput_per_gpu=float(table.throughput_per_gpu[i, k]),
        ttft_s=float(table.ttft_s[i, k]), ttft_p90_s=float(table.ttft_p90_s[i, k]))


def best_setting(tables: dict[str, list[ServingTable]], *, min_tokens_per_s_per_user: float,
                 target_tokens_per_s: float | None = None, speculate: bool = True
                 ) -> Setting | None:
    """The usable setting that meets the per-user SLO with the fewest GPUs for the target
    (without a target: the most throughput per GPU); None when no setting meets the SLO.

    tables: per drafter name, its serving tables (one per TP degree). speculate False keeps
    plain decoding only (N = 0). Ties: more throughput per GPU, then lower TP, smaller batch.
    """
    best: tuple[tuple[float, ...], Setting] | None = None
    for name, per_tp in tables.items():
        for t in per_tp:
            ok = t.usable & (t.tokens_per_s_per_user >= min_tokens_per_s_per_user)
            if not speculate:
                ok = ok & (t.candidates.nodes == 0)
            for i, k in zip(*np.nonzero(ok), strict=True):
                s = setting_at(t, name, int(i), int(k))
                gpus = s.gpus_for(target_tokens_per_s) if target_tokens_per_s else 0
                key = (gpus, -round(s.throughput_per_gpu, 9), s.tp, s.batch, s.nodes)
                if best is None or key < best[0]:
                    best = (key, s)
    return None if best is None else best[1]


def fastest_setting(tables: dict[str, list[ServingTable]]) -> Setting | None:
    """The usable setting with the highest tokens/s per user (what comes closest to an SLO)."""
    best: Setting | None = None
    for name, per_tp in tables.items():
        for t in per_tp:
            per_user = np.where(t.usable, t.tokens_per_s_per_user, -np.inf)
            if not np.isfinite(per_user).any():
                continue
            i, k = np.unravel_index(int(np.argmax(per_user)), per_user.shape)
            s = setting_at(t, name, int(i), int(k))
            if best is None or s.tokens_per_s_per_user > best.tokens_per_s_per_user:
                best = s
    return best


def pareto_front(per_user: ArrayLike, throughput: ArrayLike) -> np.ndarray:
    """Indices of the points no other point beats on both axes, by ascending per-user speed.

    A point is kept when its throughput is higher than every point at least as fast per user.
    """
    u = np.asarray(per_user, dtype=np.float64).ravel()
    t = np.asarray(throughput, dtype=np.float64).ravel()
    if u.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-t, -u))  # fastest per user first; ties: more throughput first
    best = -np.inf
    keep = []
    for j in order:
        if t[j] > best:
            keep.append(j)
            best = t[j]
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

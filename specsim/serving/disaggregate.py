"""Prefill/decode disaggregation: a prefill pool and a decode pool, the KV cache sent between.

What is modelled:

- The decode pool runs the serving model without prompts in its rounds (`serving_table` with
  `prefill=False`): every round is decoding or verification only, and the drafter (its
  weights, its cache, its passes) lives here alone. Its size is the one `best_setting` gives
  for the demand at the per-user SLO.
- The prefill pool runs the target only, at the smallest layout whose weights fit (the plain
  tables of the plan). One of its passes carries C = the engine's token budget of prompt
  tokens (C / L_in prompts of the scenario's mean length L_in), timed as the marginal kernel
  time of those tokens (`chunk_share_s`); a replica prefills (C / L_in) / pass prompts per
  second, and the pool has ceil(arrivals / that) replicas, arrivals = output tokens/s of the
  demand / L_out. Its utilization (arrivals over what it carries) is reported.
- Each prompt's KV cache goes to the decode replica over the network: every decode GPU
  receives its shard b_d (the cache of L_in tokens at the decode TP) over its own NIC while
  the prefill GPUs send tp_d b_d in all over theirs: t = network latency + max(b_d,
  tp_d b_d / tp_p) / NIC bandwidth per GPU.
- TTFT at the prompt length's median, p90 and p99 = the prompt's prefill alone on a prefill
  replica + its KV transfer + one decode round. The gaps between streamed chunks are the
  decode round (no prompt chunks ride in it).

What is not: queueing for a prefill replica (TTFT is the light-load value; at utilization near
1 the wait grows without bound), batching delay of prompts waiting for a full pass, the
transfer overlapping the prefill layer by layer (it is added whole), and the scheduling and
routing of a disaggregating proxy (e.g. NIXL/Mooncake connectors).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from specsim.errors import SpecError
from specsim.forward.memory import DEFAULT_WORKSPACE_TOKENS
from specsim.serving.capacity import ServingTable, Setting, layout_text, prompt_prefill_s
from specsim.serving.latency import Latency
from specsim.serving.scenarios import Scenario
from specsim.specs.cache import kv_layout
from specsim.speculation.speedup import chunk_share_s

# Prompt-length quantiles of the TTFT the report gives (median, p90, p99).
TTFT_QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillPool:
    """The prefill side of a disaggregated plan.

    tp, ep: a prefill replica's layout; replicas, gpus: the pool; pass_s: one pass of
    `pass_tokens` prompt tokens, s; prompts_per_s: the arrivals it carries; utilization:
    arrivals over the pool's prompts/s; kv_bytes_per_request: the KV cache of a mean prompt
    (whole model), bytes; transfer_s: its transfer to the decode pool, s."""

    tp: int
    ep: int
    replicas: int
    pass_tokens: float
    pass_s: float
    prompts_per_s: float
    utilization: float
    kv_bytes_per_request: float
    transfer_s: float

    @property
    def gpus(self) -> int:
        return self.replicas * max(self.tp, self.ep)

    @property
    def layout(self) -> str:
        """'TP 8' or 'TP 8 x EP 16' of a prefill replica."""
        return layout_text(self.tp, self.ep)


@dataclass(frozen=True, slots=True, kw_only=True)
class Disaggregated:
    """Both pools: `decode` (its latency: TTFT through the prefill pool, gaps of one round)
    and `prefill`."""

    prefill: PrefillPool
    decode: Setting

    @property
    def total_gpus(self) -> int:
        return self.prefill.gpus + self.decode.gpus


def kv_transfer_s(table: ServingTable, prefill_tp: int, prompt_tokens: float) -> float:
    """Seconds to send one prompt's KV cache from a prefill replica of TP `prefill_tp` to the
    decode replica of `table` (module doc)."""
    s = table.setup
    node = s.hardware.node
    if node is None:
        raise SpecError(f"{s.hardware.path or s.hardware.name}: disaggregation sends the KV "
                        "cache over the network between nodes; the profile has no 'node' block")
    per_gpu = float(kv_layout(s.target, tp=table.tp, kv_dtype=s.precision.kv_dtype)
                    .bytes_per_request(np.array([prompt_tokens]))[0])
    sent = max(per_gpu, table.tp * per_gpu / prefill_tp)
    return node.network_latency_s + sent / node.network_bandwidth_bytes_per_s


def prefill_pool(prefill: ServingTable, decode: ServingTable, scenario: Scenario,
                 prompts_per_s: float) -> PrefillPool:
    """The prefill pool for `prompts_per_s` arrivals: layout of `prefill` (a plain table whose
    weights fit), replicas to carry them, and the KV transfer to the decode replica."""
    setup = prefill.setup
    length = float(scenario.prompt.mean)
    prompts = max(DEFAULT_WORKSPACE_TOKENS / length, 1.0)
    pass_s = float(chunk_share_s(setup, np.array([1.0]), np.array([length]),
                                 np.array([prompts]), 0.0)[0])
    per_replica = prompts / pass_s
    replicas = max(1, int(np.ceil(prompts_per_s / per_replica - 1e-9)))
    full = kv_layout(setup.target, tp=1, kv_dtype=setup.precision.kv_dtype)
    return PrefillPool(
        tp=prefill.tp, ep=prefill.ep, replicas=replicas, pass_tokens=prompts * length,
        pass_s=pass_s, prompts_per_s=prompts_per_s,
        utilization=prompts_per_s / (replicas * per_replica),
        kv_bytes_per_request=float(full.bytes_per_request(np.array([length]))[0]),
        transfer_s=kv_transfer_s(decode, prefill.tp, length))


def disaggregate(prefill: ServingTable, decode_table: ServingTable, decode: Setting,
                 scenario: Scenario, output_tokens_per_s: float) -> Disaggregated:
    """Both pools for a decode setting chosen on decode-only tables (`decode_table` is its
    table) carrying `output_tokens_per_s`; the decode setting's latency becomes TTFT through
    the prefill pool (prefill alone + KV transfer + one round, at the prompt quantiles) and
    gaps of one round."""
    arrivals = output_tokens_per_s / float(scenario.output.mean)
    pool = prefill_pool(prefill, decode_table, scenario, arrivals)
    ttft = []
    for q in TTFT_QUANTILES:
        length = float(scenario.prompt.quantile(q))
        ttft.append(prompt_prefill_s(prefill.setup, length)
                    + kv_transfer_s(decode_table, prefill.tp, length) + decode.round_s)
    round_s = decode.round_s
    latency = Latency(ttft_s=(ttft[0], ttft[1], ttft[2]), itl_s=(round_s, round_s, round_s),
                      tpot_s=decode.tpot_s)
    return Disaggregated(prefill=pool, decode=dataclasses.replace(decode, latency=latency))

"""The report's answer in words: what to serve, on how many GPUs and nodes, the latency users
see, with and without speculation, the acceptance it rests on, the disaggregated plan, and the
SLO section that states the bounds the answer meets; `headline` is its first sentence for the
terminal.

Split from `present.report`, which assembles every section into the document.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specsim.present.document import Row, without_checkout
from specsim.present.report_assumptions import rate_sentence, validate_rows
from specsim.present.report_commands import file_comments
from specsim.present.report_speculation import acceptance_text
from specsim.serving.capacity import Setting
from specsim.serving.drafter_plan import DrafterPlan
from specsim.serving.plan import Plan
from specsim.specs.dtypes import SIXTEEN_BIT
from specsim.specs.hardware import Hardware


def _setting_text(s: Setting) -> str:
    """'no speculation', 'a chain of 1 draft token', 'a tree of 12 nodes (depth 4, topk 3)'."""
    if s.nodes == 0:
        return "no speculation"
    if s.shape == "chain":
        return f"a chain of {s.nodes} draft token{'s' if s.nodes > 1 else ''}"
    return f"a tree of {s.nodes} drafted nodes (depth {s.depth}, topk {s.max_width})"


def _replicas(n: int) -> str:
    return f"{n} replica" + ("" if n == 1 else "s")


def _ms(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x * 1e3:,.0f}"


def headline(plan: Plan) -> str:
    """The answer's first sentence (what to serve, on how many GPUs, for which demand), for a
    terminal line beside the report."""
    text = answer_text(plan)
    end = text.find(". Each user")
    return text if end < 0 else text[:end + 1]


def precision_text(plan: Plan) -> str:
    """' (fp8 weights, an fp8 KV cache)' where the plan serves the target otherwise than as its
    checkpoint stores it with a 16-bit cache (what `--weight-dtype` / `--kv-dtype` set); ''
    else."""
    p, own = plan.setup.precision, plan.model.weight_dtype
    parts = ([f"{p.weight_dtype} weights"] if p.weight_dtype and p.weight_dtype != own else []) \
        + ([f"an {p.kv_dtype} KV cache"] if p.kv_dtype not in SIXTEEN_BIT else [])
    return f" ({', '.join(parts)})" if parts else ""


def answer_text(plan: Plan) -> str:
    """The answer in words: setting, TP, batch, throughput, latency, the SLO and the demand,
    the GPU count with and without speculation, why speculation pays or not, and the
    acceptance used."""
    b, p = plan.best, plan.best_plain
    demand = plan.demand.text()
    if b is None and p is None:
        return (f"No setting meets the SLO on {plan.hardware.name} ({slo_text(plan)}); see the "
                "SLO section for the closest one.")
    s = b or p
    assert s is not None
    engines = plan.best_engines if b is not None else plan.best_plain_engines
    # weights or a cache as given that no engine starts (an int8 cache, bf16 weights of an
    # fp8 checkpoint): no command for the answer; the engine commands section says why
    served = precision_text(plan)
    unserved = bool(served) and not plan.answer_commands
    lat = s.latency
    text = (f"Serve {plan.model.name}{served} on {plan.hardware.name} for "
            f"{plan.scenario.name} with "
            + ("no speculation" if s.nodes == 0 else f"{s.drafter}, {_setting_text(s)}"
               + ("" if unserved else f" (runs on {' and '.join(engines)})" if engines
                  else " (no engine runs this drafter: specsim's model only)"))
            + (f" (no engine serves {served.strip(' ()')}: specsim's model "
               "only; see the commands)" if unserved else "")
            + f", at {s.layout} with {s.batch:,} concurrent requests per "
            + ("TP group" if s.ep > s.tp else "replica") + ": "
            f"{s.gpus} GPUs ({_replicas(s.replicas)} of {s.layout}) for {demand}"
            + (f", on {where}" if (where := nodes_text(plan.hardware, s.gpus, s.unit_gpus))
               else "") + ". Each user "
            f"sees {s.tokens_per_s_per_user:,.0f} tokens/s (TPOT {s.tpot_s * 1e3:,.1f} ms), "
            f"time to first token {_ms(lat.ttft_s[0])} ms median / {_ms(lat.ttft_s[1])} ms "
            f"p90 / {_ms(lat.ttft_s[2])} ms p99, gaps between streamed chunks "
            f"{_ms(lat.itl_s[0])} / {_ms(lat.itl_s[1])} / {_ms(lat.itl_s[2])} ms; "
            f"{s.throughput_per_gpu:,.0f} output tokens/s per GPU. SLO: {slo_text(plan)}.")
    gain = plan.throughput_gain
    if b is not None and b.nodes and p is not None:
        text += (f" Without speculation: {p.gpus} GPUs ({p.layout}, batch "
                 f"{p.batch:,} per " + ("TP group" if p.ep > p.tp else "replica")
                 + (f", {where}" if (where := nodes_text(plan.hardware, p.gpus, p.unit_gpus))
                    else "")
                 + f", {p.tokens_per_s_per_user:,.0f} tokens/s per user)"
                 + (f"; speculation gives {gain:.2f}x the throughput per GPU." if gain else "."))
        error = float(validate_rows(plan)[0]["median abs error (%)"])
        if gain is not None and abs(gain - 1.0) * 100 < error:
            text += (f" That gain is within the model's measured error ({error:.1f}% median, "
                     "last section): at this load speculation hardly pays.")
    elif b is not None and b.nodes:
        text += " Plain decoding cannot meet this SLO."
    spec = plan.best_speculative
    if s.nodes == 0 and spec is not None:
        text += (f" With speculation: {spec.gpus} GPUs at best ({spec.drafter}, "
                 f"{_setting_text(spec)}, {spec.layout}, batch "
                 f"{spec.batch:,} per replica, "
                 f"{spec.tokens_per_s_per_user:,.0f} tokens/s per user).")
    elif s.nodes == 0 and any(d.drafter is not None for d in plan.drafters):
        text += " No setting with speculation meets this SLO."
    if plan.why:
        text += " " + plan.why
    part = next((d for d in plan.drafters if d.name == s.drafter), None)
    if s.nodes and part is not None and part.profile is not None:
        text += " " + acceptance_sentence(part)
    if rates := rate_sentence(plan):
        text += " " + rates
    engine = plan.engine_spec
    if engine is not None and engine.base:
        text += (f" Engine terms: calibrated on your own measurements ({engine.name}, "
                 f"{engine.path}; specsim bench fit).")
    return text


def acceptance_sentence(d: DrafterPlan) -> str:
    """Which acceptance the answer used and where it comes from; a proxy says so first."""
    assert d.profile is not None
    where = d.profile.provenance or "as given"
    warn = ("It rests on a PROXY acceptance: measure this drafter on your traffic "
            "(`specsim acceptance fit`) before buying GPUs. " if d.profile.is_proxy else "")
    return (f"{warn}Acceptance used for {d.name}: {acceptance_text(d)} "
            f"(\u03c4 = {d.profile.tau(d.profile.measured_positions or 1):.2f} at "
            f"{d.profile.measured_positions or 1} draft tokens), {where}; source: "
            f"{without_checkout(d.profile.source)}.")


def nodes_text(hw: Hardware, gpus: int, unit_gpus: int) -> str:
    """'2 nodes of 8 NVIDIA H100 SXM5 80GB (16 GPUs), each replica across 2 nodes' for `gpus`
    GPUs in replicas of `unit_gpus`; '' for a profile without a `node` block."""
    node = hw.node
    if node is None or gpus <= 0:
        return ""
    count = -(-gpus // node.gpus)
    text = f"{count:,} node{'s' if count != 1 else ''} of {node.gpus} {hw.name} ({gpus:,} GPUs)"
    if unit_gpus > node.gpus:
        span = unit_gpus // node.gpus
        where = (f"in one {node.scale_up_gpus}-GPU {hw.interconnect_name} domain"
                 if unit_gpus <= node.scale_up_gpus else f"over {node.network_name}")
        text += f", each replica across {span} nodes {where}"
    return text


def disaggregated_text(plan: Plan) -> str:
    """The disaggregated plan in words: both pools, the totals, TTFT with the KV transfer, and
    what the model leaves out (`serving.disaggregate`)."""
    split = plan.disaggregated
    if split is None:
        return ""
    pre, dec, hw = split.prefill, split.decode, plan.hardware
    together = plan.best or plan.best_plain
    total_nodes = nodes_text(hw, split.total_gpus, max(pre.tp, pre.ep, dec.unit_gpus))
    what = "no speculation" if dec.nodes == 0 else f"{dec.drafter}, {_setting_text(dec)}"
    lat = dec.latency
    return (
        f"Disaggregated (--disaggregate): prefill pool {pre.gpus} GPUs "
        f"({_replicas(pre.replicas)} of {pre.layout}, the target only) for "
        f"{pre.prompts_per_s:,.1f} prompts/s: one pass of {pre.pass_tokens:,.0f} prompt tokens "
        f"takes {pre.pass_s * 1e3:,.1f} ms, so the pool runs {pre.utilization:.0%} busy. Decode "
        f"pool {dec.gpus} GPUs ({_replicas(dec.replicas)} of {dec.layout}, "
        f"{what}, batch {dec.batch:,} per replica; the drafter's weights, cache and passes are "
        f"here only), {dec.tokens_per_s_per_user:,.0f} tokens/s per user. Total "
        f"{split.total_gpus} GPUs" + (f" ({total_nodes})" if total_nodes else "")
        + (f" against {together.gpus} served together" if together else "")
        + f". Each prompt's KV cache ({pre.kv_bytes_per_request / 1e6:,.1f} MB at the mean "
        f"prompt) crosses the network in {pre.transfer_s * 1e3:,.2f} ms; time to first token "
        f"(prefill alone + transfer + one decode round) {_ms(lat.ttft_s[0])} / "
        f"{_ms(lat.ttft_s[1])} / {_ms(lat.ttft_s[2])} ms at the median, p90 and p99 prompt, "
        f"gaps between chunks one round, {dec.round_s * 1e3:,.1f} ms. Not modelled: queueing "
        "for a prefill replica (a light-load TTFT), the wait for a full prefill pass, the "
        "transfer overlapping the prefill layer by layer, and the disaggregating proxy's own "
        "scheduling.")


def section_answer(plan: Plan, add: Callable[..., None]) -> None:
    add("p", answer_text(plan))
    if plan.disaggregated is not None:
        add("p", disaggregated_text(plan))
    s = plan.best or plan.best_plain
    if s is None:
        return
    commands = plan.answer_commands
    if commands:
        add("p", "Run it (each command starts one replica, or its part on one node; "
            + ("start several and balance across them; " if plan.target_tokens_per_s else "")
            + "the engine settings for other loads are under Engine commands):")
        add("code", "\n".join("\n".join([f"# {c.engine} {c.version}"
                                           + (f" ({c.node_label})" if c.node else ""),
                                           *file_comments(c), str(c.command)])
                              for c in commands))
    elif precision_text(plan):  # no engine starts these weights or this cache
        add("p", "No engine starts this setting as it was timed: each says why under Engine "
            "commands.")
    elif s.nodes == 0:
        add("p", "Run it: start the engine without speculative flags"
            + (f", --tensor-parallel-size {s.tp} (vLLM) / --tp {s.tp} (SGLang)."
               if s.tp > 1 else "."))


def slo_text(plan: Plan) -> str:
    """The SLO in words, with the option that sets each bound."""
    slo = plan.slo
    parts = [f"every user sees at least {slo.min_tokens_per_s_per_user:g} output tokens/s "
             f"(TPOT at most {_bound_ms(1.0 / slo.min_tokens_per_s_per_user)} ms, "
             "--min-tokens-per-s-per-user)" if slo.min_tokens_per_s_per_user > 0 else
             "no per-user speed bound"]
    if slo.max_ttft_p90_s is not None:
        parts.append(f"TTFT p90 at most {_bound_ms(slo.max_ttft_p90_s)} ms (--max-ttft-p90-ms)")
    if slo.max_itl_p99_s is not None:
        parts.append(f"p99 gap between streamed chunks at most {_bound_ms(slo.max_itl_p99_s)} "
                     "ms (--max-itl-p99-ms)")
    return "; ".join(parts)


def _bound_ms(seconds: float) -> str:
    """A bound in ms as the user would read it: whole ms, or three significant digits below
    10 ms (a bound of 0.004 ms printed as 'at most 0 ms' reads as nothing)."""
    ms = seconds * 1e3
    return f"{ms:,.0f}" if ms >= 10 else f"{ms:.3g}"


def _setting_row(label: str, s: Setting | None, engines: tuple[str, ...]) -> Row:
    if s is None:
        return {"option": label, "setting": "no setting meets the SLO"}
    what = "no speculation" if s.nodes == 0 else f"{s.drafter}: {_setting_text(s)}"
    lat = s.latency
    return {"option": label, "setting": what,
            "engines": ", ".join(engines) or "-", "TP": s.tp,
            "batch": s.batch, "tau (tokens/round)": s.tau,
            "tokens/s per user": s.tokens_per_s_per_user,
            "tokens/s per GPU": s.throughput_per_gpu, "TPOT (ms)": s.tpot_s * 1e3,
            "TTFT p50/p90/p99 (ms)": " / ".join(_ms(x) for x in lat.ttft_s),
            "ITL p50/p90/p99 (ms)": " / ".join(_ms(x) for x in lat.itl_s),
            "GPUs": s.gpus or "-", "replicas": s.replicas or "-"}


def section_slo(plan: Plan, add: Callable[..., None]) -> None:
    add("p", f"SLO: {slo_text(plan)}.")
    add("p", f"Demand: {plan.demand.text()}; each option below needs the fewest GPUs for it "
        "(TP x replicas). TTFT includes waiting for the next round, the prompt tokens queued "
        "ahead and the prompt's own chunked prefill; ITL is the gap between streamed chunks "
        "(one chunk per round: what `vllm bench serve` reports; a client that spreads a "
        "chunk's gap over its tokens sees about TPOT). TTFT leaves out the request's path "
        "outside the GPU (HTTP, tokenization, detokenization, first scheduling): published "
        "concurrency-1 runs measure 50-75 ms more than this model at short prompts "
        "(`specsim validate`, serving latency).")
    rows = [_setting_row("with speculation", plan.best, plan.best_engines),
            _setting_row("plain decoding", plan.best_plain, plan.best_plain_engines)]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    add("table", rows=[{k: r.get(k, "") for k in keys} for r in rows], csv="slo.csv")
    if plan.best is None and plan.best_plain is None:
        c = plan.closest
        add("p", "No setting meets this SLO. " + (
            f"The closest is {c.drafter} at TP {c.tp}, batch {c.batch}, "
            f"{c.nodes} drafted nodes: {c.tokens_per_s_per_user:,.1f} tokens/s per user, "
            f"TTFT p90 {_ms(c.ttft_p90_s)} ms, ITL p99 {_ms(c.latency.itl_p99_s)} ms. "
            "It would need a faster GPU, a smaller target, a stronger drafter or a looser SLO."
            if c else "Nothing fits in memory."))

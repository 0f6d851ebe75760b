"""The capacity-planning report of `specsim plan`: report.md, report.html, PNG plots, CSV tables.

The report is a list of blocks (`present.document`) that its sections fill, rendered as
Markdown next to its PNG and CSV files and as one self-contained HTML page.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from specsim.engines import EngineCommand
from specsim.errors import SpecError
from specsim.forward.memory import DEFAULT_MEMORY_FRACTION, DEFAULT_WORKSPACE_TOKENS
from specsim.forward.ops import ROUTING_LOCALITY
from specsim.present.document import Block, Row, png_bytes, to_html, to_markdown, without_checkout
from specsim.present.report_hardware import profile_kind, section_memory, section_tn
from specsim.serving.capacity import Setting
from specsim.serving.plan import DrafterPlan, Plan
from specsim.specs.engines import Engine
from specsim.specs.hardware import Hardware
from specsim.specs.outputs import OutputFolder, file_slug
from specsim.speculation.recommend import LENGTHENS

SECTIONS = (
    "Answer", "Forward-pass time T(n) and its knee", "Memory and maximum concurrency",
    "Speedup against drafted nodes", "Recommended chain or tree per batch size",
    "Tokens/s per user against throughput per GPU", "At the SLO: setting and GPU count",
    "Batch-level policies under load", "Engine commands", "Assumptions, sources and error",
)


def _setting_text(s: Setting) -> str:
    """'no speculation', 'a chain of 1 draft token', 'a tree of 12 nodes (depth 4, topk 3)'."""
    if s.nodes == 0:
        return "no speculation"
    if s.shape == "chain":
        return f"a chain of {s.nodes} draft token{'s' if s.nodes > 1 else ''}"
    return f"a tree of {s.nodes} drafted nodes (depth {s.depth}, topk {s.max_width})"


# ---- sections --------------------------------------------------------------------------------

def acceptance_text(d: DrafterPlan) -> str:
    """'alpha = 0.65' or 'alpha per position 0.90, 0.80, 0.70' (+ measured ranks)."""
    assert d.profile is not None
    alphas = d.profile.position_alphas
    text = (f"\u03b1 = {alphas[0]:.2f}" if len(set(alphas)) == 1 else
            "\u03b1 per position " + ", ".join(f"{a:.2f}" for a in alphas[:4])
            + (", ..." if len(alphas) > 4 else "")) if alphas else "per-rank acceptance"
    return text


def engine_shapes_text(d: DrafterPlan) -> str:
    """Which candidates the engines build for this drafter (the figure's solid curves)."""
    return "chains and SGLang trees" if d.uses_trees else "chains (engine-buildable)"


def _speedup_png(plan: Plan, d: DrafterPlan) -> bytes:
    """The speedup-versus-nodes figure of one drafter, its recommended settings marked."""
    from specsim.present.plots import speedup_png

    assert d.curves is not None
    rec = d.recommendation
    tp = d.setup.tp if d.setup else 1
    marked = None if rec is None else np.array([(c.nodes, c.speedup) for c in rec.best],
                                              dtype=np.float64)
    title = (f"Speedup against drafted nodes per request, per batch size, with {d.name}\n"
             f"{plan.model.name} on {plan.hardware.name}, TP {tp}, engine {plan.engine}\n"
             f"{plan.scenario.slug}: {acceptance_text(d)}; {engine_shapes_text(d)}")
    return speedup_png(d.curves, title=title, bound=d.bound_curves, marked=marked,
                       marked_as="recommended" if rec is not None else "best")


def _section_speedup(plan: Plan, add: Callable[..., None]) -> None:
    parts = [d for d in plan.drafters if d.speedup is not None]
    bound = any(d.bound is not None for d in parts)
    add("p", "Speedup over plain decoding against drafted nodes per request, per batch size "
        "(the article's figure), at the scenario's context, engine round time included, for "
        "the candidates the recommendation weighs: what the engines build (chains for vLLM; "
        "SGLang's EAGLE trees only with measured per-rank acceptance). The colour names the "
        "batch size; curves are drawn smallest batch first, each later one thinner with a "
        "smaller marker, so curves that coincide (light loads, while verification stays "
        "memory-bound) both show. Black-edged markers are the recommended setting of the "
        "next table, also given in the legend. Under light load longer drafts win; as the "
        "batch grows verification passes the knee and the best size shrinks."
        + (" Dashed: the best tree of any shape (per-rank acceptance derived from the chain's "
           "\u03b1 where none was measured), a bound no engine builds." if bound else ""))
    taken: set[str] = set()
    for d in parts:
        add("img", f"speedup-{speedup_slug(d, taken)}.png", png=_speedup_png(plan, d))


def speedup_slug(d: DrafterPlan, taken: set[str]) -> str:
    """The file-name part of a drafter's speedup plot: its spec's slug (a path's stem) made
    safe for a file name, never a path; one not in `taken` (then added), so two drafters
    named alike (specs/d1.yaml, other/d1.yaml) get two files."""
    return file_slug(d.drafter.slug if d.drafter is not None else d.name, taken)


def recommendation_rows(plan: Plan) -> list[Row]:
    """Per batch size, each drafter's best setting side by side."""
    parts = [d for d in plan.drafters if d.recommendation is not None]
    if not parts:
        return []
    rows = []
    for i, c0 in enumerate(parts[0].recommendation.best):  # type: ignore[union-attr]
        row: Row = {"batch": c0.batch}
        for d in parts:
            c = d.recommendation.best[i]  # type: ignore[union-attr]
            what = "none" if c.nodes == 0 else f"{c.shape} of {c.nodes}" + (
                f" (depth {c.depth}, topk {c.max_width})" if c.shape == "tree" else "")
            row[d.name] = f"{what}, {c.speedup:.2f}x" + ("" if c.fits else " (no fit)")
        rows.append(row)
    return rows


def _section_recommend(plan: Plan, add: Callable[..., None]) -> None:
    rows = recommendation_rows(plan)
    if not rows:
        add("p", "No drafter: nothing to recommend.")
        return
    add("p", "The chain or tree an engine builds with the highest speedup at each batch size "
        "(specsim recommend, on the smallest TP group that fits), with its speedup over plain "
        "decoding at the same batch, for every drafter. Chains are draft tokens per request.")
    add("table", rows=rows, csv="recommend.csv")


def pareto_rows(plan: Plan) -> list[Row]:
    """Frontier points per drafter: with speculation, and the plain-decoding frontier."""
    return [{"drafter": p.drafter, "tokens/s per user": p.tokens_per_s_per_user,
             "tokens/s per GPU": p.throughput_per_gpu, "TP": p.tp, "batch": p.batch,
             "speculation": _candidate_text(p.candidates, p.candidate)}
            for p in plan.pareto]


def _candidate_text(c: Any, k: int) -> str:
    n = int(c.nodes[k])
    if n == 0:
        return "none"
    if c.shape[k] == "chain":
        return f"chain of {n}"
    return f"tree of {n} (depth {int(c.depth[k])}, topk {int(c.max_width[k])})"


def _section_pareto(plan: Plan, add: Callable[..., None]) -> None:
    rows = pareto_rows(plan)

    def draw(ax: Any) -> None:
        # plain decoding first, as a wide band, so that a drafter whose front coincides with
        # it (speculation that never pays) still shows on top; markers thinned on the dense
        # batch grid
        names = sorted(dict.fromkeys(r["drafter"] for r in rows), key=lambda n: n != "none")
        for name in names:
            pts = [r for r in rows if r["drafter"] == name]
            x = [r["tokens/s per user"] for r in pts]
            y = [r["tokens/s per GPU"] for r in pts]
            if name == "none":
                ax.plot(x, y, "-", color="0.55", lw=6, alpha=0.45, zorder=1,
                        label="plain decoding")
            else:
                ax.plot(x, y, "-", lw=1.5, marker="o", ms=3, zorder=3,
                        markevery=max(1, len(pts) // 12), label=name)
        ax.axvline(plan.min_tokens_per_s_per_user, color="tab:red", lw=1, ls=":",
                   label=f"SLO {plan.min_tokens_per_s_per_user:g} tokens/s per user")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("output tokens/s per user")
        ax.set_ylabel("output tokens/s per GPU")
        ax.set_title(f"{plan.model.name} on {plan.hardware.name}, {plan.scenario.slug}: "
                     "per GPU against per user", fontsize=9)
        from matplotlib.ticker import FormatStrFormatter, LogLocator

        ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(FormatStrFormatter("%g"))
        ax.legend(fontsize=8)
    add("p", "The Pareto frontier of the serving model over batch size, TP degree and "
        "engine-buildable speculation setting (chunked prefill included): the most output "
        "tokens/s per GPU at each speed per user, with each drafter and with plain decoding "
        "(dashed). Settings right of the SLO line meet it.")
    add("img", "pareto.png", png=png_bytes(draw))
    add("table", rows=rows, csv="pareto.csv")


def _ms(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x * 1e3:,.0f}"


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


def _section_slo(plan: Plan, add: Callable[..., None]) -> None:
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


def _section_policies(plan: Plan, add: Callable[..., None]) -> None:
    from specsim.present.plots import policies_png
    from specsim.serving.policies import ADAPTIVE, BEST_FIXED, DSPARK, GOODPUT, NONE

    sw = plan.policies
    if sw is None:
        add("p", "No drafter with an acceptance profile: no policy simulation.")
        return
    rel, to_best = sw.relative_to_none(), sw.relative_to(BEST_FIXED)
    slower = [f"{p} from batch {int(sw.slower_than_none(p)[0])}" for p in sw.policies
              if p.startswith("fixed") and sw.slower_than_none(p).size]
    dspark, goodput = to_best[sw.policies.index(DSPARK)], to_best[sw.policies.index(GOODPUT)]
    add("p", f"Simulated with {plan.policy_drafter}'s acceptance (per-request confidences "
        "drawn with a fixed seed) over a load sweep on the smallest TP group that fits: fixed "
        "draft lengths, DSpark's allocation of draft lengths across the batch, and a "
        "goodput-driven policy that turns speculation down under load (TurboSpec); the fixed "
        "64-node tree is the article's tree of any shape, a bound rather than an engine "
        "setting. "
        + ("Fixed speculation makes the busy server slower than none: " + "; ".join(slower)
           + "." if slower else "No fixed setting falls below plain decoding in this sweep.")
        + " Every policy is charged the same round time (verification of all drafted tokens, "
        "the drafter's passes up to the longest draft, the speculation overhead once anything "
        "is drafted). Both adaptive policies may draft nothing, so neither falls below plain "
        "decoding (the goodput controller by at most its measurement noise). They are read "
        "against the best fixed chain at each load (0 to 16 tokens, chosen with hindsight; "
        "the grey band): DSpark's allocation, which may draft unevenly across requests, "
        f"reaches {dspark.min():.2f}x to {dspark.max():.2f}x of it, the goodput controller, "
        f"which must find a length online, {goodput.min():.2f}x to {goodput.max():.2f}x."
        " The table gives throughput as a multiple of plain decoding at the same load "
        "(x plain; below 1 is slower than none), the adaptive policies' also as a multiple of "
        "the best fixed chain (x best fixed), and the draft lengths chosen.")
    title = (f"Speculation policies over load: {plan.model.name} on {plan.hardware.name} "
             f"with {plan.policy_drafter}, engine {plan.engine}, {plan.scenario.slug}")
    add("img", "policies.png", png=policies_png(sw, title=title))
    rows = []
    for i, b in enumerate(sw.batch):
        row: Row = {"batch": int(b)}
        for j, name in enumerate(sw.policies):
            if name == NONE:
                continue
            row[f"{name} (x plain)"] = float(rel[j, i])
            if name == BEST_FIXED:
                row[f"{name}: chain (tokens)"] = int(sw.mean_draft[j, i])
            if name in ADAPTIVE:
                row[f"{name} (x best fixed)"] = float(to_best[j, i])
                row[f"{name}: mean draft (tokens)"] = float(sw.mean_draft[j, i])
        rows.append(row)
    add("table", rows=rows, csv="policies.csv")


def command_lines(plan: Plan) -> list[tuple[str, str]]:
    """(drafter, text) per drafter: the recommend API's engine commands (`DrafterPlan.commands`),
    or why there is none.

    Each command is one line rendered from its argument vector (shell-quoted); every other line
    is a one-line `#` comment, so no text from a spec can start a line of its own.
    """
    from specsim.specs.names import one_line

    out = []
    for d in plan.drafters:
        if d.recommendation is None or d.setup is None:
            continue
        if d.no_commands:
            out.append((d.name, f"# no command: {one_line(d.no_commands)}"))
            continue
        # why the per-batch chain lengthens with the batch, where it does (recommend's first
        # such note: the schedule's, or else the best chain's at the batch sizes it scored)
        lines = [f"# {one_line(n)}" for n in d.recommendation.notes
                 if n.startswith(LENGTHENS)][:1]
        for c in d.commands:
            if c.command is None:
                lines.append(f"# {c.engine} {c.version}: {one_line(c.reason)}")
            else:
                label = c.batch_label or (f"batch {_batch_text(c.batches)}" if c.batches
                                          else "")
                lines += [f"# {c.engine} {c.version}" + (f" ({label})" if label else ""),
                          *file_comments(c), c.command]
        out.append((d.name, "\n".join(lines)))
    return out


def file_comments(c: EngineCommand) -> list[str]:
    """The files a command reads (TensorRT-LLM's extra-options YAML) as `#` comment lines, each
    written beside the report under its name (`render_report`)."""
    from specsim.specs.names import one_line

    lines = []
    # a launch over several nodes (TensorRT-LLM's mpirun world) reads it on every node
    where = ("copy it to the same folder on every node" if c.argv[:1] == ("mpirun",)
             else "the command reads it")
    for name, text in c.files:
        lines.append(f"# {one_line(name)} (written beside this report; {where}):")
        lines += [f"#   {one_line(line)}" for line in text.splitlines()]
    return lines


def _batch_text(batches: tuple[int, ...]) -> str:
    """'1-256' for a contiguous run of batch sizes, else the list."""
    if len(batches) > 2 and list(batches) == list(range(batches[0], batches[-1] + 1)):
        return f"{batches[0]}-{batches[-1]}"
    return ", ".join(map(str, batches))


def _section_commands(plan: Plan, add: Callable[..., None]) -> None:
    lines = command_lines(plan)
    if not lines:
        add("p", "No drafter, so plain decoding: start the engine without speculative flags.")
        return
    add("p", "Commands that start a server with the recommended setting (specsim recommend's "
        "engine commands), on the smallest TP group that fits:")
    for name, text in lines:
        add("p", f"{name}:")
        add("code", text)


def validate_rows(plan: Plan) -> list[Row]:
    """`specsim validate`'s held-out error, all rows first, then per drafter family."""
    return [{"group": g.group.removeprefix("family="), "rows": g.rows,
             "median abs error (%)": 100 * g.median_abs_error} for g in plan.validation]


def _section_assumptions(plan: Plan, add: Callable[..., None]) -> None:
    sc = plan.scenario
    rows: list[Row] = [
        {"assumption": "prompt tokens", "value": f"median {sc.prompt.median:g}, p90 "
         f"{sc.prompt.p90:g}", "source": without_checkout(sc.prompt.source)},
        {"assumption": "output tokens", "value": f"median {sc.output.median:g}, p90 "
         f"{sc.output.p90:g}", "source": without_checkout(sc.output.source)},
    ]
    for d in plan.drafters:
        if d.profile is not None:
            rows.append({"assumption": f"acceptance of {d.name}",
                         "value": f"{acceptance_text(d)}: {d.profile.provenance}"
                         if d.profile.provenance else acceptance_text(d),
                         "source": without_checkout(d.profile.source)})
    rows += [
        {"assumption": "memory", "value": f"{DEFAULT_MEMORY_FRACTION:.0%} of HBM usable, "
         f"{DEFAULT_WORKSPACE_TOKENS:,}-token workspace",
         "source": "vLLM defaults (gpu_memory_utilization, max_num_batched_tokens)"},
        {"assumption": "chunked prefill", "value": "prompts ride in the round's pass",
         "source": "steady state: B tau / L_out prompts arrive per round"},
        {"assumption": "engine", "value": _engine_text(plan.engine_spec),
         "source": f"engines/ (specsim engines show {plan.engine})"},
        {"assumption": "hardware", "value": f"{plan.hardware.name} ({plan.hardware.slug}, "
         f"{profile_kind(plan.hardware)})",
         "source": without_checkout(next(iter(plan.hardware.sources.values()), ""))},
    ]
    if plan.model.moe is not None:
        rows.append({"assumption": "MoE routing",
                     "value": f"uniform over the experts; the q tokens of one request in a pass "
                              f"touch the experts of q^{ROUTING_LOCALITY:g} independent tokens",
                     "source": "distinct-expert counts per verify pass, aws-neuron/nkipy PR #63 "
                               "and Luce-Org/lucebox PR #501 (specsim/forward/ops.py)"})
    add("table", rows=rows, csv="assumptions.csv")
    err_rows = validate_rows(plan)
    add("p", "Measured error of the round-time model: `specsim validate` against published "
        "speedups, engine terms fitted on the other sources (held out):")
    add("table", rows=err_rows, csv="validate.csv")
    cal = [{"profile": slug, "calibration": hw.sources.get("efficiency.pass_overhead_s", "")}
           for slug, hw in plan.calibrated]
    if cal:
        add("p", "Calibration of T(n) against measured kernels (held-out error per op class):")
        add("table", rows=cal, csv="calibration.csv")
    for note in plan.notes:
        add("p", f"Note: {note}")


def _replicas(n: int) -> str:
    return f"{n} replica" + ("" if n == 1 else "s")


def headline(plan: Plan) -> str:
    """The answer's first sentence (what to serve, on how many GPUs, for which demand), for a
    terminal line beside the report."""
    text = answer_text(plan)
    end = text.find(". Each user")
    return text if end < 0 else text[:end + 1]


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
    lat = s.latency
    text = (f"Serve {plan.model.name} on {plan.hardware.name} for {plan.scenario.name} with "
            + ("no speculation" if s.nodes == 0 else f"{s.drafter}, {_setting_text(s)}"
               + (f" (runs on {' and '.join(engines)})" if engines else
                  " (no engine runs this drafter: specsim's model only)"))
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


def _section_answer(plan: Plan, add: Callable[..., None]) -> None:
    add("p", answer_text(plan))
    if plan.disaggregated is not None:
        add("p", disaggregated_text(plan))
    s = plan.best or plan.best_plain
    if s is None:
        return
    commands = plan.answer_commands
    if commands:
        add("p", "Run it (each command starts one replica; "
            + ("start several and balance across them; " if plan.target_tokens_per_s else "")
            + "the engine settings for other loads are under Engine commands):")
        add("code", "\n".join("\n".join([f"# {c.engine} {c.version}", *file_comments(c),
                                          str(c.command)]) for c in commands))
    elif s.nodes == 0:
        add("p", "Run it: start the engine without speculative flags"
            + (f", --tensor-parallel-size {s.tp} (vLLM) / --tp {s.tp} (SGLang)."
               if s.tp > 1 else "."))


SECTION_BUILDERS = (_section_answer, section_tn, section_memory, _section_speedup,
                    _section_recommend, _section_pareto, _section_slo, _section_policies,
                    _section_commands, _section_assumptions)


def build_report(plan: Plan) -> tuple[list[Block], dict[str, bytes]]:
    """The report's blocks and its PNG plots and CSV tables by file name (nothing written)."""
    blocks: list[Block] = []
    files: dict[str, bytes] = {}

    def keep(name: str, data: bytes) -> None:
        if name in files:  # a second plot or table of one name would silently replace the first
            raise SpecError(f"report: two files named {name!r}")
        files[name] = data

    def add(kind: str, text: str = "", *, rows: list[Row] | None = None, csv: str = "",
            png: bytes | None = None) -> None:
        if kind == "img":
            assert png is not None
            keep(text, png)
        if kind == "table" and rows and csv:
            keep(csv, _csv_bytes(rows))
        blocks.append(Block(kind, text, tuple(rows or ())))

    for title, builder in zip(SECTIONS, SECTION_BUILDERS, strict=True):
        blocks.append(Block("h2", title))
        builder(plan, add)
    return blocks, files


def _csv_bytes(rows: list[Row]) -> bytes:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=keys)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def render_report(plan: Plan) -> dict[str, bytes]:
    """Every file of the report by name: report.md, report.html, the PNGs and the CSVs."""
    blocks, files = build_report(plan)
    for c in (*plan.answer_commands, *(c for d in plan.drafters for c in d.commands)):
        for name, text in c.files:  # the files the report's commands read, by their names
            data = text.encode("utf-8")
            if files.setdefault(name, data) != data:
                raise SpecError(f"report: two files named {name!r}")
    images = {name: data for name, data in files.items() if name.endswith(".png")}
    title = f"Capacity plan: {plan.model.name} on {plan.hardware.name}, {plan.scenario.name}"
    return {"report.md": to_markdown(blocks, title).encode("utf-8"),
            "report.html": to_html(blocks, title, images).encode("utf-8"), **files}


def write_report(plan: Plan, out: Path, *, force: bool = False) -> list[Path]:
    """Write report.md, report.html, the PNGs and CSVs as the folder `out`, whole: rendered
    first, then written into a fresh folder beside `out` that one rename puts in place (see
    `OutputFolder`: locked, never through a symbolic link, the old report kept on any error).
    An existing non-empty folder is refused without `force` and replaced whole with it (no
    file of the old report is left). Returns the files written."""
    with OutputFolder(out, force=force) as folder:
        return folder.publish(render_report(plan))


def _engine_text(engine: Engine | None) -> str:
    """The engine a plan timed, and whether its speculative rounds overlap their host work."""
    assert engine is not None
    if engine.launch == "none":
        return f"{engine.slug}: {engine.name}"
    overlap = "overlap" if engine.spec_overlap else "do not overlap"
    calibrated = (f"; CALIBRATED on your own measurements (specsim bench fit, {engine.path}): "
                  "its host terms are fitted to your benchmark result files"
                  if engine.base else "")
    return (f"{engine.slug}: {engine.name}; speculative rounds {overlap} their host "
            f"work{calibrated}")

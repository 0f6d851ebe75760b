"""The report's sections on speculation itself: speedup against drafted nodes per batch size,
the recommended chain or tree per batch size, the Pareto frontier of tokens/s per user against
throughput per GPU, and the batch-level policies under load; `acceptance_text` states a
drafter's acceptance for them and for the answer.

Split from `present.report`, which assembles every section into the document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from specsim.present.document import Row, png_bytes
from specsim.serving.drafter_plan import DrafterPlan
from specsim.serving.plan import Plan
from specsim.specs.outputs import file_slug


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


def section_speedup(plan: Plan, add: Callable[..., None]) -> None:
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


def section_recommend(plan: Plan, add: Callable[..., None]) -> None:
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


def section_pareto(plan: Plan, add: Callable[..., None]) -> None:
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


def section_policies(plan: Plan, add: Callable[..., None]) -> None:
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

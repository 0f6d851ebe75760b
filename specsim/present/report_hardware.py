"""The report's sections on the GPU: T(n) of the target with its knee (the datasheet roofline
and the T(n) the plan prices with) and memory with the maximum concurrency against context.

Split from `present.report`, which assembles every section into the document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specsim.forward.memory import DEFAULT_MEMORY_FRACTION
from specsim.present.document import Row, png_bytes
from specsim.serving.plan import Plan
from specsim.specs.hardware import Hardware


def tn_rows(plan: Plan) -> list[Row]:
    """T(n) of the target at the answer's TP with no cached context, one column per curve
    (`Plan.tn`)."""
    assert plan.tn is not None
    rows: list[Row] = [{"tokens n": int(k)} for k in plan.tn.tokens]
    for label, times in plan.tn.seconds.items():
        for row, t in zip(rows, times, strict=True):
            row[label] = float(t) * 1e3
    return rows


def section_tn(plan: Plan, add: Callable[..., None]) -> None:
    from specsim.specs.transferred import expected_error_text

    rows = tn_rows(plan)
    knee = plan.hardware.ops_per_byte
    labels = [k for k in rows[0] if k != "tokens n"]
    tp = plan.tn.tp if plan.tn else 1

    def draw(ax: Any) -> None:
        n = [r["tokens n"] for r in rows]
        for label, style in zip(labels, ("o-", "s--", "^-"), strict=False):
            ax.plot(n, [r[label] for r in rows], style, ms=3, label=label.removesuffix(" (ms)"))
        ax.axvline(knee, color="tab:red", ls=":", lw=1, label=f"datasheet knee {knee:.0f} tokens")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens in the pass n")
        ax.set_ylabel("T(n), ms")
        ax.set_title(f"{plan.model.name} on {plan.hardware.name}, TP {tp}", fontsize=10)
        ax.legend(fontsize=8)
    hw = plan.hardware
    engine = plan.setup.engine
    text = (f"Time of one target forward pass over n tokens (n requests of one token, no cached "
            f"context), TP {tp}. Flat while memory-bound, linear once compute-bound; the "
            f"datasheet knee is at ops:byte = peak flops / bandwidth = {knee:.0f} tokens. The "
            "datasheet roofline is the article's idealized GPU, for reference only. The other "
            "curve is the one T(n) this plan prices every setting with: ")
    if hw.is_calibrated and not hw.slug.startswith("transferred/"):
        text += "the kernels at this profile's fitted efficiencies"
    else:
        text += ("the kernels on the GPU's one kernel model, the GEMM model calibrated on "
                 "measured A100 kernels with this GPU's SM count (specsim/specs/transferred.py, "
                 "the same kernels as `--hardware "
                 f"transferred/{hw.slug.removeprefix('transferred/')}`; expected error: "
                 f"{expected_error_text()})")
    text += (f", plus the kernel, launch and host terms per pass and per request of "
             f"{engine.name} (engine profile {engine.slug}), as `specsim roofline` prints them "
             "(engine_ms). " if engine else ", with no engine terms (the roofline engine). ")
    others = [slug for slug, _ in plan.calibrated
              if slug.startswith(f"{hw.slug}-") and not hw.is_calibrated]
    if others:
        text += (f"A calibrated profile of this GPU exists (`--hardware calibrated/{others[0]}`); "
                 "this plan does not use it. ")
    text += f"The plan's numbers use the {hw.slug} profile ({profile_kind(hw)})."
    add("p", text)
    add("img", "tn.png", png=png_bytes(draw))
    add("table", rows=rows, csv="tn.csv")


def profile_kind(hw: Hardware) -> str:
    if hw.slug.startswith("transferred/"):
        return "datasheet with transferred efficiencies"
    return "calibrated" if hw.is_calibrated else "datasheet, kernels on the transferred model"


def memory_rows(plan: Plan) -> list[Row]:
    """`Plan.memory` (`serving.plan.memory_by_context`) with units in the column names."""
    return [{"TP": int(r["tp"]), **({"EP": int(r["ep"])} if "ep" in r else {}),
             "context (tokens)": int(r["context_tokens"]),
             "weights per GPU (GB)": r["weights_gb"],
             "cache per request per GPU (MB)": r["cache_per_request_gb"] * 1e3,
             "max concurrent requests": int(r["max_concurrency"])}
            for r in plan.memory]


def section_memory(plan: Plan, add: Callable[..., None]) -> None:
    rows = memory_rows(plan)

    def draw(ax: Any) -> None:
        for tp, ep in sorted({(r["TP"], r.get("EP", 1)) for r in rows}):
            pts = [r for r in rows if (r["TP"], r.get("EP", 1)) == (tp, ep)]
            ax.plot([r["context (tokens)"] for r in pts],
                    [max(r["max concurrent requests"], 0.5) for r in pts], "o-",
                    label=f"TP {tp}" + (f" x EP {ep}" if ep > 1 else ""))
        ax.axvline(plan.scenario.decode_context_tokens, color="0.4", ls=":", lw=1,
                   label="scenario's mean context")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("cached tokens per request")
        ax.set_ylabel("max concurrent requests (per TP group)")
        ax.set_title(f"{plan.model.name} on {plan.hardware.name}: requests that fit in "
                     f"{DEFAULT_MEMORY_FRACTION:.0%} of HBM", fontsize=9)
        ax.legend(fontsize=8)
    who = plan.drafters[0].name
    p = plan.setup.precision
    add("p", f"Weights (the target's and {who}'s; the target's in "
        f"{plan.model.weights_text(p.weight_dtype)}), workspace and caches per GPU (the "
        f"target's and {who}'s cache, in {p.kv_dtype}) against the context each request "
        "holds; the "
        f"largest batch that fits in {DEFAULT_MEMORY_FRACTION:.0%} of HBM. At the "
        f"scenario's mean decoding context ({plan.scenario.decode_context_tokens:,.0f} tokens) "
        "the serving model caps the batch at: "
        + ", ".join(f"TP {t.tp}" + (f" x EP {t.ep}" if t.ep > 1 else "")
                    + f": {t.max_concurrency:,}" for t in plan.drafters[0].tables)
        + ".")
    add("img", "memory.png", png=png_bytes(draw))
    add("table", rows=rows, csv="memory.csv")

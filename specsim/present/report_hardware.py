"""The report's sections on the GPU: T(n) of the target with its knee (datasheet, expected real
and calibrated curves) and memory with the maximum concurrency against context.

Split from `present.report`, which assembles every section into the document.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from specsim.forward.memory import DEFAULT_MEMORY_FRACTION
from specsim.present.document import Row, png_bytes
from specsim.serving.curves import tn_curves_s
from specsim.serving.plan import Plan, memory_by_context
from specsim.specs.hardware import Efficiency, Hardware, expected_efficiency

CONTEXTS = (512.0, 2048.0, 8192.0, 32768.0, 131072.0)
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def _builtin_calibrated(hw: Hardware) -> Hardware | None:
    """The built-in calibrated profile of this datasheet GPU (hardware/calibrated/<slug>-*)."""
    for slug, profile in calibrated_profiles():
        if slug.startswith(f"{hw.slug}-"):
            return profile  # type: ignore[no-any-return]
    return None


EXPECTED_LABEL = "expected real (ms)"


def tn_curves(hw: Hardware) -> list[tuple[str, Hardware]]:
    """(label, profile) per T(n) curve: the datasheet roofline; the expected real curve (the
    profile as the plan prices its kernels: `engine_time.expected_kernel_s`, a datasheet GPU at
    its expected efficiency) unless the profile is calibrated; the calibrated one when the
    profile is calibrated or a built-in calibrated profile exists for this GPU."""
    ideal = dataclasses.replace(hw, efficiency=Efficiency())
    curves = [("datasheet (ms)", ideal)]
    if hw.slug.startswith("transferred/"):
        return [*curves, ("expected real, transferred (ms)", hw)]
    if hw.is_calibrated:
        return [*curves, (f"calibrated {hw.slug} (ms)", hw)]
    curves.append((EXPECTED_LABEL, hw))
    cal = _builtin_calibrated(hw)
    if cal is not None:
        curves.append((f"calibrated {cal.slug} (ms)", cal))
    return curves


def tn_rows(plan: Plan) -> list[Row]:
    """T(n) of the target at the answer's TP with no cached context, one column per curve."""
    tp = plan.best.tp if plan.best else 1
    curves = [(label, hw, label == EXPECTED_LABEL) for label, hw in tn_curves(plan.hardware)]
    rows: list[Row] = [{"tokens n": int(k)} for k in TOKENS]
    for label, times in tn_curves_s(plan.model, curves, TOKENS, tp=tp).items():
        for row, t in zip(rows, times, strict=True):
            row[label] = float(t) * 1e3
    return rows


def section_tn(plan: Plan, add: Callable[..., None]) -> None:
    from specsim.specs.transferred import expected_error_text

    rows = tn_rows(plan)
    knee = plan.hardware.ops_per_byte
    labels = [k for k in rows[0] if k != "tokens n"]
    tp = plan.best.tp if plan.best else 1

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
    text = (f"Time of one target forward pass over n tokens (no cached context), TP {tp}. Flat "
            "while memory-bound, linear once compute-bound; the datasheet knee is at ops:byte "
            f"= peak flops / bandwidth = {knee:.0f} tokens. ")
    if hw.is_calibrated and not hw.slug.startswith("transferred/"):
        text += "The calibrated curve uses this profile's fitted efficiencies. "
    else:
        bandwidth, flops = expected_efficiency(hw)
        text += ("The expected real curve is the datasheet roofline at the GPU's expected "
                 f"kernel efficiency ({bandwidth:g} of its bandwidth, {flops:g} of its peak "
                 "flops: specsim/specs/transferred.py), the one the plan prices every engine's "
                 "kernels at; `--hardware transferred/<slug>` applies the multi-term GEMM model "
                 "transferred from the GPUs with kernel measurements instead (expected error "
                 f"{expected_error_text()}). ")
        if not any(k.startswith("calibrated") for k in labels):
            text += "No calibrated profile exists for this GPU (hardware/calibrated/). "
    text += f"The plan's numbers use the {hw.slug} profile ({profile_kind(hw)})."
    add("p", text)
    add("img", "tn.png", png=png_bytes(draw))
    add("table", rows=rows, csv="tn.csv")


def profile_kind(hw: Hardware) -> str:
    if hw.slug.startswith("transferred/"):
        return "datasheet with transferred efficiencies"
    return "calibrated" if hw.is_calibrated else "datasheet roofline"


def memory_rows(plan: Plan) -> list[Row]:
    """memory_by_context with units in the column names."""
    return [{"TP": int(r["tp"]), "context (tokens)": int(r["context_tokens"]),
             "weights per GPU (GB)": r["weights_gb"],
             "cache per request per GPU (MB)": r["cache_per_request_gb"] * 1e3,
             "max concurrent requests": int(r["max_concurrency"])}
            for r in memory_by_context(plan, CONTEXTS)]


def section_memory(plan: Plan, add: Callable[..., None]) -> None:
    rows = memory_rows(plan)

    def draw(ax: Any) -> None:
        for tp in sorted({r["TP"] for r in rows}):
            pts = [r for r in rows if r["TP"] == tp]
            ax.plot([r["context (tokens)"] for r in pts],
                    [max(r["max concurrent requests"], 0.5) for r in pts], "o-",
                    label=f"TP {tp}")
        ax.axvline(plan.scenario.decode_context_tokens, color="0.4", ls=":", lw=1,
                   label="scenario's mean context")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("cached tokens per request")
        ax.set_ylabel("max concurrent requests (per TP group)")
        ax.legend(fontsize=8)
    who = plan.drafters[0].name
    add("p", f"Weights (the target's and {who}'s), workspace and caches per GPU (the "
        f"target's and {who}'s cache) against the context each request holds; the "
        f"largest batch that fits in {DEFAULT_MEMORY_FRACTION:.0%} of HBM. At the "
        f"scenario's mean decoding context ({plan.scenario.decode_context_tokens:,.0f} tokens) "
        "the serving model caps the batch at: "
        + ", ".join(f"TP {t.tp}: {t.max_concurrency:,}" for t in plan.drafters[0].tables)
        + ".")
    add("img", "memory.png", png=png_bytes(draw))
    add("table", rows=rows, csv="memory.csv")


def calibrated_profiles() -> list[tuple[str, Any]]:
    from specsim.specs.hardware import load_hardware
    from specsim.specs.io import builtin_dir

    folder = builtin_dir("hardware") / "calibrated"
    return [(p.stem, load_hardware(str(p))) for p in sorted(folder.glob("*.yaml"))]

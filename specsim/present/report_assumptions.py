"""The report's last section: the assumptions behind every number with their sources (lengths,
acceptance, memory, engine, hardware, MoE routing), the round-time model's held-out error and
the calibration of T(n).

Split from `present.report`, which assembles every section into the document; the answer
(`report_answer`) quotes the held-out error (`validate_rows`).
"""

from __future__ import annotations

from collections.abc import Callable

from specsim.forward.memory import DEFAULT_MEMORY_FRACTION, DEFAULT_WORKSPACE_TOKENS
from specsim.forward.ops import ROUTING_LOCALITY
from specsim.measurement.validate_summary import RATES
from specsim.present.document import Row, without_checkout
from specsim.present.report_hardware import profile_kind
from specsim.present.report_speculation import acceptance_text
from specsim.serving.plan import Plan
from specsim.specs.engines import Engine


def validate_rows(plan: Plan) -> list[Row]:
    """`specsim validate`'s held-out error, all rows first, then per drafter family."""
    return [{"group": g.group.removeprefix("family="), "rows": g.rows,
             "median abs error (%)": 100 * g.median_abs_error} for g in plan.validation
            if g.group == "all" or g.group.startswith("family=")]


RATE_GROUP = f"{RATES}="  # `specsim validate`'s groups of absolute decode rates


def rate_rows(plan: Plan) -> list[Row]:
    """`specsim validate`'s error on published absolute decode rates, per GPU vendor and
    dense / MoE model; the signed median positive where specsim predicts faster."""
    return [{"published decode rates": g.group.removeprefix(RATE_GROUP), "rows": g.rows,
             "median, predicted over measured speed, less 1 (%)": 100 * g.median_signed_error}
            for g in plan.validation if g.group.startswith(RATE_GROUP)]


def rate_sentence(plan: Plan) -> str:
    """What published decode rates like this setup's say of the plan's absolute numbers (its
    GPU count rests on them): one sentence, or "" where none is published."""
    g = plan.rate_error
    if g is None:
        return ""
    kind = "MoE" if plan.model.moe is not None else "dense"
    signed = 100 * g.median_signed_error
    way = "faster" if signed > 0 else "slower"
    text = (f"Published decode rates of {kind} models on {plan.hardware.vendor} GPUs "
            f"({g.rows} rows of specsim validate) come out {abs(signed):.0f}% {way} than "
            "measured in median")
    if signed >= SIGNIFICANT_SIGNED_PCT:
        return text + ": the GPU count above may be that much too low."
    if signed <= -SIGNIFICANT_SIGNED_PCT:
        return text + ": the GPU count above may be that much too high."
    return text + "."


# A signed median of decode-rate errors from which the answer warns about its GPU count.
SIGNIFICANT_SIGNED_PCT = 10.0


def section_assumptions(plan: Plan, add: Callable[..., None]) -> None:
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
    if rates := rate_rows(plan):
        add("p", "Measured error of the absolute decode rates the GPU count rests on: "
            "published tokens/s and times per output token (plain decoding, and a few with "
            "speculation), by GPU vendor and model kind (`specsim validate`, never fitted on; "
            "positive where specsim predicts faster than measured, a time per token too "
            "short counting as a rate too high):")
        add("table", rows=rates, csv="validate-rates.csv")
    cal = [{"profile": slug, "calibration": hw.sources.get("efficiency.pass_overhead_s", "")}
           for slug, hw in plan.calibrated]
    if cal:
        add("p", "Calibration of T(n) against measured kernels (held-out error per op class):")
        add("table", rows=cal, csv="calibration.csv")
    for note in plan.notes:
        add("p", f"Note: {note}")


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

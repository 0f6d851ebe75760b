"""CLI commands for engines and for validating predictions against published measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specsim.cli.common import JsonOpt, app, command_group, echo, emit, to_json, to_table

engines_app = command_group("engines", "Built-in serving engines (host and launch terms).")


@engines_app.command("list")
def engines_list(as_json: JsonOpt = False) -> None:
    """List the built-in engines and their terms (ms, µs per eager launch; quantized GEMM
    rates as fractions of the bf16 rate)."""
    from specsim.specs.engines import load_engine
    from specsim.specs.paths import builtin_names

    rows = []
    for slug in ["roofline", *builtin_names("engines")]:
        e = load_engine(slug)
        rows.append({"engine": slug, "launch": e.launch,
                     "op_host_us": e.op_host_s * 1e6, "per_pass_ms": e.per_pass_s * 1e3,
                     "per_request_us": e.per_request_s * 1e6,
                     "drafter_pass_ms": e.drafter_pass_s * 1e3,
                     "drafter_request_us": e.drafter_request_s * 1e6, "round_ms": e.round_s * 1e3,
                     "fp8_rate": e.weight_dtype_efficiency.get("fp8", 1.0),
                     "int4_rate": e.weight_dtype_efficiency.get("int4", 1.0),
                     "moe_fp8_rate": e.moe_weight_dtype_efficiency.get(
                         "fp8", e.weight_dtype_efficiency.get("fp8", 1.0)),
                     "moe_layer_us": e.moe_layer_s * 1e6,
                     "moe_expert_floor_us": e.moe_expert_floor_s * 1e6,
                     "round_request_us": e.round_request_s * 1e6,
                     "verify_attention_factor": e.verify_attention_factor,
                     "spec_overlap": e.spec_overlap,
                     "fitted_on_rows": len(e.fitted_on)})
    emit(rows, as_json)


def _fitted(engine: Any, term: str, full: bool) -> str:
    """Where a fitted term comes from: its rows by id (all of them in JSON; the first few and
    a count in the table, which `specsim validate` lists with their errors), the engine's
    held-out error, the term's physical range and its values refitted without each source."""
    fit = engine.fits[term]
    ids = list(engine.fitted_on)
    low, high = fit.range
    text = (f"{fit.bound_status()}; range [{low:.4g}, {high:.4g}] "
            f"({fit.range_source})")
    if engine.held_out_error_pct is not None:
        text += (f"; held-out error {engine.held_out_error_pct:g}% (median over the engine's "
                 "rows, `specsim validate`)")
    if fit.held_out is not None:
        text += f"; refitted without each source: {fit.held_out[0]:.4g}-{fit.held_out[1]:.4g}"
    rows = (", ".join(ids) if full or len(ids) <= 4
            else f"{', '.join(ids[:3])}, ... (all in the YAML's fitted.rows and under --json)")
    return f"fitted on {len(ids)} published rows; {text}; rows: {rows}"


@engines_app.command("show")
def engines_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                 as_json: JsonOpt = False) -> None:
    """One engine's terms: the value used, where it comes from (its source, or the fit: rows,
    held-out error, range) and, for a fitted term, the prior it replaced."""
    from specsim.specs.engines import FACTORS, TERMS, load_engine

    e = load_engine(name)
    rows: list[dict[str, Any]] = []
    for term in (*TERMS, *FACTORS):
        fitted = term in e.fits
        rows.append({"term": term, "value": getattr(e, term),
                     "from": "fitted" if fitted else "prior",
                     "prior": e.priors.get(term, 1.0 if term in FACTORS else 0.0)
                     if fitted else None,
                     "source": _fitted(e, term, as_json) if fitted
                     else e.sources.get(term, "")})
    for block in ("weight_dtype_efficiency", "moe_weight_dtype_efficiency"):
        rows += [{"term": f"{block}.{dtype}", "value": rate, "from": "prior", "prior": None,
                  "source": e.sources.get(f"{block}.{dtype}", "")}
                 for dtype, rate in getattr(e, block).items()]
    rows += [{"term": f"kv_dtype_efficiency.{dtype}.hd{width:g}", "value": rate,
              "from": "prior", "prior": None,
              "source": e.sources.get(f"kv_dtype_efficiency.{dtype}.hd{width:g}", "")}
             for dtype, points in e.kv_dtype_efficiency.items() for width, rate in points]
    from specsim.engines import adapters

    runs = next((a for a in adapters() if a.slug == e.base_slug), None)
    vendors = list(runs.vendors) if runs is not None else None
    if as_json:
        echo(to_json({"engine": e.slug, "name": e.name, "version": e.version,
                      "launch": e.launch, "vendors": vendors, "terms": rows}))
        return
    overlap = "on" if e.spec_overlap else "off"
    echo(f"{e.name} {e.version} (launch: {e.launch}; speculative rounds overlap their host "
         f"work: {overlap}); seconds unless named otherwise; value = the one used, prior = the "
         "sourced value a fitted term replaced")
    echo(to_table([{**r, "prior": "" if r["prior"] is None else r["prior"]} for r in rows]))
    echo("kernel efficiency is the GPU's, not the engine's: a datasheet profile's kernels run "
         "at the transferred efficiency (specsim/specs/transferred.py; `specsim hardware show "
         "transferred/<gpu>`), a calibrated profile at its own fit")
    if runs is not None:
        echo(f"runs on {' and '.join(runs.vendors)} GPUs in specsim: "
             f"{runs.args.rules.get('vendors_source', '')}")


@app.command()
def validate(
    published: Annotated[list[str] | None, typer.Option(
        help="Published file (slug or YAML path); repeat for several (default: all built-in).")]
    = None,
    latency: Annotated[list[str] | None, typer.Option(
        help="Published serving-latency file (slug of workloads/latency/ or YAML path); "
        "repeat for several (default: all built-in; with --published given: none).")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write predicted vs measured (PNG).")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing --plot file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Predict every published row with tau held at its value; errors are held out by source.

    Then the published serving latency (TTFT, TPOT, ITL medians of concurrency benchmarks),
    predicted with the plan's serving model and its latency simulation; never fitted on.
    """
    from specsim.measurement.published import load_published
    from specsim.serving.latency_rows import (
        latency_summary,
        load_latency_rows,
        predict_latency_rows,
    )
    from specsim.specs.outputs import PLOT_SUFFIXES, check_writable

    if plot is not None:
        check_writable(plot, force=force, suffixes=PLOT_SUFFIXES)
    from specsim.measurement.validate import validate as run

    names = latency if latency is not None else (None if published is None else [])
    # every file read and checked before the published rows are predicted (seconds of work)
    loaded = load_latency_rows(names) if names != [] else None
    results = run(load_published(published))
    lat = predict_latency_rows(*loaded) if loaded is not None else []
    lat_rows = [{"id": r.id, "model": r.model, "hardware": r.hardware, "engine": r.engine,
                 "tp": r.tp, "concurrency": r.concurrency, "metric": r.metric,
                 "measured": r.measured, "predicted": r.predicted, "error %": r.error_pct}
                for r in lat]
    lat_summary = [{"metric": k, "rows": sum(r.metric == k for r in lat),
                    "median abs error %": v} for k, v in latency_summary(lat).items()]
    rows = [_row(v) for v in results if v.predicted is not None]
    skipped = [{"id": v.row.id, "reason": v.reason} for v in results if v.predicted is None]
    summary = _summary(results)
    if as_json:
        echo(to_json({"rows": rows, "not_predicted": skipped, "summary": summary,
                      "latency": lat_rows, "latency_summary": lat_summary}))
    else:
        echo("engine: each row's own (published `engine`); tau held at the published value; "
             "fitted engine terms refitted on the other sources (held out); metric: what the "
             "row measured (a speedup, a speedup over another setting or over the sweep's "
             "first batch, tokens/s or time per output token, with or without speculation); "
             "error_pct: predicted / measured - 1")
        echo(to_table(rows))
        echo("\nmedian_signed_error_pct: in the direction of speed, positive where specsim "
             "predicts faster than measured (a time per token too short counts as a rate too "
             "high)")
        echo(to_table(summary))
        wrong = [r for r in rows if r["wrong_sign"]]
        echo(f"\nwrong sign ({len(wrong)}): " + ("; ".join(
            f"{r['id']} measured {r['measured']:g}x, predicted {r['predicted']:g}x"
            for r in wrong) or "none"))
        echo(f"\nnot predicted ({len(skipped)}):")
        echo(to_table(skipped))
        if lat_rows:
            echo("\nserving latency (workloads/latency/: concurrency benchmarks of plain "
                 "decoding, medians in ms; the plan's serving model and latency simulation, "
                 "never fitted; TTFT leaves out the request path outside the GPU: HTTP, "
                 "tokenization, detokenization):")
            echo(to_table(lat_rows))
            echo("\n" + to_table(lat_summary))
    if plot is not None:
        from specsim.measurement.validate_summary import error_summary
        from specsim.present.plots import validation_figure

        medians = {g.group: 100 * g.median_abs_error
                   for g in error_summary(results, keys=("panel",))}
        validation_figure(rows, medians, plot)
        if not as_json:
            echo(f"\nwrote {plot}")


def _row(v: Any) -> dict[str, Any]:
    per_tau = (round(float(v.predicted) / float(v.row.tau), 3)
               if v.metric == "speedup" and v.row.tau else None)
    return {"id": v.row.id, "engine": v.row.engine, "gpu": v.row.hardware,
            "model": v.row.model, "family": v.group, "batch": v.row.batch, "tau": v.row.tau,
            "metric": v.metric, "measured": v.measured,
            "predicted": round(float(v.predicted), 3),
            "error_pct": round(100 * float(v.error), 1), "speedup_per_tau": per_tau,
            "held_out": v.held_out, "wrong_sign": v.wrong_sign}


def _summary(results: list[Any]) -> list[dict[str, Any]]:
    """`validate`'s summary table: the library's errors per group, in percent, 0.1 apart."""
    from specsim.measurement.validate_summary import error_summary

    return [{"group": g.group, "rows": g.rows,
             "median_abs_error_pct": round(100 * g.median_abs_error, 1),
             "median_signed_error_pct": round(100 * g.median_signed_error, 1),
             "wrong_sign": g.wrong_sign} for g in error_summary(results)]

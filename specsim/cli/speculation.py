"""CLI commands of the speculation engine: drafters, speedup, recommend, acceptance fit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specsim.cli.common import (
    DEFAULT_HARDWARE,
    HardwareOpt,
    JsonOpt,
    TpOpt,
    app,
    command_group,
    echo,
    emit,
    parse_ints,
    to_json,
    to_table,
)
from specsim.errors import SpecError

drafters_app = command_group("drafters",
                             "Built-in drafter specs (architecture numbers with sources).")
acceptance_app = command_group("acceptance", "Acceptance profiles measured on a running engine.")

DEFAULT_DRAFTER = "dflash-qwen3-8b"
TREE_NODES = "0,1,2,3,4,6,8,12,16,24,32,48,64,96,128,192,256,384,512,768,1024"

ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", help="Target model (default: the drafter's target).")]
DrafterOpt = Annotated[str | None, typer.Option(
    "--drafter", "-d", help="Drafter spec: a built-in slug (`specsim drafters list`) or a YAML "
    "path. Its architecture sets the drafting cost; its published acceptance is the default.")]
AlphaOpt = Annotated[float | None, typer.Option(
    help="Constant acceptance per position (trees: a_j = alpha (1 - alpha)^j).")]
WorkloadOpt = Annotated[str | None, typer.Option(
    help="Workload (slug or YAML) giving the context and the acceptance profile.")]
ContextOpt = Annotated[str | None, typer.Option(
    help="Cached tokens per request, or a mix the batch spreads over evenly (e.g. 1024,32768); "
    "default: the workload's, else 2048.")]
DraftCostOpt = Annotated[float | None, typer.Option(
    help="Measured drafter cost per sequential pass, relative to one decoding step at the same "
    "batch size (overrides the cost derived from the drafter's architecture).")]
BatchOpt = Annotated[str, typer.Option(help="Batch sizes (concurrent requests).")]
DEFAULT_ENGINE = "roofline"
EngineOpt = Annotated[str, typer.Option(
    help="Serving engine whose host and launch terms the round pays (`specsim engines list`: "
    "hf-eager, vllm, sglang); default roofline = the idealized GPU with no engine.")]


@drafters_app.command("list")
def drafters_list(as_json: JsonOpt = False) -> None:
    """List the built-in drafters with their family, target and size."""
    from specsim.specs.drafters import load_drafter
    from specsim.specs.io import builtin_names

    rows = []
    for slug in builtin_names("drafters"):
        d = load_drafter(slug)
        rows.append({"drafter": slug, "family": d.family, "target": d.target.slug,
                     "parallel": d.is_parallel, "layers": d.layers,
                     "params_B": d.params() / 1e9, "draft_limit": d.draft_limit,
                     "published_alpha": _published_alpha(d)})
    emit(rows, as_json)


def _published_alpha(d: Any) -> str:
    return "" if d.acceptance is None else f"{d.acceptance.position_alphas[0]:.3f}"


@drafters_app.command("show")
def drafters_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                  as_json: JsonOpt = False) -> None:
    """Show one drafter: architecture, own cache, weights, and where the numbers come from."""
    from specsim.present.render import key_values
    from specsim.specs.drafters import load_drafter

    d = load_drafter(name)
    source = next(iter(d.sources.values()), "")
    rows = [{"field": k, "value": getattr(d, k), "source": source} for k in (
        "family", "layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
        "intermediate_size", "vocab_size", "own_lm_head", "fused_target_layers", "block_size",
        "markov_rank", "edit_passes", "medusa_heads", "attention_window")]
    cache = d.cache_layout()
    per_token = float(cache.bytes_per_request(2.0) - cache.bytes_per_request(1.0))
    rows += [
        {"field": "target", "value": d.target.slug, "source": d.target.path},
        {"field": "params_B", "value": d.params() / 1e9, "source": "derived"},
        {"field": "cache_bytes_per_token", "value": per_token, "source": "derived (bf16)"},
    ]
    if d.acceptance is not None:
        rows.append({"field": "alpha", "value": d.acceptance.position_alphas[0],
                     "source": d.acceptance.source})
    if as_json:
        echo(to_json(rows))
        return
    echo(key_values([(r["field"], r["value"], r["source"]) for r in rows], title=name))


def _setup(hardware: str, model: str | None, drafter: str | None, alpha: float | None,
           workload: str | None, context: str | None, tp: int, draft_cost: float | None,
           engine: str = DEFAULT_ENGINE) -> tuple[Any, Any]:
    """Load the specs and the acceptance profile a speculation command needs."""
    from specsim.specs.drafters import load_drafter
    from specsim.specs.engines import load_engine
    from specsim.specs.hardware import load_hardware
    from specsim.specs.models import load_model
    from specsim.specs.workloads import constant_profile, load_workload
    from specsim.speculation.speedup import Setup

    if alpha is not None and workload is not None:
        raise SpecError("give --alpha or --workload, not both")
    target = load_model(model) if model else None
    draft = load_drafter(drafter, target=target) if drafter else None
    if target is None:
        target = draft.target if draft else load_model("llama-3.1-8b")
    load = load_workload(workload) if workload else None
    if alpha is not None:
        profile = constant_profile(alpha)
    elif load is not None:
        profile = load.acceptance
    elif draft is not None and draft.acceptance is not None:
        profile = draft.acceptance
    else:
        raise SpecError("no acceptance: give --alpha A or --workload W (this drafter has no "
                        "published acceptance)")
    if context is not None:
        mix = tuple(float(c) for c in parse_ints(context, "--context"))
        ctx: float | tuple[float, ...] = mix[0] if len(mix) == 1 else mix
    else:
        ctx = load.context if load else 2048.0
    served = load_engine(engine)
    setup = Setup(target=target, hardware=load_hardware(hardware), drafter=draft, context=ctx,
                  tp=tp, draft_cost=draft_cost, engine=None if served.launch == "none" else served)
    return setup, profile


@app.command()
def speedup(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: ModelOpt = None,
    drafter: DrafterOpt = None,
    alpha: AlphaOpt = None,
    workload: WorkloadOpt = None,
    draft_cost: DraftCostOpt = None,
    context: ContextOpt = None,
    batch: BatchOpt = "1,8,32,128",
    nodes: Annotated[str, typer.Option(help="Drafted nodes per request to tabulate.")]
    = TREE_NODES,
    shape: Annotated[str, typer.Option(help="tree (best-first) or chain.")] = "tree",
    tp: TpOpt = 1,
    plot: Annotated[Path | None, typer.Option(help="Write the speedup-vs-nodes figure (PNG).")]
    = None,
    engine: EngineOpt = DEFAULT_ENGINE,
    as_json: JsonOpt = False,
) -> None:
    """speedup(N, B) of trees or chains of N drafted nodes at batch sizes B."""
    from specsim.speculation.speedup import candidates_for, speedup_table

    setup, profile = _setup(hardware, model, drafter, alpha, workload, context, tp, draft_cost,
                            engine)
    wanted = parse_ints(nodes, "--nodes")
    cands = candidates_for(setup.drafter, profile, shape=shape, max_nodes=max(wanted))
    table = speedup_table(setup, parse_ints(batch, "--batch"), cands)
    if plot is not None:
        from specsim.present.plots import speedup_figure

        who = setup.drafter.slug if setup.drafter else f"draft cost {setup.draft_cost}"
        speedup_figure(table, plot, title=f"{setup.target.name} on {setup.hardware.name}, "
                       f"{who}, context {_context_text(setup.context)}")
    if not as_json:
        echo(f"engine: {engine}")
    emit(_speedup_rows(table, set(wanted)), as_json)
    if plot is not None and not as_json:
        echo(f"\nwrote {plot}")


def _context_text(context: float | tuple[float, ...]) -> str:
    values = context if isinstance(context, tuple) else (context,)
    return " + ".join(f"{c:,.0f}" for c in values)


def _speedup_rows(table: Any, wanted: set[int]) -> list[dict[str, Any]]:
    """Best candidate (over depth caps) for each requested N, per batch size."""
    import numpy as np

    c = table.candidates
    rows = []
    for i, b in enumerate(table.batch):
        for n in sorted(wanted):
            mask = c.nodes == n
            if not mask.any():
                continue
            k = int(np.flatnonzero(mask)[np.argmax(table.speedup[i][mask])])
            rows.append({"batch": int(b), "nodes": n, "depth": int(c.depth[k]),
                         "tau": float(c.tau[k]), "round_ms": float(table.round_s[i, k] * 1e3),
                         "speedup": float(table.speedup[i, k]),
                         "tokens_per_s_per_user": float(table.tokens_per_s_per_user[i, k]),
                         "throughput": float(table.throughput[i, k]),
                         "fits": bool(table.fits[i])})
    return rows


@app.command()
def recommend(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: ModelOpt = None,
    drafter: Annotated[str, typer.Option(
        "--drafter", "-d", help="Drafter spec (slug or YAML).")] = DEFAULT_DRAFTER,
    alpha: AlphaOpt = None,
    workload: WorkloadOpt = None,
    draft_cost: DraftCostOpt = None,
    context: ContextOpt = None,
    batch: BatchOpt = "1,2,4,8,16,32,64,128,256",
    max_nodes: Annotated[int, typer.Option(help="Largest tree (drafted nodes) to consider.")]
    = 64,
    shape: Annotated[str, typer.Option(help="auto, chain or tree.")] = "auto",
    objective: Annotated[str, typer.Option(help="speedup or throughput.")] = "speedup",
    tp: TpOpt = 1,
    engine: EngineOpt = DEFAULT_ENGINE,
    as_json: JsonOpt = False,
) -> None:
    """The best chain or tree per batch size, with ready-to-paste vLLM and SGLang flags."""
    from specsim.speculation.recommend import SGLANG_ALGORITHMS, vllm_flag
    from specsim.speculation.recommend import recommend as best_settings

    if shape not in ("auto", "chain", "tree"):
        raise SpecError(f"option --shape: must be auto, chain or tree, got {shape!r}")
    if max_nodes < 1:
        raise SpecError("option --max-nodes: must be >= 1")
    setup, profile = _setup(hardware, model, drafter, alpha, workload, context, tp, draft_cost,
                            engine)
    rec = best_settings(setup, profile, parse_ints(batch, "--batch"), max_nodes=max_nodes,
                        shape=shape, objective=objective)
    algorithm = SGLANG_ALGORITHMS.get(setup.drafter.family) if setup.drafter else None
    rows = [{"batch": c.batch, "shape": c.shape, "nodes": c.nodes, "depth": c.depth,
             "tau": c.tau, "speedup": c.speedup,
             "tokens_per_s_per_user": c.tokens_per_s_per_user, "throughput": c.throughput,
             "fits": c.fits,
             "engine_flags": (f"--speculative-algorithm {algorithm} {c.sglang_flags}"
                              if algorithm and c.nodes else c.sglang_flags if c.nodes
                              else "(no speculation)")}
            for c in rec.best]
    vllm = rec.vllm_config(setup.drafter)
    if as_json:
        echo(to_json({"rows": rows, "vllm_speculative_config": vllm,
                      "acceptance_source": profile.source, "engine": engine}))
        return
    echo(f"engine: {engine}")
    echo(to_table(rows))
    echo(f"\nvLLM (chains only): {vllm_flag(vllm)}")
    if algorithm is None:
        echo("SGLang has no speculative algorithm for this drafter family; "
             "the flags above give the tree shape.")
    echo(f"acceptance: {profile.source}")
    unfit = [c.batch for c in rec.best if not c.fits]
    if unfit:
        echo(f"does not fit in memory at batch {', '.join(map(str, unfit))} "
             f"(context {_context_text(setup.context)}, TP {setup.tp})")


@acceptance_app.command("fit")
def acceptance_fit(
    metrics: Annotated[Path, typer.Argument(
        help="A saved vLLM /metrics page, or a vLLM log with 'SpecDecoding metrics' lines.")],
    out: Annotated[Path, typer.Option(help="Workload YAML to write.")],
    name: Annotated[str | None, typer.Option(help="Workload name.")] = None,
    context: Annotated[int, typer.Option(help="Cached tokens per request of this workload.")]
    = 2048,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
) -> None:
    """Per-position conditional acceptance from vLLM's counters, as a workload profile."""
    from specsim.measurement.vllm_metrics import parse_prometheus_metrics, parse_vllm_log
    from specsim.specs.io import write_yaml
    from specsim.specs.workloads import workload_to_yaml

    if out.exists() and not force:
        raise SpecError(f"{out}: exists; pass --force to overwrite")
    try:
        text = metrics.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise SpecError(f"{metrics}: cannot read ({err.strerror})") from None
    parse = parse_prometheus_metrics if "spec_decode_num_drafts" in text else parse_vllm_log
    counts = parse(text, str(metrics))
    profile = counts.to_profile()
    write_yaml(out, workload_to_yaml(name or metrics.stem, profile, context=context,
                                     counts_source=f"vLLM counters in {metrics}"), force=force)
    rows = [{"position": i + 1, "alpha": float(a), "reached": float(m)}
            for i, (a, m) in enumerate(zip(counts.conditional_alphas, counts.marginal_rates,
                                           strict=True))]
    echo(to_table(rows))
    echo(f"\ndrafts: {counts.num_drafts:,.0f}; tokens per round: "
         f"{counts.mean_acceptance_length:.3f}; wrote {out}")

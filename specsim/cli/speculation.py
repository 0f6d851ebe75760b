"""CLI commands of the speculation engine: drafters, speedup, recommend, acceptance fit."""

from pathlib import Path
from typing import Annotated, Any

import typer

from specsim.cli.common import (
    DEFAULT_HARDWARE,
    ComputeDtypeOpt,
    ContextOpt,
    DrafterOpt,
    EngineOpt,
    EpOpt,
    HardwareOpt,
    JsonOpt,
    KvDtypeOpt,
    TpOpt,
    WeightDtypeOpt,
    app,
    command_group,
    context_tokens,
    echo,
    emit,
    parse_context,
    parse_ints,
    precision,
    to_json,
    to_table,
)
from specsim.specs.defaults import DEFAULT_ENGINE, MAX_TREE_NODES

drafters_app = command_group("drafters",
                             "Built-in drafter specs (architecture numbers with sources).")
acceptance_app = command_group("acceptance", "Acceptance profiles measured on a running engine.")

TREE_NODES = "0,1,2,3,4,6,8,12,16,24,32,48,64,96,128,192,256,384,512,768,1024"

ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", help="Target model (default: the drafter's target).")]
AlphaOpt = Annotated[float | None, typer.Option(
    help="Constant acceptance per position (trees: a_j = alpha (1 - alpha)^j).")]
WorkloadOpt = Annotated[str | None, typer.Option(
    help="Workload (slug or YAML) giving the context and the acceptance profile.")]
DraftCostOpt = Annotated[float | None, typer.Option(
    help="Measured drafter cost per sequential pass, relative to one decoding step at the same "
    "batch size (overrides the cost derived from the drafter's architecture).")]
BatchOpt = Annotated[str, typer.Option(help="Batch sizes (concurrent requests).")]
ShapeOpt = Annotated[str, typer.Option(
    help="chain, tree (best-first), or auto (trees when the acceptance has per-rank data).")]


@drafters_app.command("list")
def drafters_list(as_json: JsonOpt = False) -> None:
    """List the built-in drafters with their family, target and size."""
    from specsim.present.rows import drafter_summary
    from specsim.specs.drafters import load_drafter
    from specsim.specs.paths import builtin_names

    drafters = [load_drafter(slug) for slug in builtin_names("drafters")]
    emit([drafter_summary(d, d.params()) for d in drafters], as_json)


@drafters_app.command("show")
def drafters_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                  as_json: JsonOpt = False) -> None:
    """Show one drafter: architecture, own cache, weights, and where the numbers come from."""
    from specsim.present.render import key_values
    from specsim.present.rows import drafter_rows
    from specsim.specs.drafters import load_drafter

    d = load_drafter(name)
    rows = drafter_rows(d, d.params(), d.cache_layout().bytes_per_token)
    if as_json:
        echo(to_json(rows))
        return
    echo(key_values([(r["field"], r["value"], r["source"]) for r in rows], title=name))


def _setup(hardware: str, model: str | None, drafter: str | None, alpha: float | None,
           workload: str | None, context: str | None, tp: int, draft_cost: float | None,
           dtypes: tuple[str, str, str], engine: str = DEFAULT_ENGINE, ep: int = 1
           ) -> tuple[Any, Any]:
    """The library's setup and acceptance profile from the options they share."""
    from specsim.speculation.setup import load_setup

    return load_setup(hardware=hardware, model=model, drafter=drafter, alpha=alpha,
                      workload=workload, context=parse_context(context), tp=tp,
                      draft_cost=draft_cost, precision=precision(*dtypes),
                      engine=engine, ep=ep)


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
    shape: ShapeOpt = "tree",
    tp: TpOpt = 1,
    ep: EpOpt = 1,
    weight_dtype: WeightDtypeOpt = "",
    kv_dtype: KvDtypeOpt = "bf16",
    compute_dtype: ComputeDtypeOpt = "bf16",
    plot: Annotated[Path | None, typer.Option(
        help="Write the speedup-vs-nodes figure (.png, .pdf or .svg).")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing plot file.")] = False,
    engine: EngineOpt = DEFAULT_ENGINE,
    as_json: JsonOpt = False,
) -> None:
    """speedup(N, B) of trees or chains of N drafted nodes at batch sizes B."""
    from specsim.present.render import setup_line
    from specsim.present.rows import speedup_rows
    from specsim.specs.outputs import PLOT_SUFFIXES, check_writable
    from specsim.speculation.speedup import best_per_nodes, speedup_sweep

    if plot is not None:
        check_writable(plot, force=force, suffixes=PLOT_SUFFIXES)
    setup, profile = _setup(hardware, model, drafter, alpha, workload, context, tp, draft_cost,
                            (weight_dtype, kv_dtype, compute_dtype), engine, ep)
    wanted, batches = parse_ints(nodes, "--nodes"), parse_ints(batch, "--batch")
    table = speedup_sweep(setup, profile, batches, wanted, shape=shape)
    header = setup_line(setup, profile.source, engine=engine)
    if plot is not None:
        from specsim.present.plots import speedup_figure
        from specsim.speculation.speedup import speedup_curves

        speedup_figure(speedup_curves(table), plot, title=_plot_title(setup, profile, shape))
    rows = speedup_rows(best_per_nodes(table, wanted))
    if as_json:
        echo(to_json({"setup": header, "rows": rows}))
        return
    echo(header)
    echo(to_table(rows))
    if plot is not None:
        echo(f"\nwrote {plot}")


def _plot_title(setup: Any, profile: Any, shape: str) -> str:
    """Model, GPU, drafter, context, TP, acceptance and shape, on two lines."""
    from specsim.present.render import context_text

    who = setup.drafter.slug if setup.drafter else f"draft cost {setup.draft_cost:g}"
    alphas = profile.position_alphas
    alpha = f"alpha {alphas[0]:.2f}" if len(alphas) == 1 else \
        f"alpha {alphas[0]:.2f}..{alphas[-1]:.2f} by position"
    return (f"{setup.target.name} on {setup.hardware.name}, TP {setup.tp}\n"
            f"{who}, {alpha}, {shape}s, context {context_text(setup.context)} tokens")


@app.command()
def recommend(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: ModelOpt = None,
    drafter: DrafterOpt = None,
    alpha: AlphaOpt = None,
    workload: WorkloadOpt = None,
    ranks: Annotated[Path | None, typer.Option(
        help="Measured per-rank acceptance a_j: JSON, CSV or YAML list, or Sequoia's "
        "acceptance-vector format (tensor([...])).")] = None,
    draft_cost: DraftCostOpt = None,
    context: ContextOpt = None,
    batch: BatchOpt = "1,2,4,8,16,32,64,128,256",
    max_nodes: Annotated[int, typer.Option(
        help=f"Largest tree (drafted nodes) to consider, at most {MAX_TREE_NODES:,}.")] = 64,
    max_depth: Annotated[int | None, typer.Option(
        help="Deepest chain or tree to consider (draft passes).")] = None,
    shape: ShapeOpt = "auto",
    min_user_rate: Annotated[float, typer.Option(
        "--min-tokens-per-s-per-user", help="Per-user speed floor for the serving batch size: "
        "the line under the table names the batch with the highest throughput that keeps every "
        "user at or above it.")] = 0.0,
    tp: TpOpt = 1,
    ep: EpOpt = 1,
    weight_dtype: WeightDtypeOpt = "",
    kv_dtype: KvDtypeOpt = "bf16",
    compute_dtype: ComputeDtypeOpt = "bf16",
    engine: EngineOpt = DEFAULT_ENGINE,
    tree_out: Annotated[Path | None, typer.Option(
        help="Write the recommended trees to this .json file (parent, depth, rank of every "
             "node, tau).")]
    = None,
    configs_out: Annotated[Path | None, typer.Option(
        help="Write the files the engine commands read (TensorRT-LLM's extra-options YAML) "
             "into this folder, so the commands run as printed from it.")] = None,
    force: Annotated[bool, typer.Option(
        help="Overwrite an existing --tree-out file or --configs-out file.")] = False,
    round_structure: Annotated[str, typer.Option(
        help="Round structures to compare with the single round: all (default), single (none), "
        "or one of multistage, overlap, adaptive-stop (refused where --engine does not run "
        "it).")] = "all",
    stage_acceptance: Annotated[float, typer.Option(
        help="Multi-stage drafting: factor on each further stage's acceptance (1: as good as "
        "the first, the bound).")] = 1.0,
    overlap_device: Annotated[str, typer.Option(
        help="Overlapped drafting: the drafter on the target's GPU (same) or its own "
        "(separate).")] = "same",
    head_concentration: Annotated[float, typer.Option(
        help="Adaptive stop: Beta concentration of the acceptance head's per-token "
        "predictions (0: a head that knows each outcome, the bound; default: SpecDec++'s, "
        "fitted to its published gain).")] = 2.1,
    as_json: JsonOpt = False,
) -> None:
    """The best chain or tree per batch size, and per engine a command that runs it."""
    from specsim.engines import adapter, vllm
    from specsim.present.render import context_text, setup_line
    from specsim.present.round_structures import structure_lines, structure_rows
    from specsim.present.rows import recommend_rows, serving_text
    from specsim.specs.outputs import check_files_folder, check_writable
    from specsim.speculation.recommend import (
        engine_cells,
        engine_commands,
        requested_structures,
        serving_batch,
    )
    from specsim.speculation.recommend import recommend as best_settings
    from specsim.speculation.round_structures import StructureOptions
    from specsim.speculation.setup import load_setup

    if tree_out is not None:
        check_writable(tree_out, force=force, suffixes=(".json",))
    if configs_out is not None:
        check_files_folder(configs_out, option="--configs-out")
    setup, profile = load_setup(
        hardware=hardware, model=model, drafter=drafter, alpha=alpha, workload=workload,
        ranks=str(ranks) if ranks else None, context=parse_context(context), tp=tp,
        draft_cost=draft_cost, precision=precision(weight_dtype, kv_dtype, compute_dtype),
        engine=engine, ep=ep)
    structures = requested_structures(round_structure, setup.engine)
    options = StructureOptions(stage_acceptance=stage_acceptance, device=overlap_device,
                               head_concentration=head_concentration)
    rec = best_settings(setup, profile, parse_ints(batch, "--batch"), max_nodes=max_nodes,
                        shape=shape, max_depth=max_depth, round_structures=structures,
                        structure_options=options)
    commands = engine_commands(rec, setup)
    written = _write_configs(commands, configs_out, force=force) if configs_out else []
    rows = recommend_rows(rec, engine_cells(rec, setup.drafter, setup.hardware.vendor))
    bound = [{"batch": b.batch, "tau": b.tau, "speedup": b.speedup, "nodes": b.nodes,
              "depth": b.depth} for b in rec.bound] if rec.bound else None
    serving = serving_batch(rec.best, min_user_rate)
    header = setup_line(setup, profile.source, engine=engine)
    if tree_out is not None:
        from specsim.engines.sglang import flags_per_row
        from specsim.present.trees import tree_document
        from specsim.specs.outputs import atomic_write
        from specsim.speculation.recommend import chosen_trees, optimum_tree

        depth = max_nodes if max_depth is None else max_depth
        document = tree_document(
            rec, chosen_trees(rec, profile, setup.drafter), flags_per_row(rec, setup.drafter),
            optimum_tree(profile, max_nodes, depth), source=profile.source,
            max_nodes=max_nodes, max_depth=depth)
        atomic_write(tree_out, lambda handle: handle.write(to_json(document) + "\n"))
    if as_json:
        echo(to_json({"setup": header, "rows": rows, "bound_any_tree": bound,
                      "commands": [{"engine": c.engine, "version": c.version,
                                    "command": c.command,
                                    "argv": list(c.argv) if c.argv else None,
                                    "reason": c.reason,
                                    "batches": list(c.batches),
                                    "node_rank": c.node[0] if c.node else None,
                                    "nodes": c.node[1] if c.node else None,
                                    "files": [{"name": n, "text": t} for n, t in c.files],
                                    "files_written": [str(configs_out / n) for n, _ in c.files]
                                    if configs_out else []}
                                   for c in commands],
                      "vllm_speculative_config": vllm.speculative_config(rec, setup.drafter),
                      "serving_batch": serving.batch if serving else None,
                      "notes": list(rec.notes), "acceptance_source": profile.source,
                      "engine": engine,
                      "round_structures": structure_rows(rec.structures)
                      if rec.structures else None}))
        return
    echo(header)
    echo(to_table(rows))
    echo(serving_text(serving, min_user_rate))
    if bound:
        echo("\nbound, not an engine setting (best tree of any shape): " + ", ".join(
            f"batch {b['batch']} tau {b['tau']:.3f} speedup {b['speedup']:.3f}" for b in bound))
    echo("")
    for c in commands:
        engine_adapter = adapter(c.engine)
        label = engine_adapter.label
        node = f", {c.node_label}" if c.node else ""
        if c.command is None:
            echo(f"{label}: {c.reason}")
        elif not engine_adapter.per_batch_schedule and len(commands) > 1:
            echo(f"{label} ({c.batch_label or 'batch ' + ', '.join(map(str, c.batches))}"
                 f"{node}): {c.command}")
        else:
            echo(f"{label}" + (f" ({c.node_label})" if c.node else "") + f": {c.command}")
        for name, text in c.files:  # the files the command reads, indented beside it
            where = ("written to --configs-out; run the command from there" if configs_out
                     else "as it must be written, or pass --configs-out DIR")
            echo(f"  {name} (the file the command reads, {where}):")
            echo("\n".join(f"    {line}" for line in text.splitlines()))
    for note in rec.notes:
        echo(f"note: {note}")
    from specsim.present.document import without_checkout

    echo(f"acceptance: {without_checkout(profile.source)}")
    unfit = [c.batch for c in rec.best if not c.fits]
    if unfit:
        echo(f"does not fit in memory at batch {', '.join(map(str, unfit))} "
             f"(context {context_text(setup.context)}, TP {setup.tp})")
    if rec.structures:
        echo("")
        for line in structure_lines(rec.structures):
            echo(line)
    if tree_out is not None:
        echo(f"wrote {tree_out}")
    for path in written:
        echo(f"wrote {path}")


def _write_configs(commands: list[Any], folder: Path, *, force: bool) -> list[Path]:
    """Write every file the commands read into `folder` (see outputs.write_files)."""
    from specsim.specs.outputs import write_files

    return write_files(folder, {name: text.encode("utf-8") for c in commands
                                for name, text in c.files}, force=force)


@acceptance_app.command("fit")
def acceptance_fit(
    metrics: Annotated[str, typer.Argument(
        help="A saved vLLM /metrics page, a vLLM log with 'SpecDecoding metrics' lines, a "
             "live endpoint URL (http://host:port/metrics), or an engine benchmark result "
             "(vllm bench serve --save-result JSON, sglang.bench_serving --output-file "
             "JSONL).")],
    out: Annotated[Path, typer.Option(help="Workload YAML to write.")],
    name: Annotated[str | None, typer.Option(help="Workload name.")] = None,
    context: ContextOpt = None,
    run: Annotated[int | None, typer.Option(
        help="Benchmark result: the run to read (1-based, in file order); default: the only "
        "run, or the mean of runs whose tokens per round agree within 1%.")] = None,
    draft_tokens: Annotated[int | None, typer.Option(
        "--draft-tokens", help="Benchmark result: draft tokens per round, needed where the "
        "file gives only tokens per round (SGLang's accept_length).")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Per-position conditional acceptance from vLLM's counters or an engine benchmark
    result, as a workload profile."""
    from specsim.errors import SpecError
    from specsim.measurement.bench_acceptance import is_bench_result
    from specsim.measurement.vllm_metrics import is_url
    from specsim.specs.outputs import check_writable

    check_writable(out, force=force, suffixes=(".yaml", ".yml"), reads=(Path(metrics),))
    if not is_url(metrics) and is_bench_result(Path(metrics)):
        _fit_bench(metrics, out, name=name, context=context, run=run,
                   draft_tokens=draft_tokens, force=force, as_json=as_json)
        return
    for option, value in (("--run", run), ("--draft-tokens", draft_tokens)):
        if value is not None:
            raise SpecError(f"option {option}: only for an engine benchmark result (JSON); "
                            f"{metrics} is read as vLLM counters")
    from specsim.measurement.vllm_metrics import metrics_name, read_counts
    from specsim.present.rows import acceptance_rows
    from specsim.specs.outputs import write_yaml
    from specsim.specs.workloads import workload_to_yaml

    counts = read_counts(metrics)
    document = workload_to_yaml(name or metrics_name(metrics), counts.to_profile(),
                                context=context_tokens(context),
                                counts_source=f"vLLM counters in {metrics}")
    write_yaml(out, document, force=force)
    rows = acceptance_rows(counts)
    if as_json:
        echo(to_json({"rows": rows, "drafts": counts.num_drafts,
                      "tokens_per_round": counts.mean_acceptance_length, "out": str(out)}))
        return
    echo(to_table(rows))
    echo(f"\ndrafts: {counts.num_drafts:,.0f}; tokens per round: "
         f"{counts.mean_acceptance_length:.3f}; wrote {out}")


def _fit_bench(path: str, out: Path, *, name: str | None, context: str | None,
               run: int | None, draft_tokens: int | None, force: bool,
               as_json: bool) -> None:
    """`acceptance fit` on an engine benchmark result: per-position alphas, or tau + gamma."""
    from specsim.measurement.bench_acceptance import read_bench_acceptance
    from specsim.present.rows import acceptance_rows
    from specsim.specs.outputs import write_yaml
    from specsim.specs.workloads import workload_to_yaml

    measured = read_bench_acceptance(path, run=run, draft_tokens=draft_tokens)
    profile = measured.profile
    document = workload_to_yaml(name or Path(path).stem, profile,
                                context=context_tokens(context), counts_source=measured.source)
    if measured.counts is None:  # the mean as measured; the workload derives its alpha
        document["acceptance"] = {"tau": round(measured.tokens_per_round, 6),
                                  "gamma": measured.draft_tokens, "source": measured.source}
    write_yaml(out, document, force=force)
    rows = acceptance_rows(measured.counts) if measured.counts is not None else []
    if as_json:
        echo(to_json({"rows": rows, "drafts": measured.num_drafts,
                      "tokens_per_round": measured.tokens_per_round,
                      "draft_tokens": measured.draft_tokens,
                      "alpha": None if rows else profile.position_alphas[0],
                      "source": measured.source, "out": str(out)}))
        return
    if rows:
        echo(to_table(rows))
        echo("")
    else:
        echo(f"alpha {profile.position_alphas[0]:.3f} at every position: the constant that "
             f"gives {measured.tokens_per_round:.3f} tokens per round over "
             f"{measured.draft_tokens} draft tokens (no per-position rates in the file)")
    from specsim.present.document import without_checkout

    echo(f"acceptance: {without_checkout(measured.source)}")
    echo(f"tokens per round: {measured.tokens_per_round:.3f}; wrote {out}")

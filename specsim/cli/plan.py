"""`specsim plan`: the capacity-planning report (report.md, report.html, PNG plots, CSV)."""

from pathlib import Path
from typing import Annotated

import typer

from specsim.cli.common import (
    DEFAULT_ENGINE,
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    EngineOpt,
    HardwareOpt,
    KvDtypeOpt,
    WeightDtypeOpt,
    app,
    echo,
    precision,
)


@app.command()
def plan(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: Annotated[str, typer.Option(
        "--model", "-m", help="Target model (slug or YAML).")] = DEFAULT_MODEL,
    drafter: Annotated[list[str] | None, typer.Option(
        "--drafter", "-d", help="Drafter (slug or YAML); repeat for several. Default: the "
        "built-in drafters trained for the model.")] = None,
    engine: EngineOpt = DEFAULT_ENGINE,
    workload: Annotated[str, typer.Option(
        help="Scenario (`specsim workloads list`: chat, code, math, long-context, agentic) "
        "or a workload YAML, e.g. one written by `specsim acceptance fit`.")] = "chat",
    acceptance: Annotated[Path | None, typer.Option(
        help="A workload YAML whose acceptance replaces every drafter's (e.g. the output of "
        "`specsim acceptance fit`).")] = None,
    min_tokens_per_s_per_user: Annotated[float | None, typer.Option(
        help="SLO: output tokens/s each user must see (default 30).")] = None,
    target_throughput: Annotated[float | None, typer.Option(
        help="Demand: output tokens/s the whole service must deliver.")] = None,
    users: Annotated[float | None, typer.Option(
        help="Demand: concurrent users, each served at the SLO (default 1,000 when no demand "
        "is given).")] = None,
    requests_per_s: Annotated[float | None, typer.Option(
        help="Demand: requests per second, with the workload's prompt and output lengths.")
    ] = None,
    tp: Annotated[int | None, typer.Option(
        "--tp", help="Pin the tensor-parallel degree (default: try 1, 2, 4 and 8, and for a "
        "model that fits no single node, layouts over 2 and 4 nodes).")] = None,
    ep: Annotated[int | None, typer.Option(
        "--ep", help="Pin the expert-parallel degree of a MoE target: its routed experts "
        "spread over EP GPUs, EP / TP data-parallel TP groups (default: 1, and for a model that "
        "fits no single node, expert-parallel layouts over 2 and 4 nodes as well).")] = None,
    weight_dtype: WeightDtypeOpt = "",
    kv_dtype: KvDtypeOpt = "bf16",
    disaggregate: Annotated[bool, typer.Option(
        help="Also plan prefill/decode disaggregation: a prefill pool for the prompts, a "
        "decode pool (with the drafter) for the tokens, the KV cache sent between them over "
        "the network.")] = False,
    max_ttft_p90_ms: Annotated[float | None, typer.Option(
        help="SLO: time to first token at p90, ms (prefill, queueing and the first round).")
    ] = None,
    max_itl_p99_ms: Annotated[float | None, typer.Option(
        help="SLO: p99 gap between streamed chunks, ms (one chunk per round).")] = None,
    out: Annotated[Path, typer.Option(help="Report folder.")] = Path("specsim-report"),
    force: Annotated[bool, typer.Option(
        help="Replace an existing report folder whole (its old files go).")] = False,
) -> None:
    """Capacity plan: best speculation setting, batch, TP and GPU count for a demand at an SLO.

    Give one demand (--users, --requests-per-s or --target-throughput; default 1,000
    concurrent users) and the SLO (--min-tokens-per-s-per-user, optionally --max-ttft-p90-ms and
    --max-itl-p99-ms); the report answers the GPU count with and without speculation, the
    latency users see (TTFT and inter-token gaps: median, p90, p99) and the engine commands,
    each capped at the batch it was computed for.

    The report folder is written whole: into a hidden folder beside --out, then renamed into
    place; --out may not be a symbolic link (give the folder it points to).
    """
    from specsim.present.report import render_report
    from specsim.present.report_answer import headline
    from specsim.serving.capacity import TP_DEGREES
    from specsim.serving.plan import make_plan
    from specsim.specs.outputs import OutputFolder

    # Checked now, locked for the whole run (a second run into --out fails at once), written
    # last: into a fresh folder beside --out that one rename puts in place.
    folder = OutputFolder(out, force=force)
    profile = None
    if acceptance is not None:
        from specsim.specs.workloads import load_workload

        profile = load_workload(str(acceptance)).acceptance

    def progress(text: str) -> None:
        from specsim.present.render import terminal_text

        typer.echo(terminal_text(text), err=True)

    with folder:
        result = make_plan(hardware=hardware, model=model, drafters=drafter, engine=engine,
                           workload=workload, min_tokens_per_s_per_user=min_tokens_per_s_per_user,
                           target_tokens_per_s=target_throughput, users=users,
                           requests_per_s=requests_per_s, max_ttft_p90_ms=max_ttft_p90_ms,
                           max_itl_p99_ms=max_itl_p99_ms, acceptance=profile,
                           tps=TP_DEGREES if tp is None else (tp,), ep=ep,
                           disaggregate=disaggregate, progress=progress,
                           precision=precision(weight_dtype, kv_dtype))
        progress("writing the report")
        files = folder.publish(render_report(result))
    echo(f"answer: {headline(result)}")
    echo(f"wrote {out / 'report.md'}, {out / 'report.html'} and {len(files) - 2} plots and "
         "tables")

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
    app,
    echo,
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
        help="Output tokens/s the whole service must deliver (sets the GPU count).")] = None,
    out: Annotated[Path, typer.Option(help="Report folder.")] = Path("specsim-report"),
    force: Annotated[bool, typer.Option(
        help="Replace an existing report folder whole (its old files go).")] = False,
) -> None:
    """Capacity plan: best speculation setting, batch, TP and GPU count at an SLO, as a report.

    The report folder is written whole: into a hidden folder beside --out, then renamed into
    place; --out may not be a symbolic link (give the folder it points to).
    """
    from specsim.present.report import render_report
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
                           target_tokens_per_s=target_throughput, acceptance=profile,
                           progress=progress)
        progress("writing the report")
        files = folder.publish(render_report(result))
    echo(f"wrote {out / 'report.md'}, {out / 'report.html'} and {len(files) - 2} plots and "
         "tables")

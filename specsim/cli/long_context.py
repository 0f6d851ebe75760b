"""CLI command `long-context`: speedup against context length and batch, per drafter cache."""

from pathlib import Path
from typing import Annotated

import typer

from specsim.cli.common import (
    DEFAULT_HARDWARE,
    EngineOpt,
    HardwareOpt,
    JsonOpt,
    TpOpt,
    app,
    echo,
    parse_ints,
    to_json,
    to_table,
)
from specsim.specs.defaults import DEFAULT_ENGINE

DEFAULT_CONTEXTS = "1024,4096,16384,32768,65536,131072"


@app.command("long-context")
def long_context(
    drafter: Annotated[list[str], typer.Option(
        help="Drafter (slug or YAML); repeat to compare cache kinds on one target.")],
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Target model (default: the first drafter's target).")] = None,
    context: Annotated[str | None, typer.Option(
        help=f"Cached tokens per request to sweep (default {DEFAULT_CONTEXTS}).")] = None,
    batch: Annotated[str, typer.Option(help="Batch sizes (concurrent requests).")]
    = "1,8,32,128",
    max_gamma: Annotated[int, typer.Option(help="Longest chain to consider.", min=1, max=64)]
    = 8,
    tp: TpOpt = 1,
    plot: Annotated[Path | None, typer.Option(
        help="Write the speedup-vs-context figure (.png, .pdf or .svg).")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing plot file.")] = False,
    engine: EngineOpt = DEFAULT_ENGINE,
    as_json: JsonOpt = False,
) -> None:
    """Best chain's speedup against context and batch for each drafter's cache kind, with the
    drafter's and the target's cache per request."""
    from specsim.present.long_context import context_rows
    from specsim.specs.outputs import PLOT_SUFFIXES, check_writable
    from specsim.speculation.long_context import context_sweep
    from specsim.speculation.setup import load_setup

    if plot is not None:
        check_writable(plot, force=force, suffixes=PLOT_SUFFIXES)
    ctx = parse_ints(DEFAULT_CONTEXTS if context is None else context, "--context")
    batches = parse_ints(batch, "--batch")
    sweeps = []
    target = model
    for name in drafter:
        setup, profile = load_setup(hardware=hardware, model=target, drafter=name, tp=tp,
                                    engine=engine)
        target = target or setup.target.slug
        sweeps.append(context_sweep(setup, profile, ctx, batches, max_gamma=max_gamma))
    if plot is not None:
        from specsim.present.long_context import context_figure

        context_figure(sweeps, plot, title=f"{target} on {hardware}, engine {engine}, TP {tp}")
    rows = [row for sweep in sweeps for row in context_rows(sweep)]
    if as_json:
        echo(to_json(rows))
        return
    echo(to_table(rows))
    if plot is not None:
        echo(f"\nwrote {plot}")

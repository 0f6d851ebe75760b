"""`specsim workloads list|show`: the built-in serving scenarios (lengths and acceptance)."""

from typing import Annotated

import typer

from specsim.cli.common import JsonOpt, command_group, echo, emit, to_json

workloads_app = command_group(
    "workloads", "Built-in workload scenarios: request lengths and acceptance per drafter family.")


@workloads_app.command("list")
def workloads_list(as_json: JsonOpt = False) -> None:
    """List the built-in workloads: prompt and output tokens (median, p90), acceptance."""
    from specsim.present.rows import scenario_summary
    from specsim.serving.scenarios import load_scenario
    from specsim.specs.paths import builtin_names

    emit([scenario_summary(load_scenario(slug)) for slug in builtin_names("scenarios")],
         as_json)


@workloads_app.command("show")
def workloads_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                   as_json: JsonOpt = False) -> None:
    """Show one workload: its length distributions and acceptance profiles, with sources."""
    from specsim.present.render import key_values
    from specsim.present.rows import scenario_rows
    from specsim.serving.scenarios import load_scenario

    rows = scenario_rows(load_scenario(name))
    if as_json:
        echo(to_json(rows))
        return
    echo(key_values([(r["field"], r["value"], r["source"]) for r in rows], title=name))

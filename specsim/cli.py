"""The `specsim` command line: thin commands that parse, call the library, and render.

Heavy libraries (numpy, pandas, matplotlib) are imported inside the commands, so that
`specsim --help` starts fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from specsim.errors import SpecError

app = typer.Typer(
    name="specsim",
    help="Predict how fast speculative decoding of an LLM runs on a GPU, before renting one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def command_group(name: str, help_text: str) -> typer.Typer:
    """A `specsim NAME ...` group of subcommands (list, show, ...)."""
    group = typer.Typer(help=help_text, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group


hardware_app = command_group("hardware", "Built-in GPU profiles (datasheet numbers with sources).")
models_app = command_group("models", "Target model specs (numbers from each config.json).")

DEFAULT_HARDWARE = "h100-sxm"
DEFAULT_MODEL = "llama-3.1-8b"

HardwareOpt = Annotated[str, typer.Option(
    "--hardware", "-H",
    help="GPU profile: a built-in slug (`specsim hardware list`) or a YAML path.")]
ModelOpt = Annotated[str, typer.Option(
    "--model", "-m", help="Target model: a built-in slug (`specsim models list`) or a YAML path.")]
TpOpt = Annotated[int, typer.Option("--tp", help="Tensor-parallel degree (GPUs per replica).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON rows.")]


def echo(text: str) -> None:
    typer.echo(text)


def parse_ints(text: str, option: str) -> list[int]:
    """'1,8,32' or '0-64' or '0-1024:8' (range with step) into a list of ints."""
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part[1:]:
                span, _, step = part.partition(":")
                lo, hi = span.split("-", 1)
                values.extend(range(int(lo), int(hi) + 1, int(step) if step else 1))
            elif part:
                values.append(int(part))
        except ValueError:
            raise SpecError(f"option {option}: cannot read {part!r} (use e.g. 1,8,32 or 0-64)") \
                from None
    if not values or any(v < 0 for v in values):
        raise SpecError(f"option {option}: need one or more non-negative integers, got {text!r}")
    return values


# ----------------------------------------------------------------------------- hardware


@hardware_app.command("list")
def hardware_list(as_json: JsonOpt = False) -> None:
    """List the built-in GPU profiles."""
    from specsim.hardware import load_hardware
    from specsim.loading import builtin_names

    rows = []
    for slug in builtin_names("hardware"):
        hw = load_hardware(slug)
        rows.append({
            "hardware": slug, "name": hw.name, "hbm_GB": hw.hbm_capacity_bytes / 1e9,
            "hbm_TB_per_s": hw.hbm_bandwidth_bytes_per_s / 1e12,
            "bf16_TFLOPS": hw.flops_per_s("bf16") / 1e12, "ops_per_byte": hw.ops_per_byte,
            "calibrated": hw.is_calibrated})
    emit(rows, as_json)


@hardware_app.command("show")
def hardware_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                  as_json: JsonOpt = False) -> None:
    """Show one GPU profile, every number with its source."""
    from specsim.hardware import load_hardware
    from specsim.rows import hardware_rows

    rows = hardware_rows(load_hardware(name))
    if as_json:
        echo(to_json(rows))
        return
    from specsim.render import key_values

    echo(key_values([(r["field"], r["value"], r["source"]) for r in rows], title=name))


# ----------------------------------------------------------------------------- models


@models_app.command("list")
def models_list(as_json: JsonOpt = False) -> None:
    """List the built-in target models with their computed and advertised sizes."""
    from specsim.loading import builtin_names
    from specsim.models import load_model
    from specsim.rows import model_summary

    emit([model_summary(load_model(slug)) for slug in builtin_names("models")], as_json)


@models_app.command("show")
def models_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                as_json: JsonOpt = False) -> None:
    """Show one model spec: architecture numbers, parameter counts, cache per token."""
    from specsim.models import load_model
    from specsim.rows import model_rows

    rows = model_rows(load_model(name))
    if as_json:
        echo(to_json(rows))
        return
    from specsim.render import key_values

    echo(key_values([(r["field"], r["value"], r["source"]) for r in rows], title=name))


@models_app.command("import")
def models_import(
    config: Annotated[Path, typer.Argument(help="A Hugging Face config.json.")],
    name: Annotated[str | None, typer.Option(
        help="Model name (default: the config's folder name).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output YAML (default: ./<slug>.yaml).")] = None,
    source: Annotated[str | None, typer.Option(
        help="Where the config came from (URL); recorded as the source of every number.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
) -> None:
    """Turn a config.json into a model spec YAML that every command accepts."""
    from specsim.hf_import import import_config, read_config
    from specsim.loading import read_spec_file, write_yaml
    from specsim.models import model_from_file

    folder = config.resolve().parent.name
    model_name = name or (folder if config.name == "config.json" and folder else config.stem)
    slug = model_name.lower().replace("/", "-").replace(" ", "-")
    target = out or Path(f"{slug}.yaml")
    if target.exists() and not force:
        raise SpecError(f"{target}: exists; pass --force to overwrite")
    spec = import_config(read_config(config), name=model_name,
                         source=source or f"config.json at {config}", where=str(config))
    write_yaml(target, spec, force=force)
    try:
        model = model_from_file(read_spec_file(target), slug=target.stem)
    except SpecError:
        target.unlink()
        raise
    from specsim.params import total_params

    echo(f"wrote {target}: {model.name}, {total_params(model) / 1e9:.2f}B parameters")


# ----------------------------------------------------------------------------- roofline


@app.command()
def roofline(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: ModelOpt = DEFAULT_MODEL,
    tokens: Annotated[str, typer.Option(
        help="Tokens scored per pass, n (list or range: 1,8,295,1024 or 1-512).")]
    = "1,8,64,128,295,512,1024,4096",
    context: Annotated[int, typer.Option(help="Cached tokens per request.")] = 0,
    queries: Annotated[int, typer.Option(
        help="Tokens per request (1 = decoding; N+1 = verifying N drafted tokens).")] = 1,
    tp: TpOpt = 1,
    weight_dtype: Annotated[str, typer.Option(help="Stored weight dtype (default: model's).")] = "",
    compute_dtype: Annotated[str, typer.Option(help="Tensor-core dtype for peak flops.")] = "bf16",
    by_op: Annotated[bool, typer.Option("--by-op", help="Break the time down by op.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """T(n): forward-pass time versus tokens in the pass, with the bound that holds."""
    from specsim.rows import roofline_op_rows, roofline_rows
    from specsim.work import Precision

    if queries < 1:
        raise SpecError("option --queries: must be >= 1")
    args = _load(hardware, model)
    precision = Precision(weight_dtype=weight_dtype, compute_dtype=compute_dtype)
    n = parse_ints(tokens, "--tokens")
    if by_op:
        rows = roofline_op_rows(*args, n, context=context, queries=queries, tp=tp,
                                precision=precision)
    else:
        rows = roofline_rows(*args, n, context=context, queries=queries, tp=tp,
                             precision=precision)
    emit(rows, as_json)


# ----------------------------------------------------------------------------- memory


@app.command()
def memory(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: ModelOpt = DEFAULT_MODEL,
    context: Annotated[int, typer.Option(help="Tokens per request (prompt + output).")] = 32768,
    requests: Annotated[str, typer.Option(help="Concurrent requests (list or range).")]
    = "1,8,24,64,128",
    drafter: Annotated[str | None, typer.Option(
        help="Drafter spec (slug or YAML) whose own cache and weights are added.")] = None,
    tp: TpOpt = 1,
    memory_fraction: Annotated[float, typer.Option(
        help="Share of HBM the engine may use (vLLM gpu_memory_utilization).")] = 0.9,
    as_json: JsonOpt = False,
) -> None:
    """Weights, KV caches (target and drafter) and max concurrent requests per GPU."""
    from specsim.rows import memory_rows

    hw, target = _load(hardware, model)
    draft = _load_drafter(drafter, target) if drafter else None
    rows, max_requests = memory_rows(hw, target, parse_ints(requests, "--requests"), context,
                                     drafter=draft, tp=tp, memory_fraction=memory_fraction)
    if as_json:
        echo(to_json(rows))
        return
    echo(to_table(rows))
    echo(f"\nmax concurrent requests at {context:,} tokens: {max_requests} "
         f"({memory_fraction:.0%} of {hw.hbm_capacity_bytes / 1e9:g} GB, TP {tp})")


# ----------------------------------------------------------------------------- helpers


def _load(hardware: str, model: str) -> tuple[Any, Any]:
    from specsim.hardware import load_hardware
    from specsim.models import load_model

    return load_hardware(hardware), load_model(model)


def _load_drafter(name: str, target: Any) -> Any:
    from specsim.drafters import load_drafter

    return load_drafter(name, target=target)


def to_table(rows: list[dict[str, Any]]) -> str:
    from specsim import render

    return render.table(rows)


def to_json(rows: Any) -> str:
    from specsim import render

    return render.to_json(rows)


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    echo(to_json(rows) if as_json else to_table(rows))


# Commands of the other families register themselves on `app` when imported.
from specsim import cli_calibration, cli_speculation  # noqa: E402, F401


def main() -> None:
    """Entry point: bad input becomes one line on stderr and a non-zero exit, never a traceback."""
    try:
        code = app(standalone_mode=False)
    except SpecError as err:
        typer.echo(f"specsim: error: {err}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("specsim: interrupted", err=True)
        sys.exit(130)
    except Exception as err:
        # Usage errors of the (vendored) click parser: they know how to phrase themselves.
        format_message = getattr(err, "format_message", None)
        if not callable(format_message):
            raise
        if type(err).__name__ == "NoArgsIsHelpError":  # bare `specsim`: show the help
            typer.echo(format_message())
            sys.exit(0)
        typer.echo(f"specsim: error: {format_message()}", err=True)
        sys.exit(int(getattr(err, "exit_code", 2) or 2))
    sys.exit(code if isinstance(code, int) else 0)

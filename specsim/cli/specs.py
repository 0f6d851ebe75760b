"""`specsim hardware` and `specsim models`: the built-in specs, every number with its source."""

from pathlib import Path
from typing import Annotated

import typer

from specsim.cli.common import JsonOpt, command_group, echo, emit, to_json
from specsim.errors import SpecError

hardware_app = command_group("hardware", "Built-in GPU profiles (datasheet numbers with sources).")
models_app = command_group("models", "Target model specs (numbers from each config.json).")


@hardware_app.command("list")
def hardware_list(as_json: JsonOpt = False) -> None:
    """List the built-in GPU profiles."""
    from specsim.specs.hardware import load_hardware
    from specsim.specs.io import builtin_names

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
    from specsim.present.rows import hardware_rows
    from specsim.specs.hardware import load_hardware

    rows = hardware_rows(load_hardware(name))
    if as_json:
        echo(to_json(rows))
        return
    from specsim.present.render import key_values

    echo(key_values([(r["field"], r["value"], r["source"]) for r in rows], title=name))


# ----------------------------------------------------------------------------- models


@models_app.command("list")
def models_list(as_json: JsonOpt = False) -> None:
    """List the built-in target models with their computed and advertised sizes."""
    from specsim.present.rows import model_summary
    from specsim.specs.io import builtin_names
    from specsim.specs.models import load_model

    emit([model_summary(load_model(slug)) for slug in builtin_names("models")], as_json)


@models_app.command("show")
def models_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                as_json: JsonOpt = False) -> None:
    """Show one model spec: architecture numbers, parameter counts, cache per token."""
    from specsim.present.rows import model_rows
    from specsim.specs.models import load_model

    rows = model_rows(load_model(name))
    if as_json:
        echo(to_json(rows))
        return
    from specsim.present.render import key_values

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
    from specsim.specs.hf_import import import_config, read_config
    from specsim.specs.io import read_spec_file, write_yaml
    from specsim.specs.models import model_from_file

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
    from specsim.specs.params import total_params

    echo(f"wrote {target}: {model.name}, {total_params(model) / 1e9:.2f}B parameters")

"""`specsim hardware` and `specsim models`: the built-in specs, every number with its source."""

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from specsim.cli.common import JsonOpt, command_group, echo, emit, note, to_json

if TYPE_CHECKING:
    from specsim.specs.drafters import Drafter

hardware_app = command_group("hardware", "Built-in GPU profiles (datasheet numbers with sources).")
models_app = command_group("models", "Target model specs (numbers from each config.json).")


@hardware_app.command("list")
def hardware_list(as_json: JsonOpt = False) -> None:
    """List the built-in GPU profiles."""
    from specsim.present.rows import hardware_summary
    from specsim.specs.hardware import load_hardware
    from specsim.specs.paths import builtin_names

    emit([hardware_summary(load_hardware(slug)) for slug in builtin_names("hardware")], as_json)


@hardware_app.command("show")
def hardware_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                  as_json: JsonOpt = False) -> None:
    """Show one GPU profile, every number with its source."""
    from specsim.present.rows import hardware_rows
    from specsim.specs.hardware import TRANSFERRED_PREFIX, datasheet_gemm, load_hardware

    hw = load_hardware(name)
    kernels = not hw.is_calibrated or hw.slug.startswith(TRANSFERRED_PREFIX)
    rows = hardware_rows(hw, datasheet_gemm(hw.sm_count) if kernels else None)
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
    from specsim.specs.models import load_model
    from specsim.specs.params import model_sizes
    from specsim.specs.paths import builtin_names

    models = [load_model(slug) for slug in builtin_names("models")]
    emit([model_summary(m, model_sizes(m)) for m in models], as_json)


@models_app.command("show")
def models_show(name: Annotated[str, typer.Argument(help="Slug or YAML path.")],
                as_json: JsonOpt = False) -> None:
    """Show one model spec: architecture numbers, parameter counts, cache per token."""
    from specsim.present.rows import model_rows
    from specsim.specs.models import load_model
    from specsim.specs.params import model_sizes

    model = load_model(name)
    rows = model_rows(model, model_sizes(model))
    if as_json:
        echo(to_json(rows))
        return
    from specsim.present.render import key_values

    echo(key_values([(r["field"], r["value"], r["source"]) for r in rows], title=name))


@models_app.command("import")
def models_import(
    config: Annotated[str, typer.Argument(
        help="A Hugging Face config.json (or its folder), or a Hub repo id such as "
             "Qwen/Qwen3-8B (read through the huggingface_hub cache; HF_HUB_OFFLINE=1 works).")],
    name: Annotated[str | None, typer.Option(
        help="Model name (default: the config's folder or the repo name).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output YAML (default: ./<slug>.yaml).")] = None,
    source: Annotated[str | None, typer.Option(
        help="Where the config came from (URL); recorded as the source of every number.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Turn a config.json into a model spec YAML that every command accepts."""
    from specsim.specs.hf_hub import locate_config
    from specsim.specs.hf_import import import_config, is_generic, read_config
    from specsim.specs.io import spec_from_mapping
    from specsim.specs.models import model_from_file
    from specsim.specs.names import display_name_problem, require
    from specsim.specs.outputs import check_writable, write_yaml

    if name is not None:  # before the file name is derived from it
        require(name, display_name_problem, "option --name")
    found = locate_config(config)
    model_name = name or found.name
    slug = model_name.lower().replace("/", "-").replace(" ", "-")
    target = out or Path(f"{slug}.yaml")
    check_writable(target, force=force, suffixes=(".yaml", ".yml"), reads=(found.path,))
    data = read_config(found.path)
    spec = import_config(data, name=model_name, source=source or found.source,
                         where=str(found.path))
    # Validate the spec as the file will hold it before writing: an invalid config leaves an
    # existing --out untouched.
    model = model_from_file(spec_from_mapping(spec, str(found.path)), slug=target.stem)
    write_yaml(target, spec, force=force)
    from specsim.specs.params import total_params

    params_b = total_params(model) / 1e9
    how = (" (generic path: an architecture without its own entry, read by the keys it shares "
           "with others; compare the total with the publisher's)") if is_generic(data) else ""
    if as_json:
        echo(to_json({"out": str(target), "model": model.slug, "name": model.name,
                      "params_B": params_b, "generic_path": bool(how)}))
        return
    echo(f"wrote {target}: {model.name}, {params_b:.2f}B parameters{how}")


# ----------------------------------------------------------------------------- drafters


def _register_drafters_import() -> None:
    """`drafters import` joins the drafters group that cli/speculation.py defines."""
    from specsim.cli.speculation import drafters_app

    drafters_app.command("import")(drafters_import)


def drafters_import(
    config: Annotated[str, typer.Argument(
        help="A drafter's config.json (or its folder), or a Hub repo id such as "
             "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B.")],
    target: Annotated[str, typer.Option(
        help="Target model it drafts for: a built-in slug or a model YAML path.")],
    out: Annotated[Path, typer.Option(help="Drafter YAML to write.")],
    family: Annotated[str | None, typer.Option(
        help="eagle, eagle3, dflash or mtp (default: read from the config; EAGLE-1 needs it).")]
    = None,
    name: Annotated[str | None, typer.Option(help="Drafter name.")] = None,
    source: Annotated[str | None, typer.Option(
        help="Where the config came from (URL); recorded as the source of every number.")] = None,
    checkpoint: Annotated[str | None, typer.Option(
        help="Hub repo id (owner/name) of the drafter's weights, which the engine commands "
             "load (default: the Hub repo the config was read from, else the config's "
             "_name_or_path when it is a Hub id).")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
) -> None:
    """Turn a published drafter's config.json into a drafter YAML, checked against its target."""
    from specsim.errors import SpecError
    from specsim.specs.drafter_import import check_hub_repo, import_drafter
    from specsim.specs.drafters import load_drafter
    from specsim.specs.hf_hub import locate_config
    from specsim.specs.hf_import import read_config
    from specsim.specs.models import load_model
    from specsim.specs.names import display_name_problem, require
    from specsim.specs.outputs import check_writable, write_yaml

    if name is not None:
        require(name, display_name_problem, "option --name")
    if checkpoint is not None:
        check_hub_repo(checkpoint)
    check_writable(out, force=force, suffixes=(".yaml", ".yml"), reads=(Path(config),))
    found = locate_config(config)
    model = load_model(target)
    spec = import_drafter(read_config(found.path), target=model, target_name=target,
                          name=name or found.name, source=source or found.source,
                          where=str(found.path), family=family, checkpoint=checkpoint,
                          repo=found.repo)
    # Check the spec in a scratch folder first: an invalid config leaves an existing --out as
    # it was.
    with tempfile.TemporaryDirectory() as scratch:
        trial = Path(scratch) / out.name
        write_yaml(trial, spec, force=True)
        try:
            drafter = load_drafter(str(trial))
        except SpecError as err:  # name the config the bad value came from, not the scratch
            raise SpecError(str(err).replace(str(trial), f"{found.path} (as a drafter spec)")) \
                from None
    write_yaml(out, spec, force=force)
    weights = _checkpoint_text(drafter, checkpoint, found.repo)
    echo(f"wrote {out}: {drafter.family} drafter for {model.name}, "
         f"{drafter.params() / 1e9:.3f}B own parameters{weights}")
    if not drafter.checkpoint:
        note(f"note: {out} names no checkpoint (the config names no Hub repo of its own); "
             "the engine commands need one: import again with --checkpoint <owner/name> --force")


def _checkpoint_text(drafter: "Drafter", given: str | None, repo: str | None) -> str:
    """', checkpoint X' and where it came from, for the `drafters import` line."""
    text = f", checkpoint {drafter.checkpoint}" if drafter.checkpoint else ""
    if not text or given is not None:
        return text
    if repo is not None:
        return f"{text} (the Hub repo the config was read from)"
    return f"{text} (the config's _name_or_path; pass --checkpoint if that is not the drafter's)"


_register_drafters_import()

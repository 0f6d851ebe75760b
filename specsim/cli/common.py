"""What every command shares: the typer app, option types, list parsing, output helpers.

Heavy libraries (numpy, pandas, matplotlib) are imported inside the commands, so that
`specsim --help` starts fast.
"""

from typing import Annotated, Any

import typer

from specsim.errors import SpecError
from specsim.present.render import terminal_text
from specsim.specs import defaults

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


DEFAULT_HARDWARE = defaults.DEFAULT_HARDWARE
DEFAULT_MODEL = defaults.DEFAULT_MODEL
DEFAULT_DRAFTER = defaults.DEFAULT_DRAFTER
DTYPES = "fp32, bf16, fp16, fp8, int8, mxfp4, int4"

HardwareOpt = Annotated[str, typer.Option(
    "--hardware", "-H",
    help="GPU profile: a built-in slug (`specsim hardware list`) or a YAML path.")]
ModelOpt = Annotated[str, typer.Option(
    "--model", "-m", help="Target model: a built-in slug (`specsim models list`) or a YAML path.")]
TpOpt = Annotated[int, typer.Option("--tp", help="Tensor-parallel degree (GPUs per replica).")]
EpOpt = Annotated[int, typer.Option(
    "--ep", help="Expert-parallel degree: GPUs the routed experts of a MoE model are spread "
    "over (E / EP whole experts each, plus an all-to-all per MoE layer); 1 = experts split by "
    "--tp.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON rows.")]
ContextOpt = Annotated[str | None, typer.Option(
    "--context", help="Cached tokens per request, or a mix of lengths the batch's requests "
    "spread over evenly (e.g. 1024,32768). Where no default is shown: a --workload's context, "
    f"else {defaults.DEFAULT_CONTEXT_TOKENS:.0f}.")]
WeightDtypeOpt = Annotated[str, typer.Option(
    "--weight-dtype", help=f"Stored weight dtype ({DTYPES}; default: the model's).")]
KvDtypeOpt = Annotated[str, typer.Option(
    "--kv-dtype", help=f"KV-cache dtype ({DTYPES}): bytes read per pass and cached per token.")]
ComputeDtypeOpt = Annotated[str, typer.Option(
    "--compute-dtype", help="Tensor-core dtype whose peak flops the GEMMs run at.")]


def echo(text: str) -> None:
    """Print to stdout, control characters from spec names and sources shown as escapes."""
    typer.echo(terminal_text(text))


def note(text: str) -> None:
    """A line for the person at the terminal (estimates, warnings), on stderr: stdout stays
    the table or JSON."""
    typer.echo(terminal_text(text), err=True)


# The most each list option may ask for; --context's bound is its per-request length.
LIMITS = {
    "--tokens": defaults.MAX_TOKENS_PER_PASS,
    "--batch": defaults.MAX_BATCH,
    "--requests": defaults.MAX_BATCH,
    "--nodes": defaults.MAX_TREE_NODES,
    "--context": defaults.MAX_CONTEXT_TOKENS,
}


def parse_ints(text: str, option: str) -> list[int]:
    """'1,8,32' or '0-64' or '0-1024:8' (range with step) into a list of ints.

    Values are bounded by LIMITS[option] and the list by MAX_LIST_VALUES, checked before any
    list is built, so a huge range is one error rather than a hang.
    """
    maximum = LIMITS.get(option, defaults.MAX_BATCH)
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        span = _span(part, option)
        if span[0] < 0:
            break
        if span[0] > maximum or span[-1] > maximum:
            raise SpecError(f"option {option}: {_cut(part)} exceeds the limit of {maximum:,}")
        if len(values) + len(span) > defaults.MAX_LIST_VALUES:
            raise SpecError(f"option {option}: more than {defaults.MAX_LIST_VALUES:,} values "
                            f"in {_cut(text)}")
        values.extend(span)
    if not values or any(v < 0 for v in values):
        raise SpecError(f"option {option}: need one or more non-negative integers, "
                        f"got {_cut(text)}")
    return values


def _span(part: str, option: str) -> range:
    """One comma-separated item: 'N', 'LO-HI' or 'LO-HI:STEP' (a range(-1, 0) if negative)."""
    if not part.isascii():
        raise SpecError(f"option {option}: cannot read {_cut(part)} (ASCII digits only)")
    try:
        if "-" not in part[1:]:
            number = int(part)
            return range(number, number + 1) if number >= 0 else range(-1, 0)
        span, _, step_text = part.partition(":")
        lo_text, hi_text = span.split("-", 1)
        lo, hi, step = int(lo_text), int(hi_text), int(step_text) if step_text else 1
    except ValueError:
        raise SpecError(f"option {option}: cannot read {_cut(part)} (use e.g. 1,8,32 or 0-64 "
                        "or 0-1024:8)") from None
    if lo < 0 or hi < lo or step < 1:
        raise SpecError(f"option {option}: range {_cut(part)} needs 0 <= LO <= HI and a step "
                        ">= 1")
    return range(lo, hi + 1, step)


def _cut(text: str, width: int = 40) -> str:
    return repr(text) if len(text) <= width else repr(text[: width - 3] + "...")


def check_number(value: float | None, option: str, *, low: float, high: float,
                 low_open: bool = False) -> None:
    """A finite option value in [low, high] (or (low, high]); one line naming the option."""
    if value is None:
        return
    below = value <= low if low_open else value < low
    if value != value or below or value > high:
        bracket = "(" if low_open else "["
        raise SpecError(f"option {option}: must be in {bracket}{low:g}, {high:g}], got {value:g}")


def check_int(value: int | None, option: str, *, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise SpecError(f"option {option}: must be in {low}..{high:,}, got {value:,}")


def parse_context(text: str | None) -> float | tuple[float, ...] | None:
    """--context: one length (a float), a mix (a tuple of floats), or None when not given."""
    if text is None:
        return None
    mix = tuple(float(c) for c in parse_ints(text, "--context"))
    return mix[0] if len(mix) == 1 else mix


def precision(weight_dtype: str = "", kv_dtype: str = "bf16", compute_dtype: str = "bf16"
              ) -> Any:
    """The `Precision` of --weight-dtype, --kv-dtype and --compute-dtype."""
    from specsim.specs.dtypes import Precision

    return Precision(weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype)


def _load(hardware: str, model: str, tp: int = 1) -> tuple[Any, Any]:
    from specsim.specs.hardware import load_hardware
    from specsim.specs.models import check_tensor_parallel, load_model

    hw, target = load_hardware(hardware), load_model(model)
    check_tensor_parallel(target, tp)
    return hw, target


def _load_drafter(name: str, target: Any) -> Any:
    from specsim.specs.drafters import load_drafter

    return load_drafter(name, target=target)


def to_table(rows: list[dict[str, Any]]) -> str:
    from specsim.present import render

    return render.table(rows)


def to_json(rows: Any) -> str:
    from specsim.present import render

    return render.to_json(rows)


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    echo(to_json(rows) if as_json else to_table(rows))

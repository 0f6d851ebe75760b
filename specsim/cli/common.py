"""What every command shares: the typer app, option types, list parsing, output helpers.

Heavy libraries (numpy, pandas, matplotlib) are imported inside the commands, so that
`specsim --help` starts fast.
"""

import os
import re
from typing import Annotated, Any

import typer

from specsim.errors import SpecError
from specsim.present.render import terminal_text
from specsim.specs import defaults
from specsim.specs.paths import builtin_names

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
DEFAULT_ENGINE = defaults.DEFAULT_ENGINE
TpOpt = Annotated[int, typer.Option("--tp", help="Tensor-parallel degree (GPUs per replica).")]
EpOpt = Annotated[int, typer.Option(
    "--ep", help="Expert-parallel degree: GPUs the routed experts of a MoE model are spread "
    "over (E / EP whole experts each, plus an all-to-all per MoE layer); 1 = experts split by "
    "--tp.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON rows.")]
ContextOpt = Annotated[str | None, typer.Option(
    "--context", help="Cached tokens per request, or a mix of lengths the batch's requests "
    "spread over evenly (e.g. 1024,32768). Default: a --workload's context, else "
    f"{defaults.DEFAULT_CONTEXT_TOKENS:.0f}.")]
EngineOpt = Annotated[str, typer.Option(
    "--engine", help="Serving engine whose host and launch terms each pass and round pays "
    f"(`specsim engines list`: {', '.join(builtin_names('engines'))}); roofline = the idealized "
    "GPU with no "
    "engine (kernels only). NAME:sync / NAME:overlap time speculative rounds with their host "
    "work after / during the GPU's (sglang overlaps by default, as SGLang 0.5.23 does; "
    "sglang:sync is SGLang before spec v2).")]
DrafterOpt = Annotated[str | None, typer.Option(
    "--drafter", "-d", help="Drafter spec: a built-in slug (`specsim drafters list`) or a YAML "
    "path. Its architecture sets the drafting cost; its published acceptance is the default. "
    f"Default: {defaults.DEFAULT_DRAFTER} when the model is its target "
    f"({defaults.DEFAULT_MODEL}), else none.")]
WeightDtypeOpt = Annotated[str, typer.Option(
    "--weight-dtype", help=f"Stored weight dtype ({DTYPES}; default: the model's).")]
KvDtypeOpt = Annotated[str, typer.Option(
    "--kv-dtype", help=f"KV-cache dtype ({DTYPES}): bytes read per pass and cached per token.")]
ComputeDtypeOpt = Annotated[str, typer.Option(
    "--compute-dtype", help="Tensor-core dtype whose peak flops the GEMMs run at.")]


# Library parameters whose option is not the parameter's name with dashes.
OPTION_OF_PARAMETER = {
    "fmt": "--format",
    "target_tokens_per_s": "--target-throughput",
    "train_models": "--train",
    "drafters": "--drafter",
    "concurrencies": "--concurrency",
}
# Flags a library message may tell the caller to set ("pass accept_worse=True").
_FLAG = re.compile(r"\b(accept_worse|accept_implausible|allow_device_mismatch)=True\b")


def option_name(parameter: str) -> str:
    """The command-line option of a library parameter: max_nodes -> --max-nodes."""
    return OPTION_OF_PARAMETER.get(parameter, "--" + parameter.replace("_", "-"))


def option_text(text: str, parameter: str | None = None) -> str:
    """A library message as the command line says it: the parameter that starts it becomes its
    option ("max_nodes: ..." -> "option --max-nodes: ..."), and flags to set ("accept_worse=True")
    their options ("--accept-worse"). The one place parameter names become option names."""
    if parameter and text.startswith(parameter) and text[len(parameter):][:1] in (":", " "):
        text = f"option {option_name(parameter)}{text[len(parameter):]}"
    return _FLAG.sub(lambda m: option_name(m.group(1)), text)


def echo(text: str) -> None:
    """Print to stdout, control characters from spec names and sources shown as escapes."""
    typer.echo(terminal_text(text))


def note(text: str) -> None:
    """A line for the person at the terminal (estimates, warnings), on stderr: stdout stays
    the table or JSON."""
    typer.echo(terminal_text(text), err=True)


# ---- the text of option values, as typed -----------------------------------------------------

# Click's types by name: what `strict_option_types` checks the typed text of.
_NUMBER_TYPES = ("int", "float", "int range", "float range")
_CHECKED_TYPES = ("str", "path", *_NUMBER_TYPES)
# The path parameters that name a folder, per command; every other path names a file, whose
# text may not end in '/': pathlib drops the slash, and '--plot x.png/' wrote a file x.png.
FOLDER_PATHS = {"recommend": ("configs_out",), "calibrate": ("profile_path",), "plan": ("out",),
                "bench plan": ("results", "out"), "bench fit": ("plan_dir", "results")}


def option_text_problem(text: str, kind: str) -> str | None:
    """What is wrong with the text typed for an option of click type `kind` ('folder': a path
    in FOLDER_PATHS), or None: a blank value (an unset shell variable; for a path it became
    '.', for a name the default), a file's path ending in '/', and for a number anything but
    ASCII digits and signs (Python's int() and float() read '１', '١' and '1_0' as 1, 1 and
    10). The numbers' ranges are the library's to check."""
    if not text.strip():
        return "the path is empty" if kind in ("path", "folder") else "the value is empty"
    if kind == "path" and text.endswith(("/", os.sep)):
        return f"{_cut(text)} ends in '/', which names a folder; give a file name"
    if kind in _NUMBER_TYPES and (not text.isascii() or "_" in text):
        return f"{_cut(text)} is not a number (ASCII digits only, no '_')"
    return None


def strict_option_types(command: Any, where: str = "") -> Any:
    """`command` (and its subcommands) with every option and argument reading the typed text
    strictly (`option_text_problem`): a problem is a usage error naming the option, exit 2; a
    float's -0.0 becomes 0.0 (a setup line read 'alpha -0'). Defaults are left as they are.
    `where`: the command's words after `specsim` (a key of FOLDER_PATHS)."""
    for param in command.params:
        kind = getattr(param.type, "name", "")
        if kind == "path" and param.name in FOLDER_PATHS.get(where, ()):
            kind = "folder"
        if kind in (*_CHECKED_TYPES, "folder"):
            param.type = _strict_type(param.type, kind)
    command.make_parser = _once_parser(command.make_parser)
    for name, sub in getattr(command, "commands", {}).items():
        strict_option_types(sub, f"{where} {name}".strip())
    return command


def _once_parser(make_parser: Any) -> Any:
    """A command's parser that refuses an option given twice unless it takes several values
    (`--tp 2 ... --tp 4` ran TP 4; click keeps the last): a usage error naming the option."""

    def make(ctx: Any) -> Any:
        parser = make_parser(ctx)
        parse = parser.parse_args

        def parse_args(args: list[str]) -> Any:
            opts, rest, order = parse(args=args)
            seen: set[str] = set()
            for param in order:
                if getattr(param, "multiple", True) or not getattr(param, "opts", None):
                    continue  # repeatable options and arguments
                if param.name in seen:
                    ctx.fail(f"option {param.opts[0]} is given more than once; give it once")
                seen.add(param.name)
            return opts, rest, order

        parser.parse_args = parse_args
        return parser

    return make


def _strict_type(inner: Any, kind: str) -> Any:
    import copy

    strict = copy.copy(inner)
    convert = inner.convert

    def checked(value: Any, param: Any, ctx: Any) -> Any:
        typed = ctx is not None and getattr(param, "name", None) is not None and getattr(
            ctx.get_parameter_source(param.name), "name", "") not in ("DEFAULT", "DEFAULT_MAP")
        if isinstance(value, str) and typed:
            problem = option_text_problem(value, kind)
            if problem is not None:
                inner.fail(problem, param, ctx)
        result = convert(value, param, ctx)
        return result + 0.0 if isinstance(result, float) else result

    strict.convert = checked
    return strict


# The most each list option may ask for; --context's bound is its per-request length.
LIMITS = {
    "--tokens": defaults.MAX_TOKENS_PER_PASS,
    "--batch": defaults.MAX_BATCH,
    "--requests": defaults.MAX_BATCH,
    "--nodes": defaults.MAX_TREE_NODES,
    "--context": defaults.MAX_CONTEXT_TOKENS,
}


def parse_ints(text: str, option: str, *, distinct: bool = True) -> list[int]:
    """'1,8,32' or '0-64' or '0-1024:8' (range with step) into a list of ints.

    Values are bounded by LIMITS[option] and the list by MAX_LIST_VALUES, checked before any
    list is built, so a huge range is one error rather than a hang. `distinct`: a value given
    twice (a sweep's row computed and printed twice) is refused; --context's mix of lengths
    may repeat one (it weighs that length twice).
    """
    maximum = LIMITS.get(option, defaults.MAX_BATCH)
    values: list[int] = []
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > 1 and not all(parts):  # '1,,8' or '1,8,': a value left out, or a typo
        raise SpecError(f"option {option}: an empty item in {_cut(text)} (use e.g. 1,8,32)")
    for part in parts:
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
    twice = _first_repeat(values) if distinct else None
    if twice is not None:
        raise SpecError(f"option {option}: {twice:,} is given twice in {_cut(text)}; list each "
                        "value once")
    return values


def _first_repeat(values: list[int]) -> int | None:
    """The first value that appeared before it in `values`, None if all differ."""
    seen: set[int] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


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


def parse_context(text: str | None) -> float | tuple[float, ...] | None:
    """--context: one length (a float), a mix (a tuple of floats), or None when not given."""
    if text is None:
        return None
    mix = tuple(float(c) for c in parse_ints(text, "--context", distinct=False))
    return mix[0] if len(mix) == 1 else mix


def context_tokens(text: str | None) -> float | tuple[float, ...]:
    """--context where no workload gives one: the option's value, else the default."""
    context = parse_context(text)
    return defaults.DEFAULT_CONTEXT_TOKENS if context is None else context


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


def to_table(rows: list[dict[str, Any]]) -> str:
    from specsim.present import render

    return render.table(rows)


def to_json(rows: Any) -> str:
    from specsim.present import render

    return render.to_json(rows)


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    echo(to_json(rows) if as_json else to_table(rows))


def version() -> str:
    """The installed package's version (importlib.metadata), else specsim.__version__."""
    from importlib import metadata

    try:
        return metadata.version("specsim")
    except metadata.PackageNotFoundError:
        import specsim

        return str(getattr(specsim, "__version__", "unknown"))


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"specsim {version()}")
        raise typer.Exit()


@app.callback()
def _root(show_version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version,
        help="Print the version and exit.")] = False) -> None:
    """Predict how fast speculative decoding of an LLM runs on a GPU, before renting one."""

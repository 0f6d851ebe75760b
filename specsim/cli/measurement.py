"""CLI commands that meet real hardware: profile (time kernels here) and calibrate (fit)."""

import shlex
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from specsim.cli.common import (
    DEFAULT_HARDWARE,
    JsonOpt,
    TpOpt,
    app,
    echo,
    note,
    option_text,
    to_json,
    to_table,
)
from specsim.errors import SpecError, check_int, check_number
from specsim.present.render import terminal_text
from specsim.specs.defaults import DEFAULT_MODEL, MAX_TOKENS_PER_PASS

TINY = "tiny"  # a 4-layer toy model for quick CPU runs of the whole loop


def _model(name: str) -> Any:
    from specsim.measurement.profiling import tiny_model
    from specsim.specs.models import load_model

    return tiny_model() if name == TINY else load_model(name)


class _Progress:
    """A one-line progress bar on stderr (a line every 10% when stderr is not a terminal).

    Not tqdm or rich.progress (both installed, via huggingface_hub and typer): this is the one
    bar in specsim, its kernel labels must pass the terminal sanitizer anyway, and in a log
    (stderr not a terminal) it writes ten plain lines where tqdm writes carriage-return frames.
    """

    def __init__(self, title: str) -> None:

        self.title, self.start, self.shown = title, time.perf_counter(), -1
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int, label: str) -> None:
        tenth = 10 * done // total
        if not self.tty and tenth == self.shown and done != total:
            return
        self.shown = tenth
        bar = "#" * (30 * done // total)
        elapsed = time.perf_counter() - self.start
        line = terminal_text(f"{self.title} [{bar:<30}] {done}/{total} {elapsed:5.1f}s "
                             f"{label[:40]:<40}", newlines=False)
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        if self.tty and done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


@app.command()
def profile(
    model: Annotated[str, typer.Option(
        "--model", "-m", help=f"Model whose shapes to time (slug, YAML, or '{TINY}').")]
    = DEFAULT_MODEL,
    out: Annotated[Path, typer.Option(help="Profile CSV to write.")] = Path("specsim-profile.csv"),
    device: Annotated[str | None, typer.Option(
        help="cuda or cpu (default: cuda when torch sees a GPU).")] = None,
    backend: Annotated[str | None, typer.Option(
        help="torch or numpy (default: torch when installed, else numpy on the CPU).")] = None,
    dtype: Annotated[str | None, typer.Option(
        help="Expected dtype: bf16 on CUDA, fp32 on the CPU (the backend decides).")] = None,
    tp: TpOpt = 1,
    quick: Annotated[bool, typer.Option(
        help="A short grid, cut to an estimated minute: the most expensive kernels (on a CPU "
        "the large-m LM-head and MLP GEMMs of a real model) are skipped and listed.")] = False,
    budget_s: Annotated[float | None, typer.Option(
        "--budget-s", help="Skip the most expensive kernels so the estimated run time stays "
        "under this many seconds (default: 60 with --quick, no limit otherwise).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Cap the GEMM token grid.")] = None,
    repeats: Annotated[int, typer.Option(help="Timed runs per kernel (median, p10, p90).")]
    = 20,
    warmup: Annotated[int, typer.Option(help="Untimed runs first.")] = 5,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Time the kernels T(n) is made of, for a model's shapes, on this machine's device.

    Prints an estimate of the run time first (from each kernel's flops and bytes and this
    device's speed on calibration GEMMs), then a progress line. A full 8B grid takes about a
    minute on an H100 and hours on a CPU; --quick on a CPU keeps to about a minute.
    """
    from specsim.measurement.profile_csv import write_profile
    from specsim.measurement.profiling import (
        make_backend,
        plan_profile,
        profile_metadata,
        run_profile,
    )
    from specsim.specs.outputs import check_writable

    check_writable(out, force=force, suffixes=(".csv",))
    check_int(repeats, "repeats", low=1, high=10_000)
    check_int(warmup, "warmup", low=0, high=10_000)
    check_int(max_tokens, "max_tokens", low=1, high=MAX_TOKENS_PER_PASS)
    spec = _model(model)
    kind = backend or _default_backend(device)
    engine = make_backend(kind, device)
    if dtype is not None and dtype != engine.dtype:
        raise SpecError(f"option --dtype: the {kind} backend on {engine.device_name} times "
                        f"{engine.dtype}, not {dtype}")
    from specsim.measurement.profile_budget import QUICK_BUDGET_S

    check_number(budget_s, "budget_s", low=1.0, high=1e6)
    budget = budget_s if budget_s is not None else (QUICK_BUDGET_S if quick else None)
    points = plan_profile(spec, tp=tp, quick=quick, max_tokens=max_tokens)
    points, skipped = _planned(points, engine, repeats=repeats, warmup=warmup, budget_s=budget)
    frame = run_profile(points, engine, repeats=repeats, warmup=warmup,
                        progress=_Progress(f"profiling {spec.slug}"))
    command = "specsim " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    meta = profile_metadata(spec, tp=tp, backend=engine, repeats=repeats, warmup=warmup,
                            command=command)
    if skipped:
        meta["skipped_over_budget"] = skipped
    write_profile(frame, out, meta, force=force)
    if as_json:
        echo(to_json({"out": str(out), "points": len(frame), "device": engine.device_name,
                      "dtype": engine.dtype}))
        return
    echo(f"wrote {out}: {len(frame)} points on {engine.device_name} ({engine.dtype})")


def _planned(points: Any, engine: Any, *, repeats: int, warmup: int,
             budget_s: float | None) -> tuple[Any, str]:
    """The points to time within the budget, and what was skipped; the estimate on stderr."""
    from specsim.measurement.profile_budget import (
        format_duration,
        kernel_s,
        measure_rates,
        skipped_summary,
        within_budget,
    )

    rates = measure_rates(engine)
    elem = 2.0 if engine.dtype in ("bf16", "fp16") else 4.0
    seconds = kernel_s(points, rates, elem_bytes=elem, repeats=repeats, warmup=warmup)
    speed = (f"{rates.flops_per_s / 1e9:,.0f} GFLOP/s and {rates.bytes_per_s / 1e9:,.1f} GB/s "
             f"measured on calibration GEMMs")
    note(f"estimate: {len(seconds)} kernels x {warmup + repeats} runs, about "
         f"{format_duration(sum(seconds.values()))} on {engine.device_name} ({speed})")
    if budget_s is None:
        return points, ""
    kept, skipped = within_budget(points, seconds, budget_s)
    if not kept:
        raise SpecError(f"option --budget-s: even the cheapest kernel takes about "
                        f"{format_duration(min(seconds.values()))}, over {budget_s:g} s")
    if not skipped:
        return points, ""
    summary = skipped_summary(kept, skipped)
    kept_s = sum(seconds[k] for k in {p.kernel for p in kept})
    note(f"budget {budget_s:g} s: timing {len(kept)} of {len(points)} points (about "
         f"{format_duration(kept_s)}); skipped as too slow here: {summary}")
    return kept, summary


def _default_backend(device: str | None) -> str:
    if device == "cpu":
        return "numpy"
    try:
        import torch  # noqa: F401
    except ImportError:
        if device and device.startswith("cuda"):
            raise SpecError('torch is not installed: pip install "specsim[profile]" '
                            "(or use --device cpu)") from None
        return "numpy"
    return "torch"


@app.command()
def calibrate(
    profile_path: Annotated[Path, typer.Argument(
        metavar="PROFILE", help="A profile CSV (specsim format) or a Vidur profiling folder.")],
    out: Annotated[Path, typer.Option(help="Calibrated hardware YAML to write.")],
    hardware: Annotated[str | None, typer.Option(
        "--hardware", "-H", help=f"GPU profile the kernels ran on (slug or YAML); default: "
        f"{DEFAULT_HARDWARE}, or for --format vidur the device's own profile.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="specsim or vidur.")] = "specsim",
    device: Annotated[str | None, typer.Option(
        help="Vidur device folder (a100, a40); default: the hardware's, else the folder's "
        "only one.")] = None,
    train: Annotated[list[str] | None, typer.Option(
        help="Train on these models (repeat the option); the others are held out. Default: "
        "every model, holding out every third point of each grid.")] = None,
    model: Annotated[str | None, typer.Option(
        help="Check that a specsim profile has this model's shapes.")] = None,
    tp: TpOpt = 1,
    predictions: Annotated[Path | None, typer.Option(
        help="Write one row per measured point: shape, measured, predicted, split.")] = None,
    plot: Annotated[Path | None, typer.Option(
        help="Write measured vs datasheet vs calibrated GEMM time per layer (PNG).")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files.")] = False,
    accept_worse: Annotated[bool, typer.Option(
        "--accept-worse", help="Write a calibrated profile even when its error is worse than "
        "the datasheet's (printed as a warning).")] = False,
    accept_implausible: Annotated[bool, typer.Option(
        "--accept-implausible", help="Write a calibrated profile although the measured times "
        "or the fitted terms are outside what the GPU's physics allows (a unit mistake, "
        "efficiencies or per-kernel floors no real GPU shows); each is printed as a "
        "warning.")] = False,
    allow_device_mismatch: Annotated[bool, typer.Option(
        "--allow-device-mismatch", help="Calibrate although the profile was measured on "
        "another device than --hardware (e.g. a CPU against an H100 datasheet); the result "
        "is named for the measured device.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fit effective bandwidth, flops and overheads to measured kernels; write the profile.

    The calibrated profile is named for the device the kernels ran on (the profile's
    '# device:' line). A profile of another device than --hardware is refused, so is a fit
    whose error is worse than the datasheet's, and so are measured times or fitted terms the
    GPU's physics rules out, e.g. milliseconds in the seconds column (each can be overridden,
    see below).
    """
    from specsim.measurement.calibrate import (
        attention_kernel_sources,
        calibrated_yaml,
        holdout_summary,
    )
    from specsim.measurement.calibrate import calibrate as fit
    from specsim.measurement.device_match import WorseThanDatasheet, fitted_efficiency
    from specsim.measurement.plausibility import ImplausibleCalibration, percent_text
    from specsim.measurement.tables import (
        check_calibration_options,
        l2_statement,
        measured_hardware,
        read_measurements_and_metadata,
    )
    from specsim.specs.hardware import load_hardware
    from specsim.specs.io import read_yaml
    from specsim.specs.outputs import PLOT_SUFFIXES, check_writable, write_yaml

    check_calibration_options(fmt=fmt, device=device, model=model, tp=tp)
    check_writable(out, force=force, suffixes=(".yaml", ".yml"), reads=(profile_path,))
    if predictions is not None:
        check_writable(predictions, force=force, suffixes=(".csv",), reads=(profile_path,))
    if plot is not None:
        check_writable(plot, force=force, suffixes=PLOT_SUFFIXES)
    if len({p.resolve() for p in (out, predictions, plot) if p is not None}) < \
            sum(p is not None for p in (out, predictions, plot)):
        raise SpecError("options --out, --predictions and --plot must name different files")
    slug, vidur_device = measured_hardware(profile_path, fmt, hardware=hardware, device=device)
    hw = load_hardware(slug)
    points, metadata = read_measurements_and_metadata(profile_path, fmt, device=vidur_device)
    measured_on = metadata.get("device", "")
    if model is not None:
        from specsim.measurement.profile_csv import check_profile_matches_model

        check_profile_matches_model(points, _model(model), tp, source=str(profile_path))
    split_rule = f"trained on {', '.join(train)}" if train else \
        "every third point of each grid held out"
    try:
        result = fit(points, hw, train_models=train, source="pending",
                     accept_implausible=accept_implausible, measured_on=measured_on,
                     allow_device_mismatch=allow_device_mismatch, accept_worse=accept_worse)
    except WorseThanDatasheet as err:
        _report(err.calibration, out, as_json, wrote=False)
        raise SpecError(f"{profile_path}: {err}; not written") from None
    except ImplausibleCalibration as err:
        raise SpecError(f"{profile_path}: not written (--accept-implausible writes it anyway), "
                        f"the GPU's physics rules it out: {'; '.join(err.problems)}") from None
    except SpecError as err:
        if err.parameter == "hardware":  # kernels of another device
            raise SpecError(f"{profile_path}: {err}") from None
        raise SpecError(f"{profile_path}: cannot calibrate on these points ({err})") from None
    held = holdout_summary(result)
    summary = ", ".join(f"{k} {percent_text(v)}" for k, v in held.items())
    data = "Vidur's public profiling tables (github.com/microsoft/vidur, data/profiling)" \
        if fmt == "vidur" else f"profile {profile_path}"
    cache = l2_statement(points, fmt, metadata)
    source = (f"specsim calibrate on {data}: {len(points)} points, {split_rule}; "
              f"held-out MAPE: {summary}; {cache}")
    if result.hardware.efficiency.attention_kernels is None:
        source += ("; attention NOT calibrated (no attention kernels measured, or too few): "
                   "attention takes the roofline with the fractions above"
                   if "attention" in held else
                   "; attention NOT calibrated (no attention kernels measured): it takes the "
                   "idealized datasheet roofline")
    if result.problems:
        source += ("; written with --accept-implausible although the GPU's physics rules it "
                   "out: " + "; ".join(result.problems))
    document = calibrated_yaml(read_yaml(Path(hw.path)), result, source=source,
                               kernel_sources=attention_kernel_sources(result, data, train))
    if predictions is not None:
        _write_csv(_prediction_rows(result.points), predictions)
    if plot is not None:
        from specsim.present.plots import calibration_figure

        calibration_figure(result.layer_sums, plot, title=f"{hw.name}: {profile_path.name}, "
                           f"{split_rule}; weight GEMMs summed per layer")
    write_yaml(out, document, force=force)
    for warning in result.warnings:
        note(f"warning: {profile_path}: {option_text(warning)}")
    fitted = fitted_efficiency(result.hardware, hw)
    for problem in result.problems:
        note(f"warning: {profile_path}: implausible, written because of --accept-implausible: "
             f"{problem}")
    setup = (f"setup: calibrate {profile_path} ({fmt}) against the {hw.name} datasheet; "
             f"{len(points):,} points, {split_rule}; {cache}")
    _report(result, out, as_json, setup=setup, fitted=fitted)


def _prediction_rows(points: Any) -> Any:
    columns = ["model", "tp", "op", "op_class", "dtype", "m", "k", "n", "count", "batch",
               "context", "queries", "mask", "time_s", "predicted_s", "datasheet_s", "split"]
    return points[columns].rename(columns={"time_s": "measured_s"})


def _write_csv(frame: Any, path: Path) -> None:
    from specsim.specs.outputs import atomic_write

    atomic_write(path, lambda handle: frame.to_csv(handle, index=False, float_format="%.7g"))


def _report(result: Any, out: Path, as_json: bool, *, wrote: bool = True, setup: str = "",
            fitted: dict[str, float] | None = None) -> None:
    from specsim.measurement.plausibility import factor_text, seconds_text

    errors = result.errors.round(2).to_dict("records")
    layers = result.layer_errors.round(2).to_dict("records") if len(result.layer_errors) else []
    regions = result.region_errors.round(2).to_dict("records") \
        if len(result.region_errors) else []
    sizes = result.size_errors.round(2).to_dict("records") if len(result.size_errors) else []
    if as_json:
        echo(to_json({"errors": errors, "summed_gemm_errors": layers,
                      "summed_gemm_errors_by_region": regions,
                      "gemm_errors_by_weight_size": sizes, "notes": list(result.notes),
                      "tree_attention_slowdown": result.tree_attention_slowdown,
                      "implausible": list(result.problems),
                      "fitted": fitted, "setup": setup or None,
                      "name": result.hardware.name, "out": str(out) if wrote else None}))
        return
    if setup:
        echo(setup)
    echo(to_table(errors))
    if layers:
        echo("\nGEMM time summed per (model, TP, n), e.g. one layer's weight GEMMs:")
        echo(to_table(layers))
    if regions:
        echo("\nthe same by token region:")
        echo(to_table(regions))
    if sizes:
        echo("\nsingle GEMMs by weight-shard size:")
        echo(to_table(sizes))
    for text in result.notes:
        echo(f"note: {text}")
    slowdown = result.tree_attention_slowdown
    echo(f"\ntree-masked / causal attention: "
         f"{f'{slowdown:.2f}' if slowdown < 1e4 else factor_text(slowdown)}x")
    if fitted:
        echo(f"fitted GEMMs: {fitted['gemm_bandwidth_fraction']:.3f} of datasheet bandwidth "
             f"({fitted['gemm_bandwidth_GB_per_s']:,.0f} GB/s), "
             f"{fitted['gemm_flops_fraction']:.3g} of peak flops "
             f"({fitted['gemm_bf16_TFLOPS']:,.0f} bf16 TFLOPS), "
             f"{seconds_text(fitted['gemm_floor_us'] * 1e-6)} least time per kernel")
    if wrote:
        echo(f"wrote {out}: {result.hardware.name}")

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
    check_int,
    echo,
    to_json,
    to_table,
)
from specsim.errors import SpecError
from specsim.specs.defaults import MAX_TOKENS_PER_PASS

TINY = "tiny"  # a 4-layer toy model for quick CPU runs of the whole loop


def _model(name: str) -> Any:
    from specsim.measurement.profiling import tiny_model
    from specsim.specs.models import load_model

    return tiny_model() if name == TINY else load_model(name)


class _Progress:
    """A one-line progress bar on stderr (a line every 10% when stderr is not a terminal)."""

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
        line = f"{self.title} [{bar:<30}] {done}/{total} {elapsed:5.1f}s {label[:40]:<40}"
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        if self.tty and done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


@app.command()
def profile(
    model: Annotated[str, typer.Option(
        "--model", "-m", help=f"Model whose shapes to time (slug, YAML, or '{TINY}').")],
    out: Annotated[Path, typer.Option(help="Profile CSV to write.")],
    device: Annotated[str | None, typer.Option(
        help="cuda or cpu (default: cuda when torch sees a GPU).")] = None,
    backend: Annotated[str | None, typer.Option(
        help="torch or numpy (default: torch when installed, else numpy on the CPU).")] = None,
    dtype: Annotated[str | None, typer.Option(
        help="Expected dtype: bf16 on CUDA, fp32 on the CPU (the backend decides).")] = None,
    tp: TpOpt = 1,
    quick: Annotated[bool, typer.Option(help="A short grid (seconds on a CPU).")] = False,
    max_tokens: Annotated[int | None, typer.Option(help="Cap the GEMM token grid.")] = None,
    repeats: Annotated[int, typer.Option(help="Timed runs per kernel (median, p10, p90).")]
    = 20,
    warmup: Annotated[int, typer.Option(help="Untimed runs first.")] = 5,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Time the kernels T(n) is made of, for a model's shapes, on this machine's device."""
    from specsim.measurement.profile_csv import write_profile
    from specsim.measurement.profiling import (
        make_backend,
        plan_profile,
        profile_metadata,
        run_profile,
    )
    from specsim.specs.io import check_writable

    check_writable(out, force=force, suffixes=(".csv",))
    check_int(repeats, "--repeats", low=1, high=10_000)
    check_int(warmup, "--warmup", low=0, high=10_000)
    check_int(max_tokens, "--max-tokens", low=1, high=MAX_TOKENS_PER_PASS)
    spec = _model(model)
    kind = backend or _default_backend(device)
    engine = make_backend(kind, device)
    if dtype is not None and dtype != engine.dtype:
        raise SpecError(f"option --dtype: the {kind} backend on {engine.device_name} times "
                        f"{engine.dtype}, not {dtype}")
    points = plan_profile(spec, tp=tp, quick=quick, max_tokens=max_tokens)
    frame = run_profile(points, engine, repeats=repeats, warmup=warmup,
                        progress=_Progress(f"profiling {spec.slug}"))
    command = "specsim " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    meta = profile_metadata(spec, tp=tp, backend=engine, repeats=repeats, warmup=warmup,
                            command=command)
    write_profile(frame, out, meta, force=force)
    if as_json:
        echo(to_json({"out": str(out), "points": len(frame), "device": engine.device_name,
                      "dtype": engine.dtype}))
        return
    echo(f"wrote {out}: {len(frame)} points on {engine.device_name} ({engine.dtype})")


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
    as_json: JsonOpt = False,
) -> None:
    """Fit effective bandwidth, flops and overheads to measured kernels; write the profile."""
    from specsim.measurement.calibrate import (
        attention_kernel_sources,
        calibrated_yaml,
        holdout_summary,
    )
    from specsim.measurement.calibrate import calibrate as fit
    from specsim.measurement.tables import measured_hardware, read_measurements
    from specsim.specs.hardware import load_hardware
    from specsim.specs.io import PLOT_SUFFIXES, check_writable, read_yaml, write_yaml

    check_writable(out, force=force, suffixes=(".yaml", ".yml"))
    if predictions is not None:
        check_writable(predictions, force=force, suffixes=(".csv",))
    if plot is not None:
        check_writable(plot, force=force, suffixes=PLOT_SUFFIXES)
    if len({p.resolve() for p in (out, predictions, plot) if p is not None}) < \
            sum(p is not None for p in (out, predictions, plot)):
        raise SpecError("options --out, --predictions and --plot must name different files")
    slug, vidur_device = measured_hardware(profile_path, fmt, hardware=hardware, device=device)
    hw = load_hardware(slug)
    points = read_measurements(profile_path, fmt, device=vidur_device)
    if model is not None:
        from specsim.measurement.profile_csv import check_profile_matches_model

        check_profile_matches_model(points, _model(model), tp, source=str(profile_path))
    split_rule = f"trained on {', '.join(train)}" if train else \
        "every third point of each grid held out"
    try:
        result = fit(points, hw, train_models=train, source="pending")
    except SpecError as err:
        raise SpecError(f"{profile_path}: cannot calibrate on these points ({err})") from None
    held = holdout_summary(result)
    summary = ", ".join(f"{k} {v:.1f}%" for k, v in held.items())
    data = "Vidur's public profiling tables (github.com/microsoft/vidur, data/profiling)" \
        if fmt == "vidur" else f"profile {profile_path}"
    source = (f"specsim calibrate on {data}: {len(points)} points, {split_rule}; "
              f"held-out MAPE: {summary}")
    if result.hardware.efficiency.attention_kernels is None:
        source += ("; attention NOT calibrated (no attention kernels measured, or too few): "
                   "attention takes the roofline with the fractions above"
                   if "attention" in held else
                   "; attention NOT calibrated (no attention kernels measured): it takes the "
                   "idealized datasheet roofline")
    document = calibrated_yaml(read_yaml(Path(hw.path)), result, source=source,
                               kernel_sources=attention_kernel_sources(result, data, train))
    if predictions is not None:
        _write_csv(_prediction_rows(result.points), predictions)
    if plot is not None:
        from specsim.present.plots import calibration_figure

        calibration_figure(result.points, plot, title=f"{hw.name}: {profile_path.name}")
    write_yaml(out, document, force=force)
    _report(result, out, as_json)


def _prediction_rows(points: Any) -> Any:
    columns = ["model", "tp", "op", "op_class", "dtype", "m", "k", "n", "count", "batch",
               "context", "queries", "mask", "time_s", "predicted_s", "datasheet_s", "split"]
    return points[columns].rename(columns={"time_s": "measured_s"})


def _write_csv(frame: Any, path: Path) -> None:
    from specsim.specs.io import atomic_write

    atomic_write(path, lambda handle: frame.to_csv(handle, index=False, float_format="%.7g"))


def _report(result: Any, out: Path, as_json: bool) -> None:
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
                      "out": str(out)}))
        return
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
    for note in result.notes:
        echo(f"note: {note}")
    echo(f"\ntree-masked / causal attention: {result.tree_attention_slowdown:.2f}x")
    echo(f"wrote {out}")

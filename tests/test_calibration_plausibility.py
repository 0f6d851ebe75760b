"""Calibration refuses what a GPU's physics rules out: a table in the wrong unit, efficiencies,
floors and overheads no real GPU shows; `--accept-implausible` writes it anyway, with warnings.
Numbers in messages stay short however wild the input."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.forward.attention_time import AttentionKernelEfficiency
from specsim.measurement.backends import point_bytes
from specsim.measurement.calibrate import calibrate
from specsim.measurement.plausibility import (
    ImplausibleCalibration,
    efficiency_problems,
    factor_text,
    measurement_problems,
    percent_text,
    seconds_text,
)
from specsim.measurement.profile_csv import write_profile
from specsim.measurement.profiling import plan_profile, profile_metadata, run_profile, tiny_model
from specsim.measurement.tables import from_vidur
from specsim.specs.hardware import (
    AttentionKernels,
    Efficiency,
    GemmEfficiency,
    OpEfficiency,
    load_hardware,
)
from tests.conftest import requires_vidur, vidur_dir
from tests.test_cli import run

# ---------------------------------------------------------------- fitted terms


def _fields(problems: tuple[str, ...]) -> list[str]:
    """The field each problem line names (its first word)."""
    return [p.split(" ", 1)[0] for p in problems]


@pytest.mark.parametrize("name", ["calibrated/a100-80g-sxm-vidur", "calibrated/a40-vidur"])
def test_committed_calibrated_profiles_are_plausible(name: str) -> None:
    assert efficiency_problems(load_hardware(name).efficiency) == ()


def test_the_ideal_roofline_is_plausible() -> None:
    assert efficiency_problems(Efficiency()) == ()


def test_ms_as_seconds_fit_names_every_impossible_gemm_field() -> None:
    """The issue's fit of a millisecond profile: GEMM flops at 0.076% of peak, a 68 ms floor,
    an epilogue of 362,233 reduction steps per tile."""
    eff = Efficiency(gemm=GemmEfficiency(bandwidth=0.78, flops=0.00076, floor_s=0.068,
                                         epilogue_k=362_233.0))
    problems = efficiency_problems(eff)
    assert _fields(problems) == ["gemm.flops", "gemm.floor_s", "gemm.epilogue_k"]
    assert "0.00076: outside the [0.02, 1.05]" in problems[0]
    assert "68 ms: above the 1 ms" in problems[1]
    assert "3.62e+05" in problems[2] and "4,096" in problems[2]


def test_values_just_inside_the_ranges_pass() -> None:
    eff = Efficiency(gemm=GemmEfficiency(bandwidth=0.051, flops=0.021, floor_s=0.9e-3,
                                         epilogue_k=4000.0),
                     attention=OpEfficiency(bandwidth=0.06, flops=0.03, floor_s=0.9e-3))
    assert efficiency_problems(eff) == ()


def test_roofline_terms_at_their_search_bounds_are_named() -> None:
    """The attention and memory rooflines are fitted in [0.05, 1] (bandwidth), [0.01, 1]
    (flops) and [1e-12, 1] s (floor): at a bound the fit found no answer inside."""
    eff = Efficiency(attention=OpEfficiency(bandwidth=0.05, flops=0.01, floor_s=0.154),
                     memory=OpEfficiency(bandwidth=0.3, floor_s=1.0))
    problems = efficiency_problems(eff)
    assert _fields(problems) == ["attention.bandwidth", "attention.flops", "attention.floor_s",
                                 "memory.floor_s"]
    assert "pinned at its fit's lower bound 0.05" in problems[0]
    assert "pinned at its fit's lower bound 0.01" in problems[1]
    assert "154 ms: above the 1 ms" in problems[2]
    assert "pinned at its fit's upper bound 1 s" in problems[3]


def test_tiled_attention_terms_are_checked_per_kernel() -> None:
    good = AttentionKernelEfficiency(bandwidth=0.87, flops=0.48, sm_bandwidth=0.85,
                                     floor_s=3e-6, cta_s=3e-6, combine_s=1e-6)
    bad = AttentionKernelEfficiency(bandwidth=0.00087, flops=0.48, sm_bandwidth=0.00086,
                                    floor_s=3e-6, cta_s=0.0154, combine_s=0.0028)
    problems = efficiency_problems(Efficiency(
        attention_kernels=AttentionKernels(decode=good, prefill=bad)))
    assert _fields(problems) == ["attention.prefill.bandwidth", "attention.prefill.sm_bandwidth",
                                 "attention.prefill.cta_s", "attention.prefill.combine_s"]


# ---------------------------------------------------------------- measured times


def test_unit_sniff_on_hand_made_times() -> None:
    # Three GEMMs whose ideal roofline is 10 us: measured 1.5x that (a real GPU's median on
    # Vidur's tables is 1.4-1.5x) is fine; 1000x that (milliseconds read as seconds) is over
    # the slowest a kernel can be, 10 us / 0.02 + 1 ms = 1.5 ms, and 750x a typical kernel
    # (1.5 x 10 us + 5 us): nearest to 1000x, milliseconds; 1/1000 of it beats the datasheet
    # by 667x and is 1/1333 of a typical kernel.
    classes, ideal = ["gemm"] * 3, np.full(3, 1e-5)
    assert measurement_problems(classes, ideal * 1.5, ideal, gpu="G") == ()
    (slow,) = measurement_problems(classes, ideal * 1.5e3, ideal, gpu="G")
    assert slow.startswith("time_s (gemm kernels): the times look like milliseconds, and the "
                           "column is seconds: the median kernel takes 1,500x its datasheet "
                           "roofline time")
    (fast,) = measurement_problems(classes, ideal * 1.5e-3, ideal, gpu="G")
    assert fast.startswith("time_s (gemm kernels): the times look about 1,000x too small")
    assert "runs 667x faster than the G datasheet" in fast


def test_a_floor_bound_small_kernel_is_not_a_unit_mistake() -> None:
    # A 0.1 us roofline kernel measured at 20 us (200x, a launch floor) stays under the
    # ceiling 0.1 us / 0.02 + 1 ms; only the median counts, so one slow outlier does not either.
    ideal = np.array([1e-7, 1e-7, 1e-5, 1e-5, 1e-5])
    time = np.array([2e-5, 2e-5, 1.4e-5, 1.5e-5, 5.0])
    assert measurement_problems(["attention"] * 5, time, ideal, gpu="G") == ()


def test_each_op_class_is_sniffed_on_its_own() -> None:
    ideal = np.full(4, 1e-5)
    time = np.array([1.5e-5, 1.5e-5, 1.5e-2, 1.5e-2])
    problems = measurement_problems(["gemm", "gemm", "memory", "memory"], time, ideal, gpu="G")
    assert len(problems) == 1 and problems[0].startswith("time_s (memory kernels")


@requires_vidur
@pytest.mark.parametrize("device, hardware", [("a100", "a100-80g-sxm"), ("a40", "a40")])
def test_vidur_tables_in_the_wrong_unit_are_refused(device: str, hardware: str) -> None:
    root = vidur_dir()
    assert root is not None
    points = from_vidur(root, device)
    hw = load_hardware(hardware)
    for scale, says in ((1e3, "the times look like milliseconds"),
                        (1e-3, "the times look about 1,000x too small")):
        wrong = points.assign(time_s=points["time_s"] * scale)
        with pytest.raises(ImplausibleCalibration) as refused:
            calibrate(wrong, hw, train_models=["meta-llama/Llama-2-7b-hf"], source="x")
        assert f"time_s (gemm kernels): {says}" in str(refused.value)


@requires_vidur
@pytest.mark.parametrize("device, hardware", [("a100", "a100-80g-sxm"), ("a40", "a40")])
def test_vidur_tables_in_seconds_pass_the_sniff(device: str, hardware: str) -> None:
    from specsim.measurement.calibrate import predict_s

    root = vidur_dir()
    assert root is not None
    points = from_vidur(root, device).reset_index(drop=True)
    ideal = predict_s(points, load_hardware(hardware))  # datasheet = ideal roofline
    assert measurement_problems(points["op_class"], points["time_s"], ideal,
                                gpu=hardware) == ()


# ---------------------------------------------------------------- short numbers


def test_numbers_in_messages_stay_short() -> None:
    assert percent_text(5.73) == "5.7%" and percent_text(1e302) == "> 1000%"
    assert percent_text(float("inf")) == "> 1000%" and percent_text(float("nan")) == "n/a"
    assert factor_text(3.21) == "3.2" and factor_text(1467.2) == "1,467"
    assert factor_text(1e293) == "1.0e+293"
    assert seconds_text(5.66e-6) == "5.66 us" and seconds_text(0.068) == "68 ms"
    assert seconds_text(1.1e20) == "1.1e+20 s"


# ---------------------------------------------------------------- the command


def _h100_profile(path: Path, scale: float) -> Path:
    """A profile of the tiny model's kernels on an H100 as a known roofline (80% of 3.35 TB/s,
    60% of 989 bf16 TFLOPS, a 5 us floor), every time multiplied by `scale`."""

    class Roofline:
        name, device_name, dtype = "synthetic", "NVIDIA H100 80GB HBM3", "bf16"

        def versions(self) -> dict[str, str]:
            return {}

        def notes(self) -> dict[str, str]:
            return {}

        def time_s(self, p: object, *, repeats: int, warmup: int) -> np.ndarray:
            point = p  # a ProfilePoint
            moved = point_bytes(point, 2.0)  # type: ignore[arg-type]
            flops = 0.0
            if point.op_class == "gemm":  # type: ignore[attr-defined]
                flops = 2.0 * point.count * point.m * point.k * point.n  # type: ignore[attr-defined]
            exact = 5e-6 + max(moved / (0.8 * 3.35e12), flops / (0.6 * 989e12))
            return np.full(repeats, exact * scale)

    model, backend = tiny_model(), Roofline()
    frame = run_profile(plan_profile(model, tp=1, quick=True), backend, repeats=3, warmup=0)
    write_profile(frame, path, profile_metadata(model, tp=1, backend=backend, repeats=3,
                                                warmup=0, command="test"))
    return path


def test_the_command_calibrates_a_plausible_profile(tmp_path: Path) -> None:
    profile, out = _h100_profile(tmp_path / "p.csv", 1.0), tmp_path / "o.yaml"
    fit = run("calibrate", str(profile), "-H", "h100-sxm", "--out", str(out))
    assert fit.returncode == 0, fit.stderr
    assert "implausible" not in fit.stderr and out.is_file()


@pytest.mark.parametrize("scale, says", [(1e3, "the times look like milliseconds"),
                                         (1e-3, "the times look about 1,000x too small")])
def test_the_command_refuses_a_profile_in_the_wrong_unit(tmp_path: Path, scale: float,
                                                         says: str) -> None:
    profile, out = _h100_profile(tmp_path / "p.csv", scale), tmp_path / "o.yaml"
    for extra in ((), ("--force",)):  # --force overwrites; it does not accept the impossible
        refused = run("calibrate", str(profile), "-H", "h100-sxm", "--out", str(out), *extra)
        assert refused.returncode == 2 and refused.stdout == ""
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith(f"specsim: error: {profile}: not written")
        assert f"time_s (gemm kernels): {says}" in lines[0]
        assert "--accept-implausible" in lines[0] and "Traceback" not in refused.stderr
        assert not out.exists()


def test_accept_implausible_writes_it_with_warnings(tmp_path: Path) -> None:
    profile, out = _h100_profile(tmp_path / "p.csv", 1e3), tmp_path / "o.yaml"
    fit = run("calibrate", str(profile), "-H", "h100-sxm", "--out", str(out),
              "--accept-implausible", "--force")
    assert fit.returncode == 0, fit.stderr
    warnings = [line for line in fit.stderr.splitlines()
                if "written because of --accept-implausible" in line]
    assert any("time_s (gemm kernels" in w for w in warnings)
    assert "written with --accept-implausible" in out.read_text()


def test_a_profile_of_tiny_times_prints_no_huge_number(tmp_path: Path) -> None:
    """1e-300 s per kernel: refused; accepted, its MAPE prints as '> 1000%', not 300 digits."""
    text = _h100_profile(tmp_path / "p.csv", 1.0).read_text().splitlines()
    header = next(i for i, line in enumerate(text) if not line.startswith("#"))
    columns = text[header].split(",")
    times = [columns.index(c) for c in columns if c.startswith("time_")]
    for i in range(header + 1, len(text)):
        cells = text[i].split(",")
        for c in times:
            cells[c] = "1e-300"
        text[i] = ",".join(cells)
    profile, out = tmp_path / "tiny.csv", tmp_path / "o.yaml"
    profile.write_text("\n".join(text) + "\n")
    for extra in ((), ("--accept-implausible",), ("--accept-implausible", "--force")):
        result = run("calibrate", str(profile), "-H", "h100-sxm", "--out", str(out), *extra)
        assert "Traceback" not in result.stderr
        assert not re.search(r"\d{16}", result.stdout + result.stderr), extra
        if extra == ("--accept-implausible",):
            assert result.returncode == 2 and "> 1000%" in result.stderr


def test_calibrate_keeps_accepted_problems() -> None:
    """In the library, accept_implausible keeps the problems in the result."""
    rows = []
    for m in (1, 16, 64, 256, 1024, 4096):
        for k, n in ((4096, 4096), (4096, 14336), (14336, 4096)):
            memory = (k * n * 2 + m * (k + n) * 2) / (0.8 * 3.35e12)
            rows.append({"model": "x", "tp": 1, "op": f"g{k}x{n}", "op_class": "gemm",
                         "dtype": "bf16", "m": m, "k": k, "n": n, "count": 1, "batch": 0,
                         "context": 0, "queries": 0, "mask": "none", "kv_heads": 0,
                         "time_s": 1e3 * (5e-6 + max(memory, 2 * m * k * n / (0.6 * 989e12)))})
    points = pd.DataFrame(rows)
    hw = load_hardware("h100-sxm")
    with pytest.raises(ImplausibleCalibration):
        calibrate(points, hw, source="x")
    result = calibrate(points, hw, source="x", accept_implausible=True,
                       accept_worse=True)
    assert result.problems and result.problems[0].startswith("time_s (gemm kernels")

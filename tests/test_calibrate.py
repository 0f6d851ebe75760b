"""Calibration end to end: profile a tiny model on this CPU, fit, predict the held-out points;
recover known factors from synthetic measurements; fit the real A100/A40 tables; and bad
profiles fail with one line and write nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.errors import SpecError
from specsim.measurement.backends import point_bytes
from specsim.measurement.calibrate import calibrate, calibrated_yaml, holdout_summary
from specsim.measurement.profile_csv import read_profile, write_profile
from specsim.measurement.profiling import (
    ProfilePoint,
    make_backend,
    plan_profile,
    profile_metadata,
    run_profile,
    tiny_model,
)
from specsim.measurement.tables import from_specsim, from_vidur
from specsim.specs.hardware import load_hardware
from specsim.specs.io import read_yaml
from specsim.specs.outputs import write_yaml
from tests.conftest import requires_vidur, vidur_dir
from tests.test_cli import run

# A nominal CPU profile: the fit only needs an anchor; its factors absorb the real rates. Its
# numbers are no datasheet (a real CPU's GEMMs from cache may beat them), so the tests of a
# real CPU profile accept what the physics checks of a GPU would refuse.
NOMINAL_CPU = {
    "name": "nominal CPU", "vendor": "test",
    "memory": {"hbm_capacity_GB": 24, "hbm_bandwidth_GB_per_s": 20,
               "source": "nominal anchor for the test"},
    "compute": {"dense_TFLOPS": {"fp32": 0.1}, "source": "nominal anchor for the test"},
    "interconnect": {"name": "none", "bandwidth_GB_per_s": 1, "latency_us": 0,
                     "source": "nominal anchor for the test"},
    "pcie": {"bandwidth_GB_per_s": 1, "source": "nominal anchor for the test"},
}


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real numpy profile of the tiny model's shapes on this CPU (a few seconds)."""
    model = tiny_model()
    backend = make_backend("numpy")
    frame = run_profile(plan_profile(model, tp=1, quick=True), backend, repeats=15, warmup=3)
    path = tmp_path_factory.mktemp("profile") / "tiny.csv"
    write_profile(frame, path, profile_metadata(model, tp=1, backend=backend, repeats=15,
                                                warmup=3, command="test"))
    return path


@pytest.fixture
def cpu_hardware(write_yaml) -> Path:  # type: ignore[no-untyped-def]
    return write_yaml("cpu.yaml", NOMINAL_CPU)


# The device the synthetic profile describes: 40% of the nominal bandwidth, 30% of its flops,
# a 20 us floor per kernel, and 5% log-normal noise on every timed run.
_TRUE_BANDWIDTH, _TRUE_FLOPS, _TRUE_FLOOR_S, _NOISE = 0.4, 0.3, 20e-6, 0.05


class _SyntheticBackend:
    """Times each kernel by the roofline of a known device, with seeded noise (no clock)."""

    name, device_name, dtype = "synthetic", "synthetic CPU", "fp32"

    def __init__(self) -> None:
        self._rng = np.random.default_rng(2024)

    def versions(self) -> dict[str, str]:
        return {}

    def notes(self) -> dict[str, str]:
        return {}

    def time_s(self, point: ProfilePoint, *, repeats: int, warmup: int) -> np.ndarray:
        if point.op_class == "gemm":  # 4-byte weights, inputs and outputs; 2 m k n flops
            bytes_ = 4.0 * point.count * (point.m * point.k + point.k * point.n
                                          + point.m * point.n)
            flops = 2.0 * point.count * point.m * point.k * point.n
        else:
            bytes_, flops = point_bytes(point, 4.0), 0.0
        exact = _TRUE_FLOOR_S + max(bytes_ / (_TRUE_BANDWIDTH * 20e9),
                                    flops / (_TRUE_FLOPS * 0.1e12))
        return exact * np.exp(self._rng.normal(0.0, _NOISE, repeats))


@pytest.fixture(scope="module")
def synthetic_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, backend = tiny_model(), _SyntheticBackend()
    frame = run_profile(plan_profile(model, tp=1, quick=True), backend, repeats=15, warmup=0)
    path = tmp_path_factory.mktemp("profile") / "synthetic.csv"
    write_profile(frame, path, profile_metadata(model, tp=1, backend=backend, repeats=15,
                                                warmup=0, command="test"))
    return path


def test_profile_calibrate_predict_recovers_a_known_device(synthetic_profile: Path,
                                                           cpu_hardware: Path) -> None:
    """Fit on two thirds of each kernel's grid of a synthetic profile, predict the other third.

    The profile is a known roofline (40% of the bandwidth, 30% of the flops, a 20 us floor)
    with 5% noise per run, medians of 15 runs: the fitted model must predict the held-out layer
    GEMM time within 5% (the noise of a median is about 1.6%), where the nominal numbers are
    off by more than half (they are 2.5x too fast when memory-bound).
    """
    points, _ = from_specsim(synthetic_profile)
    result = calibrate(points, load_hardware(str(cpu_hardware)), source="test")
    held = result.layer_errors[result.layer_errors["split"] == "holdout"]
    calibrated, nominal = float(held["mape_calibrated"].iloc[0]), float(
        held["mape_datasheet"].iloc[0])
    assert calibrated < 5 and nominal > 50
    # The figure's data: every GEMM point's measured time, summed per layer and token count.
    gemm_points = result.points[result.points["op_class"] == "gemm"]
    assert result.layer_sums["time_s"].sum() == pytest.approx(gemm_points["time_s"].sum())
    assert len(result.layer_sums) == len(gemm_points.groupby(["model", "tp", "m"]))
    gemm = result.hardware.efficiency.gemm
    assert gemm.bandwidth == pytest.approx(_TRUE_BANDWIDTH, rel=0.1)
    assert gemm.flops == pytest.approx(_TRUE_FLOPS, rel=0.1)
    assert gemm.floor_s == pytest.approx(_TRUE_FLOOR_S, rel=0.1)


def test_cpu_profile_calibrate_predict_runs(cpu_profile: Path, cpu_hardware: Path) -> None:
    """The real CPU harness end to end: a profile of timed kernels calibrates and predicts.

    Structure only: a shared CPU's timings wander, so accuracy is the synthetic test's job.
    """
    points, _ = from_specsim(cpu_profile)
    result = calibrate(points, load_hardware(str(cpu_hardware)), source="test",
                       accept_implausible=True, accept_worse=True)
    assert set(result.points["split"]) == {"train", "holdout"}
    held = result.layer_errors[result.layer_errors["split"] == "holdout"]
    assert len(held) and np.isfinite(held["mape_calibrated"]).all()
    gemm = result.hardware.efficiency.gemm
    assert gemm.bandwidth > 0 and gemm.flops > 0


def test_calibrated_profile_round_trips(cpu_profile: Path, cpu_hardware: Path,
                                        tmp_path: Path) -> None:
    points, _ = from_specsim(cpu_profile)
    hw = load_hardware(str(cpu_hardware))
    result = calibrate(points, hw, source="test run", accept_implausible=True,
                       accept_worse=True)
    out = tmp_path / "calibrated.yaml"
    write_yaml(out, calibrated_yaml(read_yaml(Path(hw.path)), result, source="test run"),
               force=False)
    again = load_hardware(str(out))
    assert again.is_calibrated and again.efficiency == result.hardware.efficiency
    assert again.hbm_bandwidth_bytes_per_s == hw.hbm_bandwidth_bytes_per_s
    assert again.sources["efficiency.gemm.bandwidth"] == "test run"


def _synthetic_attention(bw_eff: float, flops_eff: float, floor_s: float) -> pd.DataFrame:
    """Decode and prefill attention times written from the roofline formula by hand:
    bytes = B (L + q) 2 kvh d 2 + B q 2 h d 2, flops = 4 B q (L + q) h d (bf16, h = 32,
    kvh = 8, d = 128), on an A100's datasheet (2.039 TB/s, 312 TFLOPS)."""
    rows = []
    for batch, queries, context in [(b, q, c) for b in (1, 8, 64) for q in (1, 64, 512)
                                    for c in (0, 1024, 8192)]:
        kv = batch * (context + queries) * 2 * 8 * 128 * 2
        act = batch * queries * 32 * 2 * 128 * 2
        flops = 4 * batch * queries * (context + queries) * 32 * 128
        t = floor_s + max((kv + act) / (2.039e12 * bw_eff), flops / (312e12 * flops_eff))
        rows.append({"model": "synthetic", "tp": 1, "op": "attention_causal",
                     "op_class": "attention", "dtype": "bf16", "m": 0, "k": 32, "n": 128,
                     "count": 1, "batch": batch, "context": context, "queries": queries,
                     "mask": "causal", "kv_heads": 8, "time_s": t})
    return pd.DataFrame(rows)


def _synthetic_gemm() -> pd.DataFrame:
    """GEMMs at 80% of the bandwidth and 70% of peak, with a 4 us floor (hard max)."""
    rows = []
    for k, n in ((4096, 6144), (4096, 28672), (14336, 4096)):
        for m in (1, 8, 64, 128, 256, 512, 1024, 4096):
            memory = 4e-6 + (k * n * 2 + m * (k + n) * 2) / (0.8 * 2.039e12)
            compute = 2 * m * k * n / (0.7 * 312e12)
            rows.append({"model": "synthetic", "tp": 1, "op": f"g{k}x{n}", "op_class": "gemm",
                         "dtype": "bf16", "m": m, "k": k, "n": n, "count": 1, "batch": 0,
                         "context": 0, "queries": 0, "mask": "none", "kv_heads": 0,
                         "time_s": max(memory, compute)})
    return pd.DataFrame(rows)


def test_recovers_known_factors() -> None:
    points = pd.concat([_synthetic_gemm(), _synthetic_attention(0.75, 0.4, 15e-6)],
                       ignore_index=True)
    result = calibrate(points, load_hardware("a100-80g-sxm"), source="synthetic")
    att = result.hardware.efficiency.attention
    assert att.bandwidth == pytest.approx(0.75, rel=0.02)
    assert att.flops == pytest.approx(0.4, rel=0.02)
    assert att.floor_s == pytest.approx(15e-6, rel=0.05)
    gemm = result.hardware.efficiency.gemm
    assert gemm.bandwidth == pytest.approx(0.8, rel=0.03)
    assert gemm.flops == pytest.approx(0.7, rel=0.03)
    held = holdout_summary(result)
    assert held["attention"] < 1.0 and held["gemm"] < 2.0


@requires_vidur
@pytest.mark.parametrize("device, hardware", [("a100", "a100-80g-sxm"), ("a40", "a40")])
def test_vidur_tables_through_the_pipeline(device: str, hardware: str) -> None:
    """Trained on Llama-2-7B, the other models' summed layer GEMM time is predicted within
    the accuracy the GEMM model reaches (tests/test_vidur_calibration.py); the datasheet
    roofline is about 30% off."""
    root = vidur_dir()
    assert root is not None
    points = from_vidur(root, device)
    result = calibrate(points, load_hardware(hardware),
                       train_models=["meta-llama/Llama-2-7b-hf"], source="vidur")
    held = result.layer_errors[result.layer_errors["split"] == "holdout"]
    pooled = np.average(held["mape_calibrated"], weights=held["points"])
    # A100: every model within 4%. A40: 4.2% pooled; two models stay at 4.5-4.6%, the
    # library's per-shape kernel choice (see tests/test_vidur_calibration.py).
    assert pooled <= (4.0 if device == "a100" else 4.3)
    assert (held["mape_calibrated"] <= (4.0 if device == "a100" else 4.7)).all()
    assert (held["mape_datasheet"] > 25).all()


def test_calibration_moves_the_knee_and_shrinks_trees() -> None:
    """The calibrated A100 (fitted to Vidur's tables) bends near 128 tokens, so the best
    trees get smaller than on the datasheet profile."""
    from specsim.forward.cost import forward_time_s
    from specsim.specs.acceptance import constant_profile
    from specsim.specs.drafters import load_drafter
    from specsim.speculation.recommend import recommend
    from specsim.speculation.speedup import Setup

    datasheet = load_hardware("a100-80g-sxm")
    calibrated = load_hardware("calibrated/a100-80g-sxm-vidur")
    drafter = load_drafter("eagle3-llama-3.1-8b")
    t_data = forward_time_s(drafter.target, datasheet, [1, 128])
    t_cal = forward_time_s(drafter.target, calibrated, [1, 128])
    assert t_data[1] / t_data[0] < 1.1 < 1.3 < t_cal[1] / t_cal[0]
    best = {}
    for name, hw in (("datasheet", datasheet), ("calibrated", calibrated)):
        setup = Setup(target=drafter.target, hardware=hw, drafter=drafter, context=1024)
        best[name] = [c.nodes for c in recommend(setup, constant_profile(0.8), [8, 32],
                                                 max_nodes=128).best]
    assert all(c < d for c, d in zip(best["calibrated"], best["datasheet"], strict=True))


BAD_CSV = {
    "empty.csv": "",
    "truncated.csv": "device,backend,model,tp,op,op_class,dtype,m,k,n,count,batch,context,"
                     "queries,mask,time_median_s,time_p10_s,time_p90_s,repeats\n"
                     "cpu,numpy,tiny,1,qkv_proj,gemm,fp32,1,256,512,1,0,0,0,none,2e-05\n",
    "columns.csv": "device,op,time\ncpu,qkv_proj,1e-5\n",
    "nan.csv": "device,backend,model,tp,op,op_class,dtype,m,k,n,count,batch,context,queries,"
               "mask,time_median_s,time_p10_s,time_p90_s,repeats\n"
               "cpu,numpy,tiny,1,qkv_proj,gemm,fp32,1,256,512,1,0,0,0,none,nan,1e-5,3e-5,5\n",
    "negative.csv": "device,backend,model,tp,op,op_class,dtype,m,k,n,count,batch,context,"
                    "queries,mask,time_median_s,time_p10_s,time_p90_s,repeats\n"
                    "cpu,numpy,tiny,1,qkv_proj,gemm,fp32,1,256,512,1,0,0,0,none,-2e-5,-3e-5,"
                    "-1e-5,5\n",
}


@pytest.mark.parametrize("name", sorted(BAD_CSV))
def test_bad_profiles_fail_cleanly(name: str, tmp_path: Path, cpu_hardware: Path) -> None:
    path = tmp_path / name
    path.write_text(BAD_CSV[name])
    out = tmp_path / "out.yaml"
    result = run("calibrate", str(path), "--hardware", str(cpu_hardware), "--out", str(out))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert str(path) in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_profile_of_another_model(cpu_profile: Path, cpu_hardware: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    result = run("calibrate", str(cpu_profile), "--hardware", str(cpu_hardware), "--out",
                 str(out), "--model", "llama-2-7b")
    assert result.returncode == 2 and "was it measured for another model?" in result.stderr
    assert not out.exists()


def test_profile_and_calibrate_commands(tmp_path: Path, cpu_hardware: Path) -> None:
    profile = tmp_path / "p.csv"
    made = run("profile", "--model", "tiny", "--quick", "--device", "cpu", "--repeats", "5",
               "--out", str(profile))
    assert made.returncode == 0, made.stderr
    assert profile.read_text().startswith("# format: specsim profile v1")
    again = run("profile", "--model", "tiny", "--quick", "--out", str(profile))
    assert again.returncode == 2 and "--force" in again.stderr
    out, pred = tmp_path / "cal.yaml", tmp_path / "pred.csv"
    fit = run("calibrate", str(profile), "--hardware", str(cpu_hardware), "--out", str(out),
              "--predictions", str(pred), "--model", "tiny", "--accept-implausible",
              "--accept-worse")
    # --accept-worse: whether a fit of real CPU timings beats the nominal datasheet depends on
    # how loaded this machine is; this test checks that the loop runs and writes, not the fit.
    assert fit.returncode == 0, fit.stderr
    rows = pd.read_csv(pred)
    assert {"measured_s", "predicted_s", "split"} <= set(rows.columns)
    assert set(rows["split"]) == {"train", "holdout"}
    assert load_hardware(str(out)).is_calibrated
    with pytest.raises(SpecError, match="already calibrated"):
        calibrate(from_specsim(profile)[0], load_hardware(str(out)), source="x",
                  accept_implausible=True)


# ---------------------------------------------------------------- which device, and is it better


def test_gpu_product_reads_torch_and_datasheet_names() -> None:
    from specsim.measurement.device_match import device_mismatch, gpu_product

    # torch.cuda.get_device_name strings as torch prints them, and our datasheet names.
    assert gpu_product("NVIDIA H100 80GB HBM3") == gpu_product("NVIDIA H100 SXM5 80GB") == "H100"
    assert gpu_product("NVIDIA L40S") == "L40S" and gpu_product("NVIDIA L40") == "L40"
    assert gpu_product("NVIDIA H200") == "H200" and gpu_product("AMD Instinct MI300X") == "MI300X"
    assert gpu_product("AMD EPYC 7B13 64-Core Processor") is None
    assert device_mismatch("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB") is None
    assert "A100" in (device_mismatch("NVIDIA A100-SXM4-80GB", "NVIDIA H100 SXM5 80GB") or "")
    assert device_mismatch("AMD EPYC", "NVIDIA H100 SXM5 80GB") is not None
    assert device_mismatch("AMD EPYC", "nominal CPU") is None  # nothing to compare


def test_a_cpu_profile_does_not_calibrate_an_h100(cpu_profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "h100.yaml"
    refused = run("calibrate", str(cpu_profile), "--hardware", "h100-sxm", "--out", str(out))
    assert refused.returncode == 2 and "--allow-device-mismatch" in refused.stderr
    assert "not on a GPU named H100" in refused.stderr and not out.exists()


def test_calibrated_profile_is_named_for_the_measured_device(
        cpu_profile: Path, cpu_hardware: Path, tmp_path: Path) -> None:
    out = tmp_path / "cal.yaml"
    fit = run("calibrate", str(cpu_profile), "--hardware", str(cpu_hardware), "--out",
              str(out), "--accept-worse", "--accept-implausible")
    assert fit.returncode == 0, fit.stderr
    device = read_profile(cpu_profile)[1]["device"]
    assert load_hardware(str(out)).name == f"{device} (calibrated; datasheet: nominal CPU)"
    # the same naming from the library, as a notebook calls it
    result = calibrate(from_specsim(cpu_profile)[0], load_hardware(str(cpu_hardware)),
                       source="x", measured_on=device, accept_implausible=True,
                       accept_worse=True)
    assert result.hardware.name == f"{device} (calibrated; datasheet: nominal CPU)"


def test_calibrate_from_a_notebook_refuses_another_device(cpu_profile: Path) -> None:
    """The device check is the library's: calibrate() refuses a CPU profile for an H100
    datasheet, naming the flag that accepts it, and names an accepted result for the CPU."""
    points = from_specsim(cpu_profile)[0]
    with pytest.raises(SpecError, match="not on a GPU named H100.*allow_device_mismatch=True"):
        calibrate(points, load_hardware("h100-sxm"), source="x", measured_on="AMD EPYC 7B13")


def test_worse_than_datasheet_is_the_librarys_refusal(synthetic_profile: Path,
                                                      cpu_hardware: Path,
                                                      tmp_path: Path) -> None:
    """A fit worse than the datasheet is refused by calibrate() itself. The held-out points
    are timed exactly as the nominal datasheet predicts (0% datasheet error) and the training
    points twice as slow: any fit to the training points predicts the held-out ones slower
    than measured, so it is worse than the datasheet there; accept_worse keeps it, warned."""
    from specsim.measurement.calibrate import assign_split, predict_s
    from specsim.measurement.device_match import WorseThanDatasheet, worse_than_datasheet

    hw = load_hardware(str(cpu_hardware))
    points = from_specsim(synthetic_profile)[0].reset_index(drop=True)
    slower = np.where(assign_split(points, None) == "train", 2.0, 1.0)
    points = points.assign(time_s=predict_s(points, hw) * slower)
    with pytest.raises(WorseThanDatasheet, match="holdout MAPE") as refused:
        calibrate(points, hw, source="x", accept_implausible=True)
    assert refused.value.parameter == "accept_worse"
    assert refused.value.calibration.hardware.is_calibrated  # the refused fit, for its report
    kept = calibrate(points, hw, source="x", accept_implausible=True, accept_worse=True)
    assert kept.warnings[0].startswith("the calibrated profile is worse than the datasheet")
    # The command line: --force only overwrites; --accept-worse writes the worse fit.
    frame, meta = read_profile(synthetic_profile)
    for column in ("time_p10_s", "time_median_s", "time_p90_s"):
        frame[column] = points["time_s"].to_numpy()
    profile = tmp_path / "worse.csv"
    write_profile(frame, profile, meta)
    out = tmp_path / "cal.yaml"
    out.write_text("old")
    args = ("calibrate", str(profile), "--hardware", str(cpu_hardware), "--out", str(out),
            "--accept-implausible", "--force")
    refused = run(*args)
    assert refused.returncode == 2 and "worse than the datasheet" in refused.stderr
    assert "pass --accept-worse to keep it; not written" in refused.stderr
    assert out.read_text() == "old"
    written = run(*args, "--accept-worse")
    assert written.returncode == 0, written.stderr
    assert "warning" in written.stderr and load_hardware(str(out)).is_calibrated
    # the rule itself, on an error table derived by hand (weighted by points)
    errors = pd.DataFrame({"split": ["train", "holdout"], "points": [1, 1],
                           "mape_calibrated": [10.0, 30.0], "mape_datasheet": [20.0, 20.0]})
    assert worse_than_datasheet(errors).startswith("holdout MAPE")
    assert worse_than_datasheet(errors.assign(mape_calibrated=[10.0, 20.0])) == ""


def test_overall_mape_weights_each_split_by_its_points() -> None:
    from specsim.measurement.device_match import overall_mape

    # Two splits: training 10% calibrated vs 20% datasheet (better), held out 30% vs 20%.
    errors = pd.DataFrame({"split": ["train", "train", "holdout"], "points": [1, 3, 2],
                           "mape_calibrated": [4.0, 12.0, 30.0],
                           "mape_datasheet": [20.0, 20.0, 20.0]})
    assert overall_mape(errors, "train") == (10.0, 20.0)  # (4 + 3 * 12) / 4
    assert overall_mape(errors, "holdout") == (30.0, 20.0)
    assert overall_mape(errors, "nothing") is None


def test_calibrate_reports_fitted_fractions_and_flags_an_implausible_bandwidth() -> None:
    """The fitted GEMM fractions are printed with what they mean for the GPU, and a fit far
    below what real GPUs stream (75-90% of the datasheet, DESIGN.md section 9) is flagged."""
    from specsim.measurement.device_match import fitted_efficiency as _fitted_efficiency
    from specsim.measurement.device_match import low_bandwidth as _implausible_efficiency

    datasheet = load_hardware("a100-80g-sxm")  # 2,039 GB/s, 312 bf16 TFLOPS (datasheet)
    fitted = _fitted_efficiency(load_hardware("calibrated/a100-80g-sxm-vidur"), datasheet)
    gemm = load_hardware("calibrated/a100-80g-sxm-vidur").efficiency.gemm
    assert fitted["gemm_bandwidth_fraction"] == pytest.approx(gemm.bandwidth)
    assert fitted["gemm_bandwidth_GB_per_s"] == pytest.approx(gemm.bandwidth * 2039)
    assert fitted["gemm_bf16_TFLOPS"] == pytest.approx(gemm.flops * 312)
    assert _implausible_efficiency(fitted, datasheet) == ""
    # A40 kernels (544 GB/s streamed) passed off as an H100's: 544 / 3,350 = 16%.
    slow = {**fitted, "gemm_bandwidth_fraction": 544 / 3350, "gemm_bandwidth_GB_per_s": 544.0}
    why = _implausible_efficiency(slow, load_hardware("h100-sxm"))
    assert "reached 16% of the NVIDIA H100" in why and "(544 of 3,350 GB/s)" in why

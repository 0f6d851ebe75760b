"""Calibration of the GEMM model against Vidur's measured A100/A40 kernel tables.

The tables (Vidur, https://github.com/microsoft/vidur, MIT) are read from
$SPECSIM_VIDUR_DIR or <repo>/../shared/data/vidur_profiles (tests/conftest.py); the tests that
need them skip with one line naming the missing path, except where shared/ is beside the clone
(CI): there a missing table fails `test_tables_are_there_where_shared_is`. Also here: the
reader's handling of malformed files (synthetic CSVs).

Acceptance (train on ONE model, all TP degrees; predict the summed per-layer weight-GEMM time
of every other model on the same GPU, MAPE over all num_tokens and TP degrees). The training
model is Llama-2-7B, the one of the first calibration, kept as it was (not picked by its holdout
error); the tests use no other.
- the datasheet roofline is > 15% off for every model (measured 28-36%; the calibration matters);
- A100: every held-out model <= 4% (measured 2.6-3.8%, pooled 3.2%) - the target is met;
- A40: pooled <= 4.3% and every model <= 4.7% (measured pooled 4.2%, models 3.0-4.6%). The
  target of <= 4% per model is NOT met, and cannot be with this model form: fitted to its own
  rows (no transfer at all) InternLM-20B stays at 4.5% and CodeLlama-34B at 4.3% (tested
  below), and even the parameters that minimize the A40 held-out error itself (a direct search
  over the seven fitted fields) leave 4.0% pooled with those two at 4.3%. The residual is the
  library's per-shape kernel choice: step positions and heights that differ from shape to
  shape and do not carry over between shapes;
- the 3-parameter fit (bandwidth, flops, floor) is ~7.5% and the full model beats it well;
- every fitted term lowers the held-out error on both GPUs (tested for the last, the wave term);
- the repeat-measurement floor is ~2% (Llama-2-70B vs Llama-3-70B: identical GEMM shapes).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.errors import SpecError
from specsim.forward.gemm import gemm_time_s
from specsim.measurement.gemm_fit import GEMM_FIT_PARAMS, fit_gemm_efficiency
from specsim.measurement.vidur import (
    GEMM_OPS,
    gemm_layer_time,
    read_vidur_attention,
    read_vidur_mlp,
)
from specsim.specs.hardware import GemmEfficiency
from tests.conftest import SHARED_DIR, VIDUR_DIR, requires_vidur, vidur_dir

# Datasheets: NVIDIA A100 80GB (2039 GB/s HBM2e, 312 TFLOP/s dense fp16, 108 SMs);
# NVIDIA A40 (696 GB/s GDDR6, 149.7 TFLOP/s dense fp16 tensor, 84 SMs).
DATASHEET = {"a100": (2039e9, 312e12), "a40": (696e9, 149.7e12)}
SM_COUNT = {"a100": 108, "a40": 84}
TRAIN_MODEL = "meta-llama/Llama-2-7b-hf"
# Acceptance: 4% per held-out model; met on the A100, see the module docstring for the A40.
MAX_MODEL_MAPE = {"a100": 0.04, "a40": 0.047}
MAX_POOLED_MAPE = {"a100": 0.04, "a40": 0.043}
MIN_DATASHEET_MAPE = 0.15
WITHOUT_WAVES = tuple(p for p in GEMM_FIT_PARAMS if p != "wave_fraction")


def test_tables_are_there_where_shared_is() -> None:
    """Where shared/ is beside the clone (CI), the ground-truth tests must run, not skip."""
    if SHARED_DIR.is_dir() and "SPECSIM_VIDUR_DIR" not in os.environ:
        assert vidur_dir() is not None, f"{SHARED_DIR} exists but {VIDUR_DIR / 'compute'} does not"


@pytest.fixture(scope="module")
def mlp() -> pd.DataFrame:
    return read_vidur_mlp(VIDUR_DIR)


def _predict(gemms: pd.DataFrame, device: str, eff: GemmEfficiency) -> np.ndarray:
    bandwidth, flops = DATASHEET[device]
    return gemm_time_s(
        gemms["num_tokens"].to_numpy(dtype=float),
        gemms["k"].to_numpy(),
        gemms["n"].to_numpy(),
        weight_bytes_per_param=2.0,
        act_bytes_per_elem=2.0,
        bandwidth_bytes_per_s=bandwidth,
        flops_per_s=flops,
        eff=eff,
    )


def _fit(
    gemms: pd.DataFrame, device: str, params: tuple[str, ...], model: str = TRAIN_MODEL
) -> GemmEfficiency:
    train = gemms[gemms["model"] == model]
    bandwidth, flops = DATASHEET[device]
    eff, diag = fit_gemm_efficiency(
        train["num_tokens"].to_numpy(dtype=float),
        train["k"].to_numpy(),
        train["n"].to_numpy(),
        train["time_s"].to_numpy(),
        weight_bytes_per_param=2.0,
        act_bytes_per_elem=2.0,
        bandwidth_bytes_per_s=bandwidth,
        flops_per_s=flops,
        params=params,
        base=GemmEfficiency(sm_count=SM_COUNT[device]),
    )
    assert diag.converged
    return eff


def _layer_errors(mlp: pd.DataFrame, device: str, eff: GemmEfficiency) -> pd.DataFrame:
    """|predicted / measured - 1| of the summed layer GEMM time at every point of every model."""
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    measured = gemm_layer_time(gemms)
    predicted = gemm_layer_time(gemms.assign(time_s=_predict(gemms, device, eff)))
    return measured.assign(error=np.abs(predicted["time_s"] / measured["time_s"] - 1.0))


def _holdout_errors(mlp: pd.DataFrame, device: str, eff: GemmEfficiency) -> pd.DataFrame:
    """_layer_errors of every model but the training model."""
    errors = _layer_errors(mlp, device, eff)
    return errors[errors["model"] != TRAIN_MODEL]


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
def test_datasheet_roofline_is_far_off_for_every_model(mlp: pd.DataFrame, device: str) -> None:
    errors = _holdout_errors(mlp, device, GemmEfficiency())
    per_model = errors.groupby("model")["error"].mean()
    assert len(per_model) >= 5
    assert per_model.min() > MIN_DATASHEET_MAPE


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
def test_calibrated_on_llama2_7b_predicts_every_other_model(mlp: pd.DataFrame, device: str) -> None:
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    eff = _fit(gemms, device, GEMM_FIT_PARAMS)
    errors = _holdout_errors(mlp, device, eff)
    per_model = errors.groupby("model")["error"].mean()
    assert len(per_model) == gemms["model"].nunique() - 1
    assert per_model.max() <= MAX_MODEL_MAPE[device], per_model.to_dict()
    assert errors["error"].mean() <= MAX_POOLED_MAPE[device]
    # The fitted terms are physical: effective fractions below the datasheet, a floor of
    # microseconds, an imperfect overlap, partial tile and wave quantization.
    assert 0.6 < eff.bandwidth < 1.0 and 0.6 < eff.flops < 1.0
    assert 1e-6 < eff.floor_s < 2e-5
    assert 1.0 < eff.overlap_p < 4.0 and 0.2 < eff.tile_fraction < 0.8
    assert 0.02 < eff.wave_fraction < 0.5 and eff.sm_count == SM_COUNT[device]


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
def test_full_model_beats_three_parameter_fit(mlp: pd.DataFrame, device: str) -> None:
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    three = _holdout_errors(mlp, device, _fit(gemms, device, ("bandwidth", "flops", "floor_s")))
    full = _holdout_errors(mlp, device, _fit(gemms, device, GEMM_FIT_PARAMS))
    assert three["error"].mean() > 0.06
    assert full["error"].mean() < 0.6 * three["error"].mean()


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
def test_wave_term_lowers_the_holdout_error(mlp: pd.DataFrame, device: str) -> None:
    # Measured (pooled): A100 3.25% -> 3.16%, worst model 4.2% -> 3.8%; A40 4.32% -> 4.19%.
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    without = _holdout_errors(mlp, device, _fit(gemms, device, WITHOUT_WAVES))
    full = _holdout_errors(mlp, device, _fit(gemms, device, GEMM_FIT_PARAMS))
    assert full["error"].mean() < without["error"].mean() - 0.0005
    worst_without = without.groupby("model")["error"].mean().max()
    assert full.groupby("model")["error"].mean().max() < worst_without


@requires_vidur
@pytest.mark.parametrize(
    ("device", "model", "low", "high"),
    [
        # The A40 gap is the model form, not the transfer: fitted to their own rows these two
        # stay above 4% (measured 4.49% and 4.34%), while on the A100 the same model reaches
        # 3.55%.
        ("a40", "internlm/internlm-20b", 0.042, 0.048),
        ("a40", "codellama/CodeLlama-34b-Instruct-hf", 0.041, 0.047),
        ("a100", "internlm/internlm-20b", 0.03, 0.04),
    ],
)
def test_model_fitted_to_its_own_rows(
    mlp: pd.DataFrame, device: str, model: str, low: float, high: float
) -> None:
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    errors = _layer_errors(mlp, device, _fit(gemms, device, GEMM_FIT_PARAMS, model))
    assert low < errors.loc[errors["model"] == model, "error"].mean() < high


@requires_vidur
def test_repeat_measurement_floor_is_about_two_percent(mlp: pd.DataFrame) -> None:
    # Llama-2-70B and Llama-3-70B have identical per-GPU GEMM shapes on the A100.
    layer = gemm_layer_time(mlp[(mlp["device"] == "a100") & mlp["op"].isin(GEMM_OPS)])
    by_point = layer.set_index(["model", "tp", "num_tokens"])["time_s"]
    a = by_point.loc["meta-llama/Llama-2-70b-hf"]
    b = by_point.loc["meta-llama/Meta-Llama-3-70B"].reindex(a.index)
    assert 0.01 < float(np.mean(np.abs(b / a - 1.0))) < 0.03


# --- reader: real tables ---------------------------------------------------------------------


def _shard(mlp: pd.DataFrame, device: str, model: str, tp: int, op: str) -> set[tuple[int, int]]:
    """The distinct (k, n) of one GEMM of one model at one TP degree."""
    rows = mlp[
        (mlp["device"] == device) & (mlp["model"] == model) & (mlp["tp"] == tp) & (mlp["op"] == op)
    ]
    return {(int(k), int(n)) for k, n in zip(rows["k"], rows["n"], strict=True)}


@requires_vidur
def test_reader_shard_shapes_follow_the_readme(mlp: pd.DataFrame) -> None:
    # Llama-2-7B, TP 2: QKV 4096 x (32 + 2*32) * 128 / 2; gate+up 4096 x 2 * 11008 / 2.
    assert _shard(mlp, "a100", TRAIN_MODEL, 2, "attn_pre_proj") == {(4096, 6144)}
    assert _shard(mlp, "a100", TRAIN_MODEL, 2, "mlp_up_proj") == {(4096, 11008)}
    assert _shard(mlp, "a100", TRAIN_MODEL, 2, "attn_post_proj") == {(2048, 4096)}
    assert _shard(mlp, "a100", TRAIN_MODEL, 2, "mlp_down_proj") == {(5504, 4096)}
    # Llama-3-70B, TP 8: QKV 8192 x (64 + 2*8) * 128 / 8 = 1280.
    assert _shard(mlp, "a100", "meta-llama/Meta-Llama-3-70B", 8, "attn_pre_proj") == {(8192, 1280)}
    # phi-2 has a plain (non-gated) MLP: up projection 2560 x 10240.
    assert _shard(mlp, "a40", "microsoft/phi-2", 1, "mlp_up_proj") == {(2560, 10240)}
    assert mlp.loc[mlp["op"] == "mlp_act", "k"].isna().all()


@requires_vidur
def test_reader_converts_ms_to_s_and_averages_duplicate_grid_points(mlp: pd.DataFrame) -> None:
    raw = pd.read_csv(VIDUR_DIR / "compute" / "a40" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv")
    raw = raw[raw["num_tensor_parallel_workers"] == 4]
    tidy = mlp[(mlp["device"] == "a40") & (mlp["model"] == TRAIN_MODEL) & (mlp["tp"] == 4)]
    down = tidy[tidy["op"] == "mlp_down_proj"]
    at_2048 = down[down["num_tokens"] == 2048]
    at_1 = down[down["num_tokens"] == 1]
    dup = raw[raw["num_tokens"] == 2048]["time_stats.mlp_down_proj.median"].to_numpy()
    assert len(dup) == 2 and at_2048["n_measurements"].tolist() == [2]
    assert float(at_2048["time_s"].iloc[0]) == pytest.approx(dup.mean() * 1e-3, rel=1e-12)
    one = raw[raw["num_tokens"] == 1]["time_stats.mlp_down_proj.median"].to_numpy()
    assert float(at_1["time_s"].iloc[0]) == pytest.approx(float(one[0]) * 1e-3, rel=1e-12)
    low, mid, high = (float(at_1[c].iloc[0]) for c in ("time_min_s", "time_s", "time_max_s"))
    assert low <= mid <= high
    assert not tidy.duplicated(["op", "num_tokens"]).any()


@requires_vidur
def test_attention_reader_is_tidy_and_in_seconds() -> None:
    attn = read_vidur_attention(VIDUR_DIR / "attention_a100_llama70b_tp2.csv")
    assert set(attn["q_heads"]) == {32} and set(attn["kv_heads"]) == {4}
    decode = attn[~attn["is_prefill"]]
    assert set(decode["batch_size"]) == set(range(1, 129))
    assert not attn.duplicated(
        ["is_prefill", "batch_size", "prefill_chunk_size", "kv_cache_size"]
    ).any()
    # README: decode attention at batch 1 has a floor of roughly 15 us whatever the KV length.
    floor = decode[decode["batch_size"] == 1]["time_s"]
    assert 10e-6 < floor.min() and floor.max() < 25e-6


# --- reader: malformed files -----------------------------------------------------------------

_SHAPE_ROW = {
    "n_head": 32,
    "n_kv_head": 8,
    "n_embd": 4096,
    "n_expanded_embd": 14336,
    "vocab_size": 128256,
    "use_gated_mlp": True,
    "num_tokens": 16,
    "num_tensor_parallel_workers": 2,
}


def _write_mlp(root: Path, frame: pd.DataFrame) -> Path:
    path = root / "compute" / "a100" / "org" / "model" / "mlp.csv"
    path.parent.mkdir(parents=True)
    frame.to_csv(path, index=False)
    return path


def _valid_frame() -> pd.DataFrame:
    row: dict[str, object] = dict(_SHAPE_ROW)
    for i, op in enumerate(GEMM_OPS + ("add",)):
        for stat, ms in (("min", 0.01), ("max", 0.03), ("mean", 0.02), ("median", 0.02)):
            row[f"time_stats.{op}.{stat}"] = ms * (i + 1)
    return pd.DataFrame([row])


def test_reader_accepts_a_minimal_valid_file(tmp_path: Path) -> None:
    _write_mlp(tmp_path, _valid_frame())
    tidy = read_vidur_mlp(tmp_path, device="a100")
    qkv = tidy[tidy["op"] == "attn_pre_proj"].iloc[0]
    assert (qkv["model"], qkv["tp"], qkv["k"], qkv["n"]) == ("org/model", 2, 4096, 3072)
    assert qkv["time_s"] == pytest.approx(2e-5)  # 0.02 ms
    assert set(tidy["op"]) == set(GEMM_OPS) | {"add"}


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        ("time_stats.mlp_up_proj.median", None, "missing column 'time_stats.mlp_up_proj.median'"),
        ("n_embd", None, "missing column 'n_embd'"),
        ("time_stats.attn_post_proj.median", float("nan"), "'time_stats.attn_post_proj.median'"),
        ("time_stats.mlp_down_proj.min", -0.5, "'time_stats.mlp_down_proj.min' row 2"),
        ("num_tokens", 0, "'num_tokens'"),
        ("use_gated_mlp", "maybe", "'use_gated_mlp'"),
        ("n_head", 3, "n_embd / n_head"),
    ],
)
def test_reader_rejects_malformed_mlp_file(
    tmp_path: Path, column: str, value: object, match: str
) -> None:
    frame = _valid_frame()
    if value is None:
        frame = frame.drop(columns=column)
    else:
        frame = frame.assign(**{column: pd.Series([value])})
    path = _write_mlp(tmp_path, frame)
    with pytest.raises(SpecError, match=match) as info:
        read_vidur_mlp(tmp_path)
    assert str(path) in str(info.value)


def test_reader_rejects_empty_files(tmp_path: Path) -> None:
    path = _write_mlp(tmp_path, _valid_frame().iloc[:0])
    with pytest.raises(SpecError, match="no data rows"):
        read_vidur_mlp(tmp_path)
    path.write_text("")
    with pytest.raises(SpecError, match=str(path)):
        read_vidur_mlp(tmp_path)


def test_reader_rejects_a_folder_without_tables(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no <device>/<org>/<model>/mlp.csv"):
        read_vidur_mlp(tmp_path, device="h100")


def test_attention_reader_rejects_missing_column_and_negative_time(tmp_path: Path) -> None:
    row = {
        "device": "a100",
        "tensor_parallel": 2,
        "n_embd": 8192,
        "n_q_head": 64,
        "n_kv_head": 8,
        "head_dim": 128,
        "is_prefill": 0,
        "batch_size": 1,
        "prefill_chunk_size": 0,
        "kv_cache_size": 32,
        "time_ms": 0.015,
        "input_reshape_ms": 0.0,
        "output_reshape_ms": 0.001,
    }
    path = tmp_path / "attention.csv"
    pd.DataFrame([row]).to_csv(path, index=False)
    assert read_vidur_attention(path)["time_s"].iloc[0] == pytest.approx(15e-6)
    pd.DataFrame([{**row, "time_ms": -1.0}]).to_csv(path, index=False)
    with pytest.raises(SpecError, match="'time_ms' row 2"):
        read_vidur_attention(path)
    pd.DataFrame([row]).drop(columns="kv_cache_size").to_csv(path, index=False)
    with pytest.raises(SpecError, match="missing column 'kv_cache_size'"):
        read_vidur_attention(path)


# --- issue 12: physical parameters, regions, smallest-to-largest, transfer, attention ----------

SMALLEST, LARGEST = "microsoft/phi-2", ("Qwen/Qwen-72B", "meta-llama/Llama-2-70b-hf")


def _fit_models(gemms: pd.DataFrame, device: str, models: list[str]) -> GemmEfficiency:
    from specsim.measurement.calibrate import cross_gpu_priors

    train = gemms[gemms["model"].isin(models)]
    bandwidth, flops = DATASHEET[device]
    eff, diag = fit_gemm_efficiency(
        train["num_tokens"].to_numpy(dtype=float), train["k"].to_numpy(), train["n"].to_numpy(),
        train["time_s"].to_numpy(), weight_bytes_per_param=2.0, act_bytes_per_elem=2.0,
        bandwidth_bytes_per_s=bandwidth, flops_per_s=flops,
        base=GemmEfficiency(sm_count=SM_COUNT[device]), priors=cross_gpu_priors(SM_COUNT[device]))
    assert diag.converged and diag.kept_priors == ()  # these tables identify every field
    return eff


def _region(errors: pd.DataFrame, low: float, high: float) -> float:
    rows = errors[(errors["num_tokens"] > low) & (errors["num_tokens"] <= high)]
    return float(rows["error"].mean())


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
@pytest.mark.parametrize("train", [[TRAIN_MODEL], [SMALLEST], [TRAIN_MODEL, SMALLEST]])
def test_fitted_parameters_are_physical(mlp: pd.DataFrame, device: str, train: list[str]) -> None:
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    eff = _fit_models(gemms, device, train)
    assert 0.5 < eff.bandwidth <= 1.0 and 0.5 < eff.flops <= 1.0
    assert eff.floor_s >= 0.0 and eff.epilogue_k >= 0.0


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
def test_decode_region_error_on_held_out_models(mlp: pd.DataFrame, device: str) -> None:
    # Target n <= 64 within 6%: measured 5.1% (A100) and 3.6% (A40) trained on Llama-2-7B.
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    errors = _holdout_errors(mlp, device, _fit_models(gemms, device, [TRAIN_MODEL]))
    assert _region(errors, 0, 64) <= 0.06
    assert _region(errors, 512, np.inf) <= 0.04


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
def test_the_training_model_is_fitted_in_the_decode_region(mlp: pd.DataFrame, device: str
                                                           ) -> None:
    """Issue 24: the fit must not fail its own training data where speculation runs. Trained
    on Llama-2-7B against each GPU's own datasheet (the A100 80GB's 2,039 GB/s; Vidur's A100
    is the 80GB part), its own layer GEMMs at n <= 64 come within 5%: measured 2.2% (A100) and
    4.8% (A40)."""
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    errors = _layer_errors(mlp, device, _fit_models(gemms, device, [TRAIN_MODEL]))
    assert _region(errors[errors["model"] == TRAIN_MODEL], 0, 64) <= 0.05


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
def test_trained_on_the_smallest_model_predicts_the_largest(mlp: pd.DataFrame, device: str
                                                             ) -> None:
    # phi-2 (2.7B; shards of 3-50 MB) -> Qwen-72B and Llama-2-70B (shards up to 940 MB).
    # Measured: A100 4.4% and 3.6%, A40 4.4% and 3.8%; decode region <= 5.5%.
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    errors = _layer_errors(mlp, device, _fit_models(gemms, device, [SMALLEST]))
    for model in LARGEST:
        rows = errors[errors["model"] == model]
        assert rows["error"].mean() <= 0.045, (model, rows["error"].mean())
        assert _region(rows, 0, 64) <= 0.06


@requires_vidur
@pytest.mark.parametrize("device", ["a100", "a40"])
def test_held_out_by_weight_matrix_size(mlp: pd.DataFrame, device: str) -> None:
    # Train on every GEMM whose weight shard is < 64 MB, predict the larger ones: 5.0% (A100)
    # and 6.1% (A40) per single GEMM, against 4.8% and 5.9% for a fit that saw them.
    gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
    size = gemms["k"] * gemms["n"] * 2.0
    small, large = gemms[size < 64e6], gemms[size >= 64e6]
    eff = _fit_models(small.assign(model="small"), device, ["small"])
    seen = _fit_models(gemms.assign(model="all"), device, ["all"])
    held = np.abs(_predict(large, device, eff) / large["time_s"].to_numpy() - 1.0).mean()
    fitted = np.abs(_predict(large, device, seen) / large["time_s"].to_numpy() - 1.0).mean()
    assert held <= fitted + 0.01
    assert held <= 0.065


def _transfer_errors(mlp: pd.DataFrame, source: str, target: str,
                     own_fractions: bool = False) -> pd.DataFrame:
    """Fit every model of `source`; apply its terms to `target`'s datasheet (its SM count)."""
    src = mlp[(mlp["device"] == source) & mlp["op"].isin(GEMM_OPS)]
    eff = _fit_models(src, source, sorted(src["model"].unique()))
    eff = dataclasses.replace(eff, sm_count=SM_COUNT[target])
    if own_fractions:
        dst = mlp[(mlp["device"] == target) & mlp["op"].isin(GEMM_OPS)]
        own = _fit_models(dst, target, sorted(dst["model"].unique()))
        eff = dataclasses.replace(eff, bandwidth=own.bandwidth, flops=own.flops)
    return _layer_errors(mlp, target, eff)


@requires_vidur
@pytest.mark.parametrize(("source", "target", "measured"),
                         [("a100", "a40", 0.064), ("a40", "a100", 0.059)])
def test_transfer_to_a_gpu_without_measurements(mlp: pd.DataFrame, source: str, target: str,
                                                measured: float) -> None:
    # Leave one GPU out entirely: the transferred terms predict it within 6.4% / 5.9%
    # (the datasheet alone: ~30%); with its own bandwidth and flops fractions put back, the
    # shape terms carry over (<= 4.5%). The error is in those two fractions.
    errors = _transfer_errors(mlp, source, target)
    assert errors["error"].mean() == pytest.approx(measured, abs=0.004)
    assert _region(errors, 0, 64) <= 0.06
    assert _transfer_errors(mlp, source, target, own_fractions=True)["error"].mean() <= 0.045


@requires_vidur
def test_the_transferred_profile_states_its_leave_one_gpu_out_error(mlp: pd.DataFrame) -> None:
    # What `specsim hardware show` prints for a GPU without tables (EXPECTED_ERROR_PCT, and
    # the text built from it) is the error of a datasheet GPU's kernel model (the calibrated
    # A100's GEMM model, with the GPU's SM count) on the A40's tables, held out entirely, to
    # 0.05; and that model is the calibrated A100 profile's, number for number.
    from specsim.specs.hardware import datasheet_gemm, load_hardware
    from specsim.specs.transferred import EXPECTED_ERROR_PCT, expected_error_text

    a100 = load_hardware("calibrated/a100-80g-sxm-vidur").efficiency.gemm
    assert datasheet_gemm(SM_COUNT["a40"]) == dataclasses.replace(a100, sm_count=84)
    errors = _layer_errors(mlp, "a40", datasheet_gemm(SM_COUNT["a40"]))
    pooled, small = 100 * float(errors["error"].mean()), 100 * _region(errors, 0, 64)
    assert pooled == pytest.approx(EXPECTED_ERROR_PCT["pooled"], abs=0.05)
    assert small == pytest.approx(EXPECTED_ERROR_PCT["n<=64"], abs=0.05)
    text = expected_error_text()
    assert f"{pooled:.1f}% ({small:.1f}% at n <= 64)" in text


@requires_vidur
@pytest.mark.xfail(strict=True, reason="target <= 4% on a GPU held out entirely is NOT met "
                   "(6.4% / 5.9%): the bandwidth and flops fractions differ between the A100 "
                   "(0.80 / 0.75) and the A40 (0.76 / 0.79), and two GPUs cannot predict them")
def test_transfer_target_of_four_percent(mlp: pd.DataFrame) -> None:
    for source, target in (("a100", "a40"), ("a40", "a100")):
        assert _transfer_errors(mlp, source, target)["error"].mean() <= 0.04


@requires_vidur
def test_transferred_constants_are_the_mean_of_the_two_gpus(mlp: pd.DataFrame) -> None:
    from specsim.specs.transferred import TRANSFERRED_GEMM

    fits = []
    for device in ("a100", "a40"):
        gemms = mlp[(mlp["device"] == device) & mlp["op"].isin(GEMM_OPS)]
        fits.append(_fit_models(gemms, device, sorted(gemms["model"].unique())))
    for name, tol in (("bandwidth", 0.01), ("flops", 0.01), ("tile_fraction", 0.02),
                      ("overlap_p", 0.1), ("epilogue_k", 5.0), ("wave_fraction", 0.02)):
        mean = np.mean([getattr(f, name) for f in fits])
        assert getattr(TRANSFERRED_GEMM, name) == pytest.approx(mean, abs=tol), name
    assert TRANSFERRED_GEMM.floor_s == pytest.approx(np.mean([f.floor_s for f in fits]),
                                                     rel=0.1)


@requires_vidur
def test_attention_calibration_is_physical_and_measured() -> None:
    from specsim.measurement.calibrate import calibrate
    from specsim.measurement.tables import from_vidur
    from specsim.specs.hardware import load_hardware

    result = calibrate(from_vidur(VIDUR_DIR, "a100"), load_hardware("a100-80g-sxm"),
                       train_models=[TRAIN_MODEL], source="test")
    att = result.hardware.efficiency.attention
    assert att.bandwidth <= 1.0 and att.flops <= 1.0 and att.floor_s > 0
    points = result.points[(result.points["op_class"] == "attention")
                           & (result.points["split"] == "holdout")]
    error = (points["predicted_s"] / points["time_s"] - 1.0).abs()
    # Measured 11.4% decode, 9.9% prefill (datasheet 48%); the 6% target is not met.
    assert error.mean() <= 0.12
    assert "region" in result.region_errors.columns
    assert set(result.region_errors["region"]) == {"n<=64", "65-512", ">512"}
    assert "weight_size" in result.size_errors.columns

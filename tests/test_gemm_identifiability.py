"""Which GEMM fields the points determine, and what the fit says about the ones they do not.

Issue 24: calibrating Vidur's A100 tables against a datasheet the kernels beat (the A100 40GB
sheet, 1,555 GB/s, while the tables stream 1,755 GB/s) printed 'gemm.bandwidth: the points do not
identify it (100% of its uncertainty is the prior's): kept the prior 0.78', and the per-layer
GEMM time at n <= 64 came out 14-27% too slow on every model, the training model included
(20.2%). The fit had found the bandwidth; the check misread it. Bandwidth and flops were
fitted through a logistic, which flattens towards a fraction of 1, so d(log time)/d(variable)
vanished there and prior_share called a well-measured field unidentified (a synthetic GPU at
0.97 of its bandwidth: 55%, kept 0.78, 5% training error). They are now fitted as logs with a
hard bound at 1, and the prior is a Gaussian in those units.

Two kinds of tests: synthetic GPUs drawn from the same formula family the fit assumes
(`gemm_time_s`), with parameters unlike the cross-GPU priors (0.78 bandwidth, 0.77 flops, 4 us
floor; specsim/specs/transferred.py), fitted from points at n <= 64 alone; and Vidur's measured
A100/A40 tables (github.com/microsoft/vidur, MIT; tests/conftest.py says where they are).
"""

from __future__ import annotations

import math
from typing import TypedDict

import numpy as np
import pandas as pd
import pytest

from specsim.forward.gemm import FloatArray, gemm_time_s
from specsim.measurement.calibrate import calibrate, cross_gpu_priors
from specsim.measurement.gemm_fit import (
    UNIDENTIFIED_PRIOR_SHARE,
    fit_gemm_efficiency,
    points_only_spread,
    prior_share,
    ridge_tokens,
)
from specsim.measurement.tables import from_vidur
from specsim.specs.hardware import GemmEfficiency, load_hardware
from tests.conftest import VIDUR_DIR, requires_vidur


class Sheet(TypedDict):
    """Datasheet and dtype keywords of gemm_time_s and fit_gemm_efficiency."""

    weight_bytes_per_param: float
    act_bytes_per_elem: float
    bandwidth_bytes_per_s: float
    flops_per_s: float


def _sheet(bandwidth_bytes_per_s: float, flops_per_s: float) -> Sheet:
    return Sheet(weight_bytes_per_param=2.0, act_bytes_per_elem=2.0,
                 bandwidth_bytes_per_s=bandwidth_bytes_per_s, flops_per_s=flops_per_s)


# NVIDIA A100 80GB SXM datasheet: 2,039 GB/s HBM2e, 312 TFLOP/s dense fp16, 108 SMs.
A100 = _sheet(2039e9, 312e12)
A100_SMS = 108
# Llama-2-7B's four weight GEMMs per layer (QKV, output projection, fused gate+up, down) at
# TP 1, 2, 4, 8, the shapes of Vidur's Llama-2-7B table: shards of 4.2-180 MB.
D, FF = 4096, 11008
SHAPES = [shape for tp in (1, 2, 4, 8)
          for shape in ((D, 3 * D // tp), (D // tp, D), (D, 2 * FF // tp), (FF // tp, D))]
# Vidur's token grid up to 64: 1, 2, 4, 8, then every 8 (README of the tables).
DECODE_TOKENS = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 40.0, 48.0, 56.0, 64.0])
NOISE = 0.01  # 1% log-normal measurement noise (Vidur's repeats of one shape differ by ~2%)


def _decode_points(truth: GemmEfficiency, sheet: Sheet, seed: int
                   ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """m, k, n and noisy times of every shape at n <= 64 on a GPU with these true terms."""
    m = np.tile(DECODE_TOKENS, len(SHAPES))
    k = np.repeat([float(s[0]) for s in SHAPES], DECODE_TOKENS.size)
    n = np.repeat([float(s[1]) for s in SHAPES], DECODE_TOKENS.size)
    noise = np.exp(NOISE * np.random.default_rng(seed).standard_normal(m.size))
    return m, k, n, gemm_time_s(m, k, n, **sheet, eff=truth) * noise


# A synthetic GPU whose ridge lies inside n <= 64, so that its decode-region points hold both
# regimes: 4 TB/s of memory and 150 TFLOP/s of fp16 at fractions 0.96 / 0.55 put it at
# 0.55 x 150e12 x 2 B / (2 x 0.96 x 4e12 B/s) = 21.5 tokens: n = 1-8 memory-bound, 32-64
# compute-bound. Every term is unlike the cross-GPU values (0.78 / 0.77 / 4 us; overlap 2.6,
# tile 0.67, epilogue 112, wave 0.19). Before the fix this GPU's bandwidth came back as the
# prior, 0.78 (51-61% 'of its uncertainty the prior's' on these seeds).
SYNTHETIC = _sheet(4e12, 150e12)
SYNTHETIC_SMS = 96
SYNTHETIC_TRUTH = GemmEfficiency(bandwidth=0.96, flops=0.55, floor_s=9e-6, overlap_p=1.6,
                                 tile_fraction=0.3, epilogue_k=40.0, sm_count=SYNTHETIC_SMS,
                                 wave_fraction=0.35)
RECOVERED = 0.02  # the tolerance on bandwidth, flops and floor


def _fit(m: FloatArray, k: FloatArray, n: FloatArray, t: FloatArray, sheet: Sheet,
         sm_count: int):  # type: ignore[no-untyped-def]
    return fit_gemm_efficiency(m, k, n, t, **sheet, base=GemmEfficiency(sm_count=sm_count),
                               priors=cross_gpu_priors(sm_count))


def test_the_synthetic_gpu_ridge_is_inside_the_decode_region() -> None:
    ridge = ridge_tokens(SYNTHETIC_TRUTH, bandwidth_bytes_per_s=4e12, flops_per_s=150e12,
                         weight_bytes_per_param=2.0)
    assert ridge == pytest.approx(0.55 * 150e12 * 2 / (2 * 0.96 * 4e12), rel=1e-12)
    assert ridge == pytest.approx(21.48, abs=0.01)
    # At the cross-GPU fractions on an A100 it is far outside: 0.77 x 312e12 / (0.78 x 2039e9).
    transferred = cross_gpu_priors(A100_SMS)
    a100_ridge = ridge_tokens(GemmEfficiency(bandwidth=transferred["bandwidth"].value,
                                             flops=transferred["flops"].value),
                              bandwidth_bytes_per_s=2039e9, flops_per_s=312e12,
                              weight_bytes_per_param=2.0)
    assert a100_ridge == pytest.approx(151.1, abs=0.1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bandwidth_flops_and_floor_are_recovered_from_decode_points_alone(seed: int) -> None:
    m, k, n, t = _decode_points(SYNTHETIC_TRUTH, SYNTHETIC, seed)
    eff, diag = _fit(m, k, n, t, SYNTHETIC, SYNTHETIC_SMS)
    assert diag.converged and m.max() == 64.0
    for name in ("bandwidth", "flops", "floor_s"):
        assert getattr(eff, name) == pytest.approx(getattr(SYNTHETIC_TRUTH, name),
                                                   rel=RECOVERED), name
    # The points decide all three (measured shares 0.0005-0.014 on these seeds): no prior kept,
    # none drawn towards it.
    assert diag.kept_priors == () and diag.loosely_fitted == ()
    assert max(share for _, share in diag.prior_shares) < 0.05


# The case on synthetic data: an A100 whose GEMMs stream 0.97 of the datasheet. Before
# the fix prior_share gave the bandwidth 55% (logistic flattened there) and the fit replaced
# 0.97 by 0.78, with a 5.0% training error and an epilogue term of 1,099 to make up for it.
NEAR_THE_SHEET = GemmEfficiency(bandwidth=0.97, flops=0.6, floor_s=9e-6, overlap_p=1.5,
                                tile_fraction=0.4, epilogue_k=40.0, sm_count=A100_SMS,
                                wave_fraction=0.3)


def test_a_bandwidth_near_the_datasheet_is_fitted_not_replaced_by_the_prior() -> None:
    m, k, n, t = _decode_points(NEAR_THE_SHEET, A100, seed=0)
    eff, diag = _fit(m, k, n, t, A100, A100_SMS)
    shares = dict(diag.prior_shares)
    assert shares["bandwidth"] < 0.05 and shares["floor_s"] < 0.05
    assert eff.bandwidth == pytest.approx(0.97, rel=RECOVERED)
    assert eff.floor_s == pytest.approx(9e-6, rel=RECOVERED)
    assert "bandwidth" not in dict(diag.kept_priors)
    assert diag.mape < 0.01  # 1% noise
    # At n <= 64 an A100 is memory-bound (ridge ~100 tokens here): the flop rate is only
    # partly measured, so the fit says how loosely and where it would be measured.
    why = dict(diag.kept_priors + diag.loosely_fitted)["flops"]
    assert "compute-bound points would: n above about" in why


def test_a_table_that_cannot_determine_a_field_names_it_and_the_region_that_would() -> None:
    # n <= 8 only: every GEMM is memory-bound, nothing measures the flop rate.
    m, k, n, t = _decode_points(NEAR_THE_SHEET, A100, seed=0)
    small = m <= 8
    eff, diag = _fit(m[small], k[small], n[small], t[small], A100, A100_SMS)
    kept = dict(diag.kept_priors)
    assert list(kept) == ["flops"] and eff.flops == cross_gpu_priors(A100_SMS)["flops"].value
    ridge = ridge_tokens(eff, bandwidth_bytes_per_s=2039e9, flops_per_s=312e12,
                         weight_bytes_per_param=2.0)
    assert f"compute-bound points would: n above about {2 * ridge:.0f} tokens" in kept["flops"]
    assert "these points span n = 1-8 tokens" in kept["flops"]


def test_one_shard_size_cannot_split_the_floor_from_the_bandwidth_and_says_so() -> None:
    # One 4096 x 4096 shard at n <= 64: floor + bytes / bandwidth is one number per point, so
    # the two trade freely; the fit names the floor (and flops) and asks for other shard sizes.
    m, k, n, t = _decode_points(NEAR_THE_SHEET, A100, seed=0)
    one = (k == 4096.0) & (n == 4096.0)
    _, diag = _fit(m[one], k[one], n[one], t[one], A100, A100_SMS)
    named = dict(diag.kept_priors + diag.loosely_fitted)
    assert {"bandwidth", "floor_s", "flops"} <= set(named)
    assert "on shards of several sizes" in named["bandwidth"]
    assert "on shards of about" in named["floor_s"]
    assert "shards of 33.6-33.6 MB" in named["floor_s"]


def test_prior_share_of_a_linear_model_by_hand() -> None:
    # log predict = a x: J = a on each of N points, data precision N a^2 / s^2 (s = 5%), prior
    # precision 1 / sigma^2; share = (1 / sigma^2) / (N a^2 / s^2 + 1 / sigma^2).
    a, points, sigma = 0.2, 40, 0.25
    share = prior_share(lambda x: np.exp(a * x[0]) * np.ones(points), np.array([0.3]),
                        np.array([sigma]))
    expected = sigma**-2 / (points * a**2 / 0.05**2 + sigma**-2)
    assert share[0] == pytest.approx(expected, rel=1e-6)
    # Cauchy weights: a point with a 5% residual counts half (1 / (1 + 1)).
    halved = prior_share(lambda x: np.exp(a * x[0]) * np.ones(points), np.array([0.3]),
                         np.array([sigma]), log_residuals=np.full(points, 0.05))
    assert halved[0] == pytest.approx(sigma**-2 / (points / 2 * a**2 / 0.05**2 + sigma**-2),
                                      rel=1e-6)
    # The points' own spread: sigma sqrt(share / (1 - share)) = s / (a sqrt(N)).
    assert points_only_spread(float(share[0]), sigma) == pytest.approx(
        0.05 / (a * math.sqrt(points)), rel=1e-6)
    assert points_only_spread(1.0, sigma) == math.inf
    assert UNIDENTIFIED_PRIOR_SHARE == 0.5


# --- Vidur's measured tables ------------------------------------------------------------------

TRAIN = "meta-llama/Llama-2-7b-hf"
DEVICES = {"a100": "a100-80g-sxm", "a40": "a40"}
# Per-layer weight-GEMM time (the four GEMMs summed per model, TP, n), MAPE. Measured with
# this fit (benchmarks/calibration_table.py; docs/calibration.md), trained on Llama-2-7B:
#   A100: held out 3.16% pooled, 5.12% n <= 64; training model 2.17% at n <= 64;
#   A40:  held out 4.19% pooled, 3.59% n <= 64; training model 4.75% at n <= 64.
# Issue 24's targets: training model <= 5% and held out <= 6% at n <= 64, both met; pooled
# <= 4%, met on the A100 and not on the A40, whose limit (4.2%) is this model form's
# (tests/test_vidur_calibration.py's docstring): 'A100 <= 3.2% and A40 <= 4.2% kept', stated
# to one decimal, so asserted to the next 0.05.
MAX_TRAIN_SMALL_N = 0.05
MAX_HELD_OUT_SMALL_N = 0.06
MAX_HELD_OUT_POOLED = {"a100": 0.0325, "a40": 0.0425}


def _layer_error(sums: pd.DataFrame, split: str, high: float = math.inf) -> float:
    rows = sums[(sums["split"] == split) & (sums["m"] <= high)]
    return float(np.mean(np.abs(rows["predicted_s"] / rows["time_s"] - 1.0)))


@pytest.fixture(scope="module", params=sorted(DEVICES))
def vidur_fit(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    device = request.param
    points = from_vidur(VIDUR_DIR, device)
    points = points[points["op_class"] == "gemm"]
    return device, calibrate(points, load_hardware(DEVICES[device]), train_models=[TRAIN],
                             source="test")


@requires_vidur
def test_real_tables_decode_region_error_and_held_out_targets(vidur_fit) -> None:  # type: ignore[no-untyped-def]
    device, result = vidur_fit
    sums = result.layer_sums
    assert _layer_error(sums, "train", 64.0) <= MAX_TRAIN_SMALL_N
    assert _layer_error(sums, "holdout", 64.0) <= MAX_HELD_OUT_SMALL_N
    assert _layer_error(sums, "holdout") <= MAX_HELD_OUT_POOLED[device]
    # Every GEMM field with a prior is decided by the points (shares below 2%).
    assert not [n for n in result.notes if n.startswith("gemm.")]


@requires_vidur
def test_a100_tables_against_a_datasheet_they_beat_stop_at_the_bound() -> None:
    # The A100 40GB sheet (1,555 GB/s) under Vidur's A100 80GB tables (1,755 GB/s fitted on the
    # 80GB sheet): the bandwidth the points want is above 1. Before: 'kept the prior 0.78',
    # n <= 64 held out 23.7%, training model 20.2%. Now: 1.0, named at its bound (the datasheet
    # is the suspect), n <= 64 held out 3.8%, training model 5.5%.
    points = from_vidur(VIDUR_DIR, "a100")
    points = points[points["op_class"] == "gemm"]
    result = calibrate(points, load_hardware("a100-40g-sxm"), train_models=[TRAIN],
                       source="test")
    assert result.hardware.efficiency.gemm.bandwidth == pytest.approx(1.0, abs=1e-6)
    assert any(n.startswith("gemm.bandwidth: at its physical bound") for n in result.notes)
    assert not any("do not identify" in n for n in result.notes if n.startswith("gemm."))
    assert _layer_error(result.layer_sums, "holdout", 64.0) <= MAX_HELD_OUT_SMALL_N


# --- the L2 between a profiler's repeats -------------------------------------------------------


def _gemm_rows(shards: dict[tuple[str, int], list[tuple[int, int]]]) -> pd.DataFrame:
    ops = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
    rows = [{"model": model, "tp": tp, "op": op, "op_class": "gemm", "k": k, "n": n, "m": m}
            for (model, tp), sizes in shards.items()
            for op, (k, n) in zip(ops, sizes, strict=True) for m in (1, 8)]
    return pd.DataFrame(rows)


def test_the_l2_statement_names_the_least_weight_bytes_a_repeat_streams() -> None:
    from specsim.measurement.tables import l2_statement

    # Llama-2-7B at TP 8 (fp16 shards): 4096 x 1536, 512 x 4096, 4096 x 2752, 1376 x 4096,
    # 2 x (6,291,456 + 2,097,152 + 11,272,192 + 5,636,096) = 50,593,792 bytes; at TP 4 twice.
    tp8 = [(4096, 1536), (512, 4096), (4096, 2752), (1376, 4096)]
    tp4 = [(4096, 3072), (1024, 4096), (4096, 5504), (2752, 4096)]
    text = l2_statement(_gemm_rows({("llama", 4): tp4, ("llama", 8): tp8}), "vidur")
    assert text.startswith("L2 not flushed between repeats")
    assert text.endswith("at least 50.6 MB per repeat (llama, TP 8)")
    # A specsim profile says what its harness did; an older one without the key says nothing.
    assert l2_statement(pd.DataFrame(), "specsim", {"l2_flushed": "yes: 80 bytes"}) == \
        "L2 yes: 80 bytes"
    assert "not stated" in l2_statement(pd.DataFrame(), "specsim", {})


@requires_vidur
def test_vidur_shards_are_not_timed_in_the_l2() -> None:
    # Vidur does not flush the L2 between its 20 repeats of a block, but the smallest block
    # (Llama-2-7B TP 8) streams 50.6 MB of weights per repeat through the A100's 40 MB L2
    # (NVIDIA A100 Tensor Core GPU Architecture whitepaper), so no shard is still there when
    # its GEMM runs again: the same shard takes as long in that block as in Llama-3-8B's larger
    # ones (TP 8: 54.5 MB, TP 4: 109 MB; measured time ratios 1.015 and 1.019 over n <= 64).
    # Served from the L2 (several times HBM's bandwidth) it would take far less.
    points = from_vidur(VIDUR_DIR, "a100")
    gemm = points[(points["op_class"] == "gemm") & (points["m"] <= 64)]

    def times(model: str, tp: int, k: float, n: float) -> pd.Series:
        rows = gemm[(gemm["model"] == model) & (gemm["tp"] == tp) & (gemm["k"] == k)
                    & (gemm["n"] == n)]
        return rows.set_index("m")["time_s"]

    for (k, n), tp in (((512.0, 4096.0), 8), ((4096.0, 1536.0), 4)):
        ratio = times(TRAIN, 8, k, n) / times("meta-llama/Meta-Llama-3-8B", tp, k, n)
        assert len(ratio.dropna()) == 11
        assert 0.97 < float(ratio.mean()) < 1.06, (k, n)

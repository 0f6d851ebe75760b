"""Tests of specsim.forward.gemm: ideal roofline, efficiency terms, fits, validation."""

from __future__ import annotations

import math
from typing import TypedDict

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.gemm import gemm_time_s, padded_tokens, smooth_max, wave_factor
from specsim.measurement.gemm_fit import GEMM_FIT_PARAMS, fit_gemm_efficiency
from specsim.specs.hardware import GemmEfficiency

# H100 SXM datasheet (NVIDIA H100 Tensor Core GPU datasheet): 3.35 TB/s HBM3,
# 989 TFLOP/s dense bf16. These are the seed article's numbers for its 8B example.
H100_BW = 3.35e12
H100_FLOPS = 989e12


class Hardware(TypedDict):
    """Keyword arguments of gemm_time_s that describe the GPU and the dtypes."""

    weight_bytes_per_param: float
    act_bytes_per_elem: float
    bandwidth_bytes_per_s: float
    flops_per_s: float


def _hw(
    *, wb: float = 2.0, ab: float = 2.0, bw: float = H100_BW, fl: float = H100_FLOPS
) -> Hardware:
    """fp16 weights and activations on an H100 unless overridden."""
    return Hardware(
        weight_bytes_per_param=wb, act_bytes_per_elem=ab, bandwidth_bytes_per_s=bw, flops_per_s=fl
    )


H100 = _hw()


# --- ideal roofline -------------------------------------------------------------------------


def test_ideal_default_decode_gemm_of_8b_on_h100_is_weight_stream() -> None:
    # Llama-3-8B fused gate+up GEMM (4096 x 2*14336), one token, bf16:
    # bytes = 4096*28672*2 + 1*(4096+28672)*2 = 234,946,560 B; / 3.35e12 B/s = 70.13 us.
    t = gemm_time_s(1, 4096, 28672, **H100)
    assert float(t) == pytest.approx(234_946_560 / 3.35e12, rel=1e-12)
    assert float(t) == pytest.approx(70.133e-6, rel=1e-4)


def test_ideal_default_prefill_gemm_of_8b_on_h100_is_flop_bound() -> None:
    # Same GEMM at 4096 tokens: 2*4096*4096*28672 = 962,072,674,304 flop / 989e12 = 972.8 us,
    # far above its bytes (234,881,024 + 4096*32768*2 = 503,316,480 B -> 150.2 us).
    t = gemm_time_s(4096, 4096, 28672, **H100)
    assert float(t) == pytest.approx(962_072_674_304 / 989e12, rel=1e-12)
    assert float(t) == pytest.approx(972.78e-6, rel=1e-4)


def test_ideal_default_knee_of_8b_square_gemm_is_near_peak_over_bandwidth() -> None:
    # Seed: knee at 989 / 3.35 ~ 295 tokens (weights only). With activations in the byte count
    # the crossing for a 4096 x 4096 bf16 GEMM solves 2mkn/F = (2kn + 2m(k+n))/B, i.e.
    # m = kn / (kn B/F - k - n) = 4096^2 / (4096^2 / 295.22 - 8192) = 344.9 tokens.
    knee = 4096.0**2 / (4096.0**2 / (989e12 / 3.35e12) - 8192.0)
    m = np.arange(1, 1000, dtype=np.float64)
    t = gemm_time_s(m, 4096, 4096, **H100)
    bytes_time = (4096.0 * 4096 * 2 + m * 8192 * 2) / 3.35e12
    first_compute_bound = m[np.argmax(t > bytes_time)]
    assert knee == pytest.approx(344.9, abs=0.1)
    assert first_compute_bound == math.ceil(knee)
    # Weights only (no activation bytes): the seed's knee, 989e12 / 3.35e12 = 295.2 -> 296.
    t_weights = gemm_time_s(m, 4096, 4096, **_hw(ab=0.0))
    assert m[np.argmax(t_weights > 4096.0 * 4096 * 2 / 3.35e12)] == 296


def test_ideal_default_equals_roofline_formula_exactly_on_a_grid() -> None:
    m = np.array([0.0, 1.0, 7.0, 64.0, 129.0, 1000.0, 32768.0])[:, None, None]
    k = np.array([1.0, 512.0, 8192.0])[None, :, None]
    n = np.array([3.0, 1280.0, 57344.0])[None, None, :]
    wb, ab, bw, fl = 0.5, 2.0, 2039e9, 312e12  # int4 weights, fp16 activations, A100
    t = gemm_time_s(
        m,
        k,
        n,
        weight_bytes_per_param=wb,
        act_bytes_per_elem=ab,
        bandwidth_bytes_per_s=bw,
        flops_per_s=fl,
    )
    expected = np.maximum((k * n * wb + m * (k + n) * ab) / bw, 2 * m * k * n / fl)
    assert t.shape == (7, 3, 3)
    np.testing.assert_allclose(t, expected, rtol=1e-13, atol=0)


# --- efficiency terms, each against an independent derivation -------------------------------


def test_padded_tokens_hand_examples() -> None:
    m = [0, 1, 16, 17, 100, 128, 129, 300, 4096, 4097]
    expected = [0, 16, 16, 32, 128, 128, 256, 384, 4096, 4224]
    assert padded_tokens(m, 128).tolist() == expected


def test_padded_tokens_with_tile_smaller_than_min_tile_is_plain_rounding() -> None:
    assert padded_tokens([1, 5, 8, 9], 8).tolist() == [8, 8, 8, 16]


def test_smooth_max_degenerate_exponents() -> None:
    a = np.array([0.0, 1.0, 3.0, 2.0])
    b = np.array([0.0, 2.0, 4.0, 0.0])
    assert np.array_equal(smooth_max(a, b, math.inf), np.maximum(a, b))
    np.testing.assert_allclose(smooth_max(a, b, 1.0), a + b, rtol=1e-15)
    np.testing.assert_allclose(smooth_max(a, b, 2.0), np.hypot(a, b), rtol=1e-15)


def test_smooth_max_between_table_points_by_hand() -> None:
    # Ratios 0.3 and 0.77 fall between the 8,192-interval table's points (0.3 * 8192 = 2457.6),
    # where linear interpolation is off by at most h^2 / 8 * max|f''| ~ 2e-9 relative for p >= 2.
    a = np.array([2.0, 1.0, 10.0])
    b = np.array([0.6, 0.3, 7.7])
    # p = 2: 2 sqrt(1 + 0.09), sqrt(1.09), 10 sqrt(1 + 0.5929)
    np.testing.assert_allclose(smooth_max(a, b, 2.0),
                               [2.0 * math.sqrt(1.09), math.sqrt(1.09), 10.0 * math.sqrt(1.5929)],
                               rtol=1e-8)
    # p = 4: 0.3^4 = 0.0081, 0.77^4 = 0.35153041
    np.testing.assert_allclose(smooth_max(a, b, 4.0),
                               [2.0 * 1.0081**0.25, 1.0081**0.25, 10.0 * 1.35153041**0.25],
                               rtol=1e-8)
    # The same at b > a (the ratio is min / max) and a table point is exact to rounding.
    np.testing.assert_allclose(smooth_max(b, a, 2.0), smooth_max(a, b, 2.0), rtol=0, atol=0)
    np.testing.assert_allclose(smooth_max(np.array([1.0]), np.array([0.5]), 2.0),
                               [math.sqrt(1.25)], rtol=1e-15)


def test_smooth_max_large_values_do_not_overflow() -> None:
    t = smooth_max(np.array([1e300]), np.array([1e300]), 4.0)
    assert float(t[0]) == pytest.approx(1e300 * 2**0.25, rel=1e-12)


def test_floor_and_bandwidth_fraction_shift_the_memory_term() -> None:
    eff = GemmEfficiency(bandwidth=0.8, floor_s=4e-6)
    t = gemm_time_s(1, 4096, 4096, **H100, eff=eff)
    assert float(t) == pytest.approx(4e-6 + (4096 * 4096 * 2 + 8192 * 2) / (0.8 * 3.35e12))


def test_tile_quantization_makes_the_compute_term_a_staircase() -> None:
    # Pure compute (bandwidth huge): full tile quantization pays for whole 128-row tiles.
    eff = GemmEfficiency(tile_fraction=1.0)
    hw = _hw(bw=1e30, fl=1e12)
    t = gemm_time_s(np.array([129.0, 200.0, 256.0, 257.0]), 1000, 1000, **hw, eff=eff)
    per_row = 2 * 1000 * 1000 / 1e12
    np.testing.assert_allclose(t, [256 * per_row] * 3 + [384 * per_row], rtol=1e-12)


def test_half_tile_fraction_pays_half_of_the_padding() -> None:
    eff = GemmEfficiency(tile_fraction=0.5, epilogue_k=24.0, flops=0.5)
    hw = _hw(bw=1e30, fl=1e12)
    t = gemm_time_s(129, 1000, 300, **hw, eff=eff)
    m_eff = 129 + 0.5 * (256 - 129)
    assert float(t) == pytest.approx(2 * m_eff * (1000 + 24) * 300 / 0.5e12, rel=1e-12)


def test_overlap_exponent_one_adds_memory_and_compute() -> None:
    eff = GemmEfficiency(overlap_p=1.0)
    t = gemm_time_s(300, 4096, 4096, **H100, eff=eff)
    t_mem = (4096 * 4096 * 2 + 300 * 8192 * 2) / 3.35e12
    t_comp = 2 * 300 * 4096 * 4096 / 989e12
    assert float(t) == pytest.approx(t_mem + t_comp, rel=1e-12)


def test_full_wave_quantization_matches_a_count_of_waves() -> None:
    # Pure compute, whole tiles and whole waves paid: 129 tokens -> 2 token tiles of 128, n = 640
    # -> 5 column tiles of 128; 10 tiles on 4 SMs run in ceil(10 / 4) = 3 waves, and a wave
    # takes one tile's 2 * 128 * 128 * k flop at a quarter of the GPU's rate.
    eff = GemmEfficiency(tile_fraction=1.0, wave_fraction=1.0, sm_count=4, tile_cols=128)
    hw = _hw(bw=1e30, fl=1e12)
    t = gemm_time_s(129, 1000, 640, **hw, eff=eff)
    one_wave = 2 * 128 * 128 * 1000 / (1e12 / 4)
    assert float(t) == pytest.approx(3 * one_wave, rel=1e-12)


def test_partial_wave_fraction_pays_part_of_the_idle_wave() -> None:
    # 100 tokens (one token tile), n = 640 -> 5 tiles on 4 SMs: 1.25 waves, 0.75 of a wave idle;
    # wave_fraction 0.4 pays 0.4 * 0.75 / 1.25 = 24% extra compute time.
    eff = GemmEfficiency(wave_fraction=0.4, sm_count=4)
    t = gemm_time_s(100, 1000, 640, **_hw(bw=1e30, fl=1e12), eff=eff)
    assert float(t) == pytest.approx(1.24 * 2 * 100 * 1000 * 640 / 1e12, rel=1e-12)
    assert float(wave_factor(np.array(128.0), np.array(640.0), eff)) == pytest.approx(1.24)


def test_degenerate_whole_waves_add_nothing() -> None:
    # A40: 84 SMs. n = 8192 -> 64 column tiles; 21 token tiles (2688 tokens) -> 1344 tiles = 16
    # whole waves, exactly (no spurious 17th wave from rounding).
    eff = GemmEfficiency(wave_fraction=1.0, sm_count=84)
    m = np.array([2688.0, 128.0 * 84])
    assert wave_factor(m, np.array(8192.0), eff).tolist() == [1.0, 1.0]
    t = gemm_time_s(m, 8192, 8192, **_hw(bw=1e30, fl=1e12), eff=eff)
    np.testing.assert_allclose(t, 2 * m * 8192 * 8192 / 1e12, rtol=1e-12)


def test_wave_term_is_off_without_a_wave_fraction() -> None:
    m = np.array([1.0, 129.0, 3000.0])
    with_sms = gemm_time_s(m, 4096, 5000, **H100, eff=GemmEfficiency(sm_count=132))
    assert np.array_equal(with_sms, gemm_time_s(m, 4096, 5000, **H100))


def test_degenerate_zero_tokens_is_the_weight_stream() -> None:
    eff = GemmEfficiency(tile_fraction=1.0, overlap_p=2.0, floor_s=1e-6, wave_fraction=1.0,
                         sm_count=132)
    t = gemm_time_s(0, 4096, 4096, **H100, eff=eff)
    assert float(t) == pytest.approx(1e-6 + 4096 * 4096 * 2 / 3.35e12, rel=1e-12)


def test_degenerate_empty_weight_costs_only_the_floor() -> None:
    eff = GemmEfficiency(floor_s=3e-6, overlap_p=2.0, tile_fraction=1.0, wave_fraction=1.0,
                         sm_count=132)
    t = gemm_time_s([1, 100], 0, 4096, **_hw(ab=0.0), eff=eff)
    np.testing.assert_allclose(t, [3e-6, 3e-6], rtol=1e-12)
    assert float(gemm_time_s(5, 0, 0, **H100)) == 0.0


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"bandwidth": 0.0},
        {"bandwidth": float("nan")},
        {"flops": -1.0},
        {"floor_s": -1e-6},
        {"floor_s": float("inf")},
        {"overlap_p": 0.5},
        {"overlap_p": float("nan")},
        {"tile_fraction": 1.5},
        {"tile_fraction": -0.1},
        {"tile_rows": 0},
        {"tile_rows": 1.5},
        {"tile_rows": True},
        {"epilogue_k": -5.0},
        {"wave_fraction": 0.5},
        {"wave_fraction": 1.5, "sm_count": 8},
        {"sm_count": -1},
        {"sm_count": 8.0},
        {"tile_cols": 0},
    ],
)
def test_gemm_efficiency_rejects_bad_fields(fields: dict[str, float]) -> None:
    with pytest.raises(SpecError, match="GemmEfficiency"):
        GemmEfficiency(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "hw", "name"),
    [
        ((-1, 10, 10), H100, "m"),
        ((1, float("nan"), 10), H100, "k"),
        ((1, 10, float("inf")), H100, "n"),
        ((1, 10, 10), _hw(bw=0.0), "bandwidth_bytes_per_s"),
        ((1, 10, 10), _hw(fl=-1.0), "flops_per_s"),
        ((1, 10, 10), _hw(wb=0.0), "weight_bytes_per_param"),
    ],
)
def test_gemm_time_rejects_bad_inputs(
    args: tuple[float, float, float], hw: Hardware, name: str
) -> None:
    with pytest.raises(SpecError, match=name):
        gemm_time_s(*args, **hw)


def test_fit_rejects_unknown_or_repeated_parameter() -> None:
    m = np.arange(1.0, 50.0)
    t = gemm_time_s(m, 1024, 1024, **H100)
    with pytest.raises(SpecError, match="'bogus' unknown; valid names: bandwidth"):
        fit_gemm_efficiency(m, 1024, 1024, t, **H100, params=("bandwidth", "bogus"))
    with pytest.raises(SpecError, match="twice"):
        fit_gemm_efficiency(m, 1024, 1024, t, **H100, params=("flops", "flops"))


def test_fit_rejects_non_positive_times_and_too_few_points() -> None:
    with pytest.raises(SpecError, match="time_s"):
        fit_gemm_efficiency([1, 2, 3], 64, 64, [1e-6, 0.0, 1e-6], **H100)
    with pytest.raises(SpecError, match="cannot fit 6 parameters"):
        fit_gemm_efficiency([1, 2], 64, 64, [1e-6, 1e-6], **H100)


# --- fitting against synthetic data from an independent formula ---------------------------


def _hand_gemm_time(m: float, k: float, n: float, truth: dict[str, float]) -> float:
    """The model written out per point, independently of the library (A100 datasheet)."""
    bw, fl = 2039e9 * truth["bandwidth"], 312e12 * truth["flops"]
    t_mem = truth["floor_s"] + (2 * k * n + 2 * m * (k + n)) / bw
    if m <= 128:
        tile = 16
        while tile < m:
            tile *= 2
        padded = min(tile, 128)
    else:
        padded = 128 * math.ceil(m / 128)
    m_eff = m + truth["tile_fraction"] * (padded - m)
    t_comp = 2 * m_eff * (k + truth["epilogue_k"]) * n / fl
    if truth.get("wave_fraction", 0.0) > 0.0:
        tiles = math.ceil(padded / 128) * math.ceil(n / 128)
        waves = math.ceil(tiles / A100_SMS)  # whole waves of 108 tiles
        t_comp *= 1 + truth["wave_fraction"] * (waves - tiles / A100_SMS) / (tiles / A100_SMS)
    p = truth["overlap_p"]
    return float((t_mem**p + t_comp**p) ** (1 / p))


def _synthetic_gemms(
    truth: dict[str, float], rng: np.random.Generator, noise: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """~4,000 points like one model's table: 16 weight shards x a 258-point token grid."""
    # Vidur's token grid: 1, 2, 4, 8..1016 step 8, 1024..2048 step 16, 2048..4096 step 32.
    tokens = np.concatenate(
        [[1, 2, 4], np.arange(8, 1024, 8), np.arange(1024, 2048, 16), np.arange(2048, 4097, 32)]
    )
    shards = [(4096 // tp, 4096) for tp in (1, 2, 4, 8)]  # attention output projections
    shards += [(4096, 12288 // tp) for tp in (1, 2, 4, 8)]  # QKV
    shards += [(11008 // tp, 4096) for tp in (1, 2, 4, 8)]  # MLP down
    shards += [(4096, 22016 // tp) for tp in (1, 2, 4, 8)]  # MLP gate+up
    m = np.repeat(tokens, len(shards))
    k = np.tile([s[0] for s in shards], len(tokens))
    n = np.tile([s[1] for s in shards], len(tokens))
    t = np.array([_hand_gemm_time(*p, truth) for p in zip(m, k, n, strict=True)])
    return m.astype(float), k.astype(float), n.astype(float), t * rng.lognormal(0.0, noise, t.size)


A100 = _hw(bw=2039e9, fl=312e12)
A100_SMS = 108  # NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs
TRUTH = {
    "bandwidth": 0.82,
    "flops": 0.74,
    "floor_s": 4e-6,
    "overlap_p": 2.5,
    "tile_fraction": 0.6,
    "epilogue_k": 80.0,
}


def test_fit_recovers_known_parameters_from_noisy_synthetic_data() -> None:
    m, k, n, t = _synthetic_gemms(TRUTH, np.random.default_rng(20240611), noise=0.02)
    eff, diag = fit_gemm_efficiency(m, k, n, t, **A100)
    assert diag.converged and diag.n_points == t.size >= 4000
    assert eff.bandwidth == pytest.approx(TRUTH["bandwidth"], rel=0.01)
    assert eff.flops == pytest.approx(TRUTH["flops"], rel=0.005)
    assert eff.floor_s == pytest.approx(TRUTH["floor_s"], rel=0.05)
    assert eff.overlap_p == pytest.approx(TRUTH["overlap_p"], rel=0.05)
    assert eff.tile_fraction == pytest.approx(TRUTH["tile_fraction"], abs=0.02)
    assert eff.epilogue_k == pytest.approx(TRUTH["epilogue_k"], rel=0.1)
    # 2% lognormal noise: mean |e^x - 1| ~ 0.02 sqrt(2/pi) ~ 1.6%.
    assert diag.mape == pytest.approx(0.016, abs=0.003)


def test_fit_without_noise_reproduces_the_data() -> None:
    m, k, n, t = _synthetic_gemms(TRUTH, np.random.default_rng(1), noise=0.0)
    eff, diag = fit_gemm_efficiency(m, k, n, t, **A100)
    assert diag.max_abs_log_error < 1e-4
    np.testing.assert_allclose(gemm_time_s(m, k, n, **A100, eff=eff), t, rtol=1e-4)


def test_fit_of_a_subset_keeps_the_other_fields_from_base() -> None:
    base = GemmEfficiency(overlap_p=2.5, tile_fraction=0.6, epilogue_k=80.0, tile_rows=128)
    m, k, n, t = _synthetic_gemms(TRUTH, np.random.default_rng(3), noise=0.0)
    eff, diag = fit_gemm_efficiency(
        m, k, n, t, **A100, params=("bandwidth", "flops", "floor_s"), base=base
    )
    assert diag.params == ("bandwidth", "flops", "floor_s")
    assert (eff.overlap_p, eff.tile_fraction, eff.epilogue_k) == (2.5, 0.6, 80.0)
    assert eff.flops == pytest.approx(0.74, rel=1e-4)
    assert set(GEMM_FIT_PARAMS) == {
        "bandwidth",
        "flops",
        "floor_s",
        "overlap_p",
        "tile_fraction",
        "epilogue_k",
        "wave_fraction",
    }
    assert (eff.sm_count, eff.wave_fraction) == (0, 0.0)


def test_fit_recovers_the_wave_fraction_given_the_sm_count() -> None:
    truth = {**TRUTH, "wave_fraction": 0.3}
    m, k, n, t = _synthetic_gemms(truth, np.random.default_rng(5), noise=0.01)
    eff, diag = fit_gemm_efficiency(m, k, n, t, **A100, base=GemmEfficiency(sm_count=A100_SMS))
    assert diag.converged and diag.params == GEMM_FIT_PARAMS
    assert eff.wave_fraction == pytest.approx(0.3, abs=0.01)
    assert eff.tile_fraction == pytest.approx(0.6, abs=0.01)
    assert eff.flops == pytest.approx(0.74, rel=0.01)
    assert eff.sm_count == A100_SMS and eff.tile_cols == 128


def test_default_fit_leaves_out_the_wave_term_without_an_sm_count() -> None:
    m, k, n, t = _synthetic_gemms(TRUTH, np.random.default_rng(9), noise=0.0)
    eff, diag = fit_gemm_efficiency(m, k, n, t, **A100)
    assert "wave_fraction" not in diag.params and eff.wave_fraction == 0.0
    with pytest.raises(SpecError, match="sm_count"):
        fit_gemm_efficiency(m, k, n, t, **A100, params=("flops", "wave_fraction"))


def test_a_field_the_points_cannot_identify_keeps_its_prior_and_says_why() -> None:
    # Only n = 1 points: every GEMM is memory-bound, so nothing measures the flop rate; the
    # fit keeps the prior's flops (0.7) and names it, and bandwidth stays at most 1.
    from specsim.measurement.gemm_fit import Prior

    k = np.array([1024.0, 4096.0, 8192.0, 2048.0, 4096.0])
    n = np.array([1024.0, 4096.0, 8192.0, 8192.0, 14336.0])
    truth = GemmEfficiency(bandwidth=0.85, flops=0.6, floor_s=3e-6)
    t = gemm_time_s(1.0, k, n, **A100, eff=truth)
    priors = {"bandwidth": Prior(0.8), "flops": Prior(0.7), "floor_s": Prior(4e-6)}
    eff, diag = fit_gemm_efficiency(np.ones(5), k, n, t, **A100,
                                    params=("bandwidth", "flops", "floor_s"), priors=priors)
    assert eff.flops == 0.7
    assert [name for name, _ in diag.kept_priors] == ["flops"]
    assert "do not identify" in diag.kept_priors[0][1]
    assert eff.bandwidth == pytest.approx(0.85, rel=0.02) and eff.bandwidth <= 1.0


def test_an_efficiency_above_the_datasheet_cannot_be_fitted() -> None:
    # Kernels 20% faster than the datasheet allows: the fraction stops at its bound (< 1)
    # and the diagnostics say so, instead of returning 1.2.
    m = np.array([1.0, 2.0, 4.0, 8.0] * 3)
    k = np.repeat([4096.0, 8192.0, 2048.0], 4)
    t = gemm_time_s(m, k, 8192.0, **A100) / 1.2
    eff, diag = fit_gemm_efficiency(m, k, 8192.0, t, **A100, params=("bandwidth", "floor_s"))
    assert eff.bandwidth <= 1.0 and diag.at_bound == ("bandwidth",)

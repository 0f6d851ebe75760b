"""Hardware profiles: every built-in loads, every number has a source, key numbers match the
vendor datasheets, and the ideal roofline knee sits at peak flops / bandwidth."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.gemm import gemm_time_s
from specsim.specs.hardware import load_hardware
from specsim.specs.io import read_spec_file
from specsim.specs.paths import builtin_names, resolve_path

REQUIRED = {"h100-sxm", "h100-pcie", "h200", "b200", "a100-80g-sxm", "a100-40g-sxm",
            "a100-80g-pcie", "l40", "l40s", "a40", "mi300x", "mi325x"}

# Vendor datasheet values: (HBM GB, HBM GB/s, dense bf16 TFLOPS).
# NVIDIA H100 / H200 / A100 / L40 / L40S / A40 datasheets; AMD Instinct MI300X / MI325X pages.
DATASHEET = {
    "h100-sxm": (80, 3350, 989.4),
    "h100-pcie": (80, 2000, 756),
    "h200": (141, 4800, 989.4),
    "a100-80g-sxm": (80, 2039, 312),
    "a100-40g-sxm": (40, 1555, 312),
    "a100-80g-pcie": (80, 1935, 312),
    "l40": (48, 864, 181.05),
    "a40": (48, 696, 149.7),
    "mi300x": (192, 5300, 1307.4),
    "mi325x": (256, 6000, 1307.4),
}


def test_all_required_profiles_are_built_in() -> None:
    assert REQUIRED <= set(builtin_names("hardware"))


@pytest.mark.parametrize("slug", sorted(REQUIRED))
def test_profile_loads_with_a_source_for_every_number(slug: str) -> None:
    spec = read_spec_file(resolve_path("hardware", slug))  # raises on an unsourced number
    hw = load_hardware(slug)
    assert hw.hbm_capacity_bytes > 0 and hw.hbm_bandwidth_bytes_per_s > 0
    assert "bf16" in hw.peak_flops_per_s
    for key in ("memory.hbm_capacity_GB", "memory.hbm_bandwidth_GB_per_s",
                "compute.dense_TFLOPS.bf16", "interconnect.bandwidth_GB_per_s",
                "interconnect.latency_us", "pcie.bandwidth_GB_per_s"):
        assert spec.sources.get(key, "").strip(), f"{slug}: {key} has no source"
    assert not hw.is_calibrated  # datasheet profiles start ideal


@pytest.mark.parametrize("slug", sorted(DATASHEET))
def test_key_numbers_match_datasheet(slug: str) -> None:
    capacity_gb, bandwidth_gb_s, bf16_tflops = DATASHEET[slug]
    hw = load_hardware(slug)
    assert hw.hbm_capacity_bytes == pytest.approx(capacity_gb * 1e9)
    assert hw.hbm_bandwidth_bytes_per_s == pytest.approx(bandwidth_gb_s * 1e9)
    assert hw.flops_per_s("bf16") == pytest.approx(bf16_tflops * 1e12, rel=0.01)


def test_dense_not_sparse_flops() -> None:
    # H100 SXM: the datasheet's 1,979 bf16 TFLOPS are with sparsity; dense is half.
    assert load_hardware("h100-sxm").flops_per_s("bf16") < 1000e12


@pytest.mark.parametrize("slug", sorted(REQUIRED))
def test_ideal_gemm_knee_is_ops_per_byte(slug: str) -> None:
    """A weight GEMM turns compute-bound where 2 m k n / F = (k n + m (k + n)) * 2 / BW.

    Solving for m with r = F / BW (bf16 weights and activations, 2 bytes each):
    m* = r k n / (k n - r (k + n)); for a huge GEMM m* -> r, the datasheet ops:byte ratio.
    """
    hw = load_hardware(slug)
    bw, peak = hw.hbm_bandwidth_bytes_per_s, hw.flops_per_s("bf16")
    r = peak / bw
    k = n = 1 << 20  # activations negligible next to the weights
    m_star = r * k * n / (k * n - r * (k + n))
    assert m_star == pytest.approx(r, rel=0.01)
    m = np.array([math.floor(m_star) - 1, math.ceil(m_star) + 1], dtype=float)
    t = gemm_time_s(m, k, n, weight_bytes_per_param=2, act_bytes_per_elem=2,
                    bandwidth_bytes_per_s=bw, flops_per_s=peak)
    memory_s = (k * n * 2 + m * (k + n) * 2) / bw
    compute_s = 2 * m * k * n / peak
    assert t[0] == pytest.approx(memory_s[0]) and compute_s[0] < memory_s[0]
    assert t[1] == pytest.approx(compute_s[1]) and compute_s[1] > memory_s[1]


def test_h100_ops_per_byte_is_295() -> None:
    # The article: 989 / 3.35 ~= 295 tokens.
    assert load_hardware("h100-sxm").ops_per_byte == pytest.approx(295, abs=1)


def test_unknown_slug_suggests_the_closest_and_points_to_the_list() -> None:
    with pytest.raises(SpecError, match="unknown hardware 'h900'.*hardware list") as err:
        load_hardware("h900")
    assert len(str(err.value)) < 400
    with pytest.raises(SpecError, match="did you mean 'h100-sxm'"):
        load_hardware("h100-sx")


def test_slugs_match_regardless_of_case() -> None:
    assert load_hardware("H100-SXM").slug == "h100-sxm"


def _profile(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "name": "Test GPU", "vendor": "test",
        "memory": {"hbm_capacity_GB": 80, "hbm_bandwidth_GB_per_s": 3000, "source": "s"},
        "compute": {"dense_TFLOPS": {"bf16": 900}, "source": "s"},
        "interconnect": {"name": "link", "bandwidth_GB_per_s": 400, "latency_us": 10,
                         "source": "s"},
        "pcie": {"bandwidth_GB_per_s": 64, "source": "s"},
    }
    data.update(overrides)
    return data


def test_a_file_profile_loads(write_yaml) -> None:  # type: ignore[no-untyped-def]
    hw = load_hardware(str(write_yaml("gpu.yaml", _profile())))
    assert hw.ops_per_byte == pytest.approx(300)


@pytest.mark.parametrize("overrides, message", [
    ({"memory": {"hbm_capacity_GB": 80, "hbm_bandwidth_GB_per_s": -1, "source": "s"}},
     r"memory.hbm_bandwidth_GB_per_s' must be > 0, got -1"),
    ({"memory": {"hbm_capacity_GB": 80, "hbm_bandwidth_GB_per_s": 0, "source": "s"}},
     r"memory.hbm_bandwidth_GB_per_s' must be > 0, got 0"),
    ({"memory": {"hbm_capacity_GB": "lots", "hbm_bandwidth_GB_per_s": 1, "source": "s"}},
     r"memory.hbm_capacity_GB' must be a number, got 'lots'"),
    ({"memory": {"hbm_capacity_GB": 80, "source": "s"}},
     r"memory.hbm_bandwidth_GB_per_s' is missing"),
    ({"memory": {"hbm_capacity_GB": 80, "hbm_bandwidth_GB_per_s": 3000}},
     r"memory.hbm_capacity_GB' = 80 has no source"),
    ({"compute": {"dense_TFLOPS": {"bf17": 900}, "source": "s"}},
     r"compute.dense_TFLOPS.bf17' is not a known dtype"),
    ({"efficiency": {"attention": {"bandwidth": 2.0}, "source": "s"}},
     r"must be in \(0, 1.5\], got 2.0"),
    ({"compute": {"dense_TFLOPS": {"bf16": 900}, "achievable_TFLOPS": {"bf16": 950},
                  "source": "s"}},
     r"compute.achievable_TFLOPS.bf16' = 950 exceeds the dense peak 900"),
    ({"compute": {"dense_TFLOPS": {"bf16": 900}, "achievable_TFLOPS": {"fp8": 950},
                  "source": "s"}},
     r"compute.achievable_TFLOPS.fp8' has no dense_TFLOPS peak"),
])
def test_bad_profiles_name_file_and_field(write_yaml, overrides, message) -> None:  # type: ignore[no-untyped-def]
    path = write_yaml("bad.yaml", _profile(**overrides))
    with pytest.raises(SpecError, match=message) as err:
        load_hardware(str(path))
    assert str(path) in str(err.value)


def test_malformed_yaml_names_file_and_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nmemory: [1, 2\n")
    with pytest.raises(SpecError, match=r"broken.yaml: line \d+: malformed YAML"):
        load_hardware(str(path))


def test_atomic_write_leaves_old_file_and_no_temporary_on_error(tmp_path: Path) -> None:
    from specsim.specs.outputs import atomic_write, check_writable

    target = tmp_path / "out.yaml"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(SpecError, match="exists; pass --force"):
        check_writable(target, force=False)
    check_writable(target, force=True)

    def fail(handle: object) -> None:
        handle.write("half")  # type: ignore[attr-defined]
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, fail)
    assert target.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.yaml"]
    atomic_write(target, lambda handle: handle.write("new\n"))
    assert target.read_text(encoding="utf-8") == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.yaml"]
    with pytest.raises(SpecError, match="cannot write"):
        atomic_write(tmp_path / "missing" / "x.yaml", lambda handle: handle.write("x"))


def test_measured_achievable_flops_set_compute_bound_time() -> None:
    """MI300X's measured max-achievable bf16 rate (708 TFLOPS, AMD's hipBLASLt benchmark)
    replaces the transferred flops efficiency (0.757 of the 1,307.4 TFLOPS peak = 990): a
    64k-token pass, compute-bound, takes about 990 / 708 = 1.40x as long (1.37x: the pass's
    memory-bound part is unchanged); a one-token pass, memory-bound, about as long."""
    import dataclasses

    from specsim.forward.shapes import uniform_passes
    from specsim.specs.models import load_model
    from specsim.speculation.engine_time import expected_kernel_s

    hw = load_hardware("mi300x")
    assert hw.achievable_flops_per_s["bf16"] == pytest.approx(708e12)
    model = load_model("llama-3.1-8b")
    shape = uniform_passes(1.0, np.array([1.0, 65536.0]), 0.0)
    measured = expected_kernel_s(hw, model, shape)
    transferred = expected_kernel_s(dataclasses.replace(hw, achievable_flops_per_s={}), model,
                                    shape)
    # (the smooth maximum of memory and compute time lets the slower compute add < 0.5%)
    assert measured[0] == pytest.approx(transferred[0], rel=5e-3)
    assert measured[1] / transferred[1] == pytest.approx(1307.4 * 0.757 / 708, rel=0.03)


def test_the_transferred_profile_shows_datasheet_peaks_and_its_expected_error() -> None:
    """`hardware show transferred/mi300x` keeps the datasheet's dense peaks (1,307.4 bf16
    TFLOPS; the measured 708 is a row of its own that the kernels run at) and states the
    expected error of the kernel model, as the datasheet profile does."""
    from typer.testing import CliRunner

    from specsim.cli import app

    rows = {}
    for name in ("mi300x", "transferred/mi300x"):
        result = CliRunner().invoke(app, ["hardware", "show", name, "--json"])
        assert result.exit_code == 0, result.output
        rows[name] = {r["field"]: r for r in json.loads(result.output)}
    for name, got in rows.items():
        assert got["dense_bf16_TFLOPS"]["value"] == pytest.approx(1307.4), name
        assert got["achievable_bf16_TFLOPS"]["value"] == pytest.approx(708), name
        assert "5.8%" in got["transferred_expected_error"]["value"], name
    assert "A100" in rows["transferred/mi300x"]["gemm_efficiency"]["source"]


@pytest.mark.parametrize(("name", "says"), [
    ("transferred/", "name a GPU after transferred/"),
    ("transferred/calibrated/a100-80g-sxm-vidur", "already calibrated"),
    ("transferred/no-such-gpu", "unknown hardware 'no-such-gpu'"),
])
def test_a_bad_transferred_name_is_one_line(name: str, says: str) -> None:
    with pytest.raises(SpecError, match=says):
        load_hardware(name)

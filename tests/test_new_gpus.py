"""Profiles added for B300, GB200, GB300, L4, MI355X, H20 and RTX PRO 6000 Blackwell Server
Edition: the vendor's figures, pinned here by hand, equal what the loaded profile gives (SI
units), every number has a source, the transferred efficiencies apply by default (no
efficiency numbers in the files), and the command line lists, shows and runs them."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from specsim.cli import app
from specsim.specs.hardware import load_hardware
from specsim.specs.io import read_spec_file
from specsim.specs.paths import builtin_names, resolve_path

GB, TFLOPS = 1e9, 1e12

# slug: {field: vendor figure}. Memory in GB and GB/s, dense tensor rates in TFLOPS (the
# vendor's with-sparsity figure halved where it publishes only that), link in GB/s per direction.
DATASHEET: dict[str, dict[str, float]] = {
    # HGX B300 per-GPU column: 270 GB | 7.7 TB/s; HGX FP16/BF16 36 PFLOPS*, FP8 72* / 8 GPUs.
    "b300": {"hbm_GB": 270, "hbm_GB_s": 7700, "bf16": 2250, "fp8": 4500, "link_GB_s": 900,
             "sm": 160},
    # GB200 superchip (2 GPUs): 372 GB | 16 TB/s; FP16/BF16 10 PFLOPS*, FP8 20*, FP4 40*.
    "gb200": {"hbm_GB": 186, "hbm_GB_s": 8000, "bf16": 2500, "fp8": 5000, "fp4": 10000,
              "link_GB_s": 900},
    # GB300 per GPU: 279 GB | 8 TB/s; NVL72 FP16/BF16 360 PFLOPS*, FP4 1,080 dense / 72 GPUs.
    "gb300": {"hbm_GB": 279, "hbm_GB_s": 8000, "bf16": 2500, "fp8": 5000, "fp4": 15000,
              "link_GB_s": 900, "sm": 160},
    # L4: 24 GB, 300 GB/s; BF16 242*, FP8 485* TFLOPS; PCIe Gen4 x16 64 GB/s bidirectional.
    "l4": {"hbm_GB": 24, "hbm_GB_s": 300, "bf16": 121, "fp8": 242.5, "link_GB_s": 32},
    # MI355X: 288 GB HBM3E, 8 TB/s; FP16/BF16 2.5 PFLOPS, FP8 5 PFLOPS dense; 7 x 153.6 GB/s xGMI.
    "mi355x": {"hbm_GB": 288, "hbm_GB_s": 8000, "bf16": 2500, "fp8": 5000, "link_GB_s": 537.6,
               "sm": 256},
    # H20 (LMSYS / Ant Group H20-vs-H800 table, dense): 96 GB, 4000 GB/s; FP16/BF16 148,
    # FP8 296 TFLOPS; NVLink 900 GB/s bidirectional; 78 SMs (device query).
    "h20": {"hbm_GB": 96, "hbm_GB_s": 4000, "bf16": 148, "fp8": 296, "link_GB_s": 450, "sm": 78},
    # RTX PRO 6000 Blackwell Server Edition: 96 GB GDDR7, 1597 GB/s; FP16|BF16 1 PFLOP,
    # FP8 2 PFLOPS, FP4 4 PFLOPS (sparse, halved); PCIe Gen5 x16 128 GB/s, no NVLink; 188 SMs.
    "rtx-pro-6000-server": {"hbm_GB": 96, "hbm_GB_s": 1597, "bf16": 1000 / 2, "fp8": 2000 / 2,
                            "fp4": 4000 / 2, "link_GB_s": 128 / 2, "sm": 188},
}

# Every dense rate of the two profiles added last, typed from the figures each source prints
# (TFLOPS; int8 in TOPS), and the figures left out because no source gives them.
DENSE_TFLOPS: dict[str, dict[str, float]] = {
    # H20: TF32 74, BF16/FP16 148, FP8 296, INT8 296 TOPS, all dense (no halving); FP32 left out.
    "h20": {"tf32": 74, "bf16": 148, "fp16": 148, "fp8": 296, "int8": 296},
    # RTX PRO 6000 Server Edition page: FP32 120, TF32 234 (dense, as printed), FP16|BF16 1 PFLOP,
    # FP8 2 PFLOPS, FP4 4 PFLOPS (sparse: dense = half); no INT8 row.
    "rtx-pro-6000-server": {"fp32": 120, "tf32": 234, "bf16": 1000 / 2, "fp16": 1000 / 2,
                            "fp8": 2000 / 2, "fp4": 4000 / 2},
}
LINKS: dict[str, tuple[float, float]] = {  # (latency us, PCIe GB/s per direction)
    "h20": (16, 128 / 2),  # NVLink 4 + NVSwitch stand-in (nccl #1259); GH100 SXM5 PCIe Gen5 x16
    "rtx-pro-6000-server": (36.07, 128 / 2),  # b12x PR #139 NCCL on RTX PRO 6000; PCIe Gen5 x16
}


def test_new_profiles_are_built_in() -> None:
    assert set(DATASHEET) <= set(builtin_names("hardware"))


@pytest.mark.parametrize("slug", sorted(DATASHEET))
def test_vendor_figures_match_the_loaded_profile(slug: str) -> None:
    want, hw = DATASHEET[slug], load_hardware(slug)
    assert hw.hbm_capacity_bytes == pytest.approx(want["hbm_GB"] * GB)
    assert hw.hbm_bandwidth_bytes_per_s == pytest.approx(want["hbm_GB_s"] * GB)
    for dtype in ("bf16", "fp8", "fp4"):
        if dtype in want:
            assert hw.peak_flops_per_s[dtype] == pytest.approx(want[dtype] * TFLOPS)
    assert hw.flops_per_s("fp16") == hw.flops_per_s("bf16")
    assert hw.interconnect_bandwidth_bytes_per_s == pytest.approx(want["link_GB_s"] * GB)
    assert hw.sm_count == want.get("sm", 0)


@pytest.mark.parametrize("slug", sorted(DATASHEET))
def test_every_number_has_a_source(slug: str) -> None:
    spec = read_spec_file(resolve_path("hardware", slug))  # raises on an unsourced number
    hw = load_hardware(slug)
    keys = ["memory.hbm_capacity_GB", "memory.hbm_bandwidth_GB_per_s",
            "interconnect.bandwidth_GB_per_s", "interconnect.latency_us",
            "pcie.bandwidth_GB_per_s"]
    keys += [f"compute.dense_TFLOPS.{k}" for k in hw.peak_flops_per_s]
    if hw.sm_count:
        keys.append("compute.sm_count")
    for key in keys:
        assert spec.sources.get(key, "").strip(), f"{slug}: {key} has no source"


@pytest.mark.parametrize("slug", sorted(DATASHEET))
def test_datasheet_profile_gets_the_transferred_efficiency(slug: str) -> None:
    hw = load_hardware(slug)
    assert not hw.is_calibrated and not hw.achievable_flops_per_s
    transferred = load_hardware(f"transferred/{slug}")
    assert transferred.is_calibrated
    assert transferred.efficiency.gemm.sm_count == hw.sm_count or hw.sm_count == 0


@pytest.mark.parametrize("slug", sorted(DENSE_TFLOPS))
def test_every_dense_rate_of_the_last_two_profiles(slug: str) -> None:
    hw = load_hardware(slug)
    assert dict(hw.peak_flops_per_s) == pytest.approx(
        {dtype: tflops * TFLOPS for dtype, tflops in DENSE_TFLOPS[slug].items()})
    latency_us, pcie_gb_s = LINKS[slug]
    assert hw.interconnect_latency_s == pytest.approx(latency_us * 1e-6)
    assert hw.pcie_bandwidth_bytes_per_s == pytest.approx(pcie_gb_s * GB)
    assert not hw.allreduce_s  # no engine all-reduce measured on either GPU


def test_h20_is_bandwidth_rich_and_compute_poor() -> None:
    """The H20's dense bf16 roof sits at 148 / 4.0 = 37 ops per byte, an eighth of the H100's."""
    h20, h100 = load_hardware("h20"), load_hardware("h100-sxm")
    assert h20.ops_per_byte == pytest.approx(37)
    assert h20.ops_per_byte < h100.ops_per_byte / 7


def test_rtx_pro_6000_server_is_not_the_workstation_edition() -> None:
    """The Server Edition's 1597 GB/s, not the Workstation Edition's 1792, and no NVLink."""
    hw = load_hardware("rtx-pro-6000-server")
    assert hw.hbm_bandwidth_bytes_per_s == pytest.approx(1597 * GB)
    assert "no NVLink" in hw.interconnect_name
    assert hw.interconnect_bandwidth_bytes_per_s == hw.pcie_bandwidth_bytes_per_s


def test_hardware_list_shows_the_last_two_profiles() -> None:
    result = CliRunner().invoke(app, ["hardware", "list"])
    assert result.exit_code == 0, result.output
    assert "h20 " in result.output and "NVIDIA H20 96GB" in result.output
    assert "rtx-pro-6000-server" in result.output
    assert "RTX PRO 6000 Blackwell Server Edition" in result.output


@pytest.mark.parametrize("slug", sorted(DENSE_TFLOPS))
def test_hardware_show_prints_sources_and_the_expected_error(slug: str) -> None:
    result = CliRunner().invoke(app, ["hardware", "show", slug])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    assert "transferred_expected_error" in lines
    assert "within about 5.8% (8.4% at n <= 64)" in lines["transferred_expected_error"]
    assert "sm_count" in lines and str(int(DATASHEET[slug]["sm"])) in lines["sm_count"]


@pytest.mark.parametrize("slug", sorted(DENSE_TFLOPS))
def test_roofline_runs_on_the_last_two_profiles(slug: str) -> None:
    result = CliRunner().invoke(app, ["roofline", "--hardware", slug, "--model", "llama-3.1-8b"])
    assert result.exit_code == 0, result.output
    assert f"llama-3.1-8b on {slug}" in result.output
    assert "memory" in result.output  # one decoded token is memory-bound on both

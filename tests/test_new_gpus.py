"""Profiles added for B300, GB200, GB300, L4 and MI355X: the vendor's figures, pinned here by
hand, equal what the loaded profile gives (SI units), every number has a source, and the
transferred efficiencies apply by default (no efficiency numbers in the files)."""

from __future__ import annotations

import pytest

from specsim.specs.hardware import load_hardware
from specsim.specs.io import builtin_names, read_spec_file, resolve_path

GB, TFLOPS = 1e9, 1e12

# slug: {field: vendor figure}. Memory in GB and GB/s, dense tensor rates in TFLOPS (the
# vendor's with-sparsity figure halved where it publishes only that), link in GB/s per direction.
DATASHEET = {
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

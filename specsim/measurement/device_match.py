"""Is a profile measured on the GPU a hardware profile describes? And is its fit any better?

The calibration policy, applied by `specsim.measurement.calibrate.calibrate` for every caller
(command line or notebook): a profile of another device is refused (`check_device`), the
calibrated profile is named for the device measured (`calibrated_name`), a fit worse than the
datasheet is refused (`worse_than_datasheet`), and a fit streaming far less than a real GPU
does is flagged (`low_bandwidth`).

A profile CSV names the device it ran on (`# device:` in its header: torch's CUDA device name,
or the CPU model). A hardware YAML names a GPU ("NVIDIA H100 SXM5 80GB"). Both are reduced to
the GPU's product name (H100, A100, MI300X, ...); a profile of one GPU calibrating another's
datasheet, or a CPU profile calibrating a GPU, would write a file that says "H100" about a
machine that is not one. Memory size and form factor (SXM, PCIe) are not compared: torch's
device names do not always say them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from specsim.errors import SpecError

if TYPE_CHECKING:
    from specsim.specs.hardware import Hardware

# Product names, longest first so that "L40S" is not read as "L40" nor "H200" as "H20".
GPU_PRODUCTS = ("GH200", "GB200", "MI325X", "MI300X", "MI300A", "MI250X", "MI250", "MI210",
                "H200", "H100", "H800", "H20", "B200", "B100", "A100", "A800", "A6000", "A40",
                "A30", "A10G", "A10", "L40S", "L40", "L4", "V100", "T4", "RTX 6000", "RTX 4090",
                "RTX 3090")
_PRODUCT = re.compile(r"(?<![A-Z0-9])(" + "|".join(re.escape(p) for p in GPU_PRODUCTS)
                      + r")(?![A-Z0-9])")


def gpu_product(name: str) -> str | None:
    """The GPU product a device or profile name mentions ('H100'), or None (a CPU, unknown)."""
    match = _PRODUCT.search(name.upper())
    return match.group(1) if match else None


def device_mismatch(measured: str, hardware_name: str) -> str | None:
    """Why a profile measured on `measured` cannot calibrate `hardware_name`, or None.

    None also when the hardware names no known GPU (a user's own YAML for a CPU or a new GPU):
    nothing to compare.
    """
    want = gpu_product(hardware_name)
    if want is None:
        return None
    have = gpu_product(measured)
    if have is None:
        return f"measured on '{measured}', not on a GPU named {want}"
    if have != want:
        return f"measured on '{measured}' ({have}), not on a GPU named {want}"
    return None


def overall_mape(errors: pd.DataFrame, split: str) -> tuple[float, float] | None:
    """(calibrated, datasheet) MAPE in % over one split's points, weighted by point count."""
    rows = errors[errors["split"] == split]
    if not len(rows):
        return None
    weights = rows["points"].to_numpy(float)
    return (float(np.average(rows["mape_calibrated"], weights=weights)),
            float(np.average(rows["mape_datasheet"], weights=weights)))


def check_device(measured: str, hardware_name: str, *, allow_mismatch: bool) -> str:
    """'' when kernels measured on `measured` may calibrate `hardware_name`; with
    `allow_mismatch`, the warning to show when they may not; else SpecError."""
    why = device_mismatch(measured, hardware_name)
    if why is None:
        return ""
    if not allow_mismatch:
        raise SpecError(f"{why}, but the hardware profile is {hardware_name}; use that device's "
                        "hardware profile, or pass allow_device_mismatch=True",
                        parameter="hardware")
    return (f"{why}, the hardware profile is {hardware_name}; the calibrated profile is named "
            f"for {measured}")


def calibrated_name(measured: str, hardware_name: str) -> str:
    """The name of a calibrated profile: the device the kernels ran on, with the datasheet it
    was fitted from ('' measured: the datasheet's name, calibrated)."""
    if not measured:
        return f"{hardware_name} (calibrated)"
    return f"{measured} (calibrated; datasheet: {hardware_name})"


# A calibrated profile is refused when its MAPE on the training or the held-out split exceeds
# the datasheet's by more than this factor (1: any worse at all): a fit that predicts worse than
# the numbers it started from is a sign of a noisy or foreign measurement, not a calibration.
WORSE_THAN_DATASHEET = 1.0


def worse_than_datasheet(errors: pd.DataFrame) -> str:
    """'' if the fit is no worse than the datasheet on any split, else the numbers."""
    from specsim.measurement.plausibility import percent_text

    worse = []
    for split in ("train", "holdout"):
        pair = overall_mape(errors, split)
        if pair is not None and pair[0] > WORSE_THAN_DATASHEET * pair[1]:
            worse.append(f"{split} MAPE {percent_text(pair[0])} calibrated vs "
                         f"{percent_text(pair[1])} datasheet")
    return ", ".join(worse)


class WorseThanDatasheet(SpecError):
    """A calibration refused for predicting worse than the datasheet; `calibration` holds it
    (its error tables show how much worse)."""

    def __init__(self, comparison: str, calibration: Any) -> None:
        super().__init__(f"the calibrated profile is worse than the datasheet ({comparison}); "
                         "pass accept_worse=True to keep it", parameter="accept_worse")
        self.calibration = calibration


# Real GPUs stream 75-90% of datasheet bandwidth in weight GEMMs (DESIGN.md section 9); a fit
# far below that says the kernels ran on another, slower or shared device than the profile's.
PLAUSIBLE_BANDWIDTH = 0.5


def fitted_efficiency(fitted_hw: Hardware, datasheet: Hardware) -> dict[str, float]:
    """The fitted GEMM fractions of the datasheet and what they mean in bytes/s and flop/s."""
    gemm = fitted_hw.efficiency.gemm
    peak = datasheet.peak_flops_per_s.get("bf16", max(datasheet.peak_flops_per_s.values()))
    return {"gemm_bandwidth_fraction": float(gemm.bandwidth),
            "gemm_bandwidth_GB_per_s": float(gemm.bandwidth * datasheet.hbm_bandwidth_bytes_per_s
                                             / 1e9),
            "gemm_flops_fraction": float(gemm.flops),
            "gemm_bf16_TFLOPS": float(gemm.flops * peak / 1e12),
            "gemm_floor_us": float(gemm.floor_s * 1e6)}


def low_bandwidth(fitted: dict[str, float], datasheet: Hardware) -> str:
    """Why the fit (`fitted_efficiency`) is outside what this GPU can be ('' when it is not)."""
    share = fitted["gemm_bandwidth_fraction"]
    if share >= PLAUSIBLE_BANDWIDTH:
        return ""
    return (f"the GEMMs reached {share:.0%} of the {datasheet.name} datasheet bandwidth "
            f"({fitted['gemm_bandwidth_GB_per_s']:,.0f} of "
            f"{datasheet.hbm_bandwidth_bytes_per_s / 1e9:,.0f} GB/s), where real GPUs reach "
            "75-90%: were these kernels measured on this GPU (not a slower, shared or "
            "throttled one)?")

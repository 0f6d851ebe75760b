"""Is a profile measured on the GPU a hardware profile describes? And is its fit any better?

A profile CSV names the device it ran on (`# device:` in its header: torch's CUDA device name,
or the CPU model). A hardware YAML names a GPU ("NVIDIA H100 SXM5 80GB"). Both are reduced to
the GPU's product name (H100, A100, MI300X, ...); a profile of one GPU calibrating another's
datasheet, or a CPU profile calibrating a GPU, would write a file that says "H100" about a
machine that is not one. Memory size and form factor (SXM, PCIe) are not compared: torch's
device names do not always say them.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

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

"""The README's calibration table and figure, from Vidur's measured A100/A40 kernel tables.

Train on Llama-2-7B's rows, predict every other model's per-layer weight-GEMM time (the sum
of its four GEMMs at each token count and TP degree), and print the mean absolute percentage
error (per held-out model, pooled, and per token region for the held-out models and the
training model itself) of three models of T(n): the datasheet roofline, a three-parameter
fit (effective bandwidth, effective flops, a floor) and specsim's calibrated GEMM model. Writes
reports/calibration-a100.png (measured vs datasheet vs calibrated).

Usage: python benchmarks/calibration_table.py [VIDUR_DIR]   (default ../shared/data/vidur_profiles)
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from specsim.measurement.calibrate import REGIONS, calibrate, predict_s
from specsim.measurement.gemm_fit import fit_gemm_efficiency
from specsim.measurement.tables import from_vidur
from specsim.present.plots import calibration_figure
from specsim.specs.hardware import load_hardware

TRAIN = "meta-llama/Llama-2-7b-hf"
DEVICES = (("a100", "a100-80g-sxm"), ("a40", "a40"))
REPO = Path(__file__).resolve().parent.parent


def three_parameter(points, hw):  # type: ignore[no-untyped-def]
    """The calibrated profile with only bandwidth, flops and floor fitted (hard max)."""
    train = points[(points["split"] == "train") & (points["op_class"] == "gemm")]
    bw, peak = hw.hbm_bandwidth_bytes_per_s, hw.flops_per_s("fp16")
    eff, _ = fit_gemm_efficiency(
        train["m"].to_numpy(float), train["k"].to_numpy(float), train["n"].to_numpy(float),
        train["time_s"].to_numpy(float), weight_bytes_per_param=2, act_bytes_per_elem=2,
        bandwidth_bytes_per_s=bw, flops_per_s=peak, params=("bandwidth", "flops", "floor_s"))
    return dataclasses.replace(hw, efficiency=dataclasses.replace(hw.efficiency, gemm=eff))


def mape(measured, predicted) -> float:  # type: ignore[no-untyped-def]
    return float(np.mean(np.abs(np.asarray(predicted) / np.asarray(measured) - 1)) * 100)


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared/data/vidur_profiles"
    print(f"Trained on {TRAIN}; MAPE (%) of the summed per-layer weight-GEMM time over all n "
          "and TP degrees\n")
    print("| GPU | model | datasheet | 3-parameter fit | calibrated |")
    print("|---|---|---:|---:|---:|")
    fitted = {}
    for device, slug in DEVICES:
        points = from_vidur(root, device)
        start = time.perf_counter()
        result = calibrate(points, load_hardware(slug), train_models=[TRAIN], source="table")
        fit_s = time.perf_counter() - start
        pts = result.points.copy()
        pts["three_s"] = predict_s(pts, three_parameter(pts, load_hardware(slug)))
        gemm = pts[pts["op_class"] == "gemm"]
        sums = gemm.groupby(["model", "tp", "m", "split"], as_index=False)[
            ["time_s", "datasheet_s", "three_s", "predicted_s"]].sum()
        pooled = {k: [] for k in ("datasheet_s", "three_s", "predicted_s")}
        for model, rows in sums.groupby("model"):
            if model == TRAIN:
                continue
            errs = [mape(rows["time_s"].to_numpy(), rows[k].to_numpy()) for k in pooled]
            for k in pooled:
                pooled[k].append(rows[["time_s", k]].to_numpy())
            print(f"| {device} | {model} | {errs[0]:.1f} | {errs[1]:.1f} | {errs[2]:.1f} |")
        all_err = [mape(np.concatenate(v)[:, 0], np.concatenate(v)[:, 1]) for v in
                   pooled.values()]
        print(f"| {device} | **all held-out models** | {all_err[0]:.1f} | {all_err[1]:.1f} | "
              f"**{all_err[2]:.1f}** |")
        for who, rows in (("held-out", sums[sums["model"] != TRAIN]),
                          ("training model", sums[sums["model"] == TRAIN])):
            for name, low, high in REGIONS:
                part = rows[(rows["m"] > low) & (rows["m"] <= high)]
                print(f"| {device} | {who}, {name} | "
                      f"{mape(part['time_s'], part['datasheet_s']):.1f} | "
                      f"{mape(part['time_s'], part['three_s']):.1f} | "
                      f"{mape(part['time_s'], part['predicted_s']):.1f} |")
        eff = result.hardware.efficiency.gemm
        fitted[device] = result
        print(f"<!-- {device}: bandwidth {eff.bandwidth:.3f}, flops {eff.flops:.3f}, floor "
              f"{eff.floor_s * 1e6:.2f} us, p {eff.overlap_p:.2f}, tile {eff.tile_fraction:.2f}, "
              f"epilogue {eff.epilogue_k:.0f}, wave {eff.wave_fraction:.2f}; notes: "
              f"{list(result.notes)} -->")
        print(f"<!-- {device}: fit and prediction of {len(points)} points took {fit_s:.2f} s -->")
        if device == "a100":
            out = REPO / "reports" / "calibration-a100.png"
            calibration_figure(result.layer_sums, out,
                               title=f"A100 80GB, trained on {TRAIN}: per-layer weight GEMMs")
    transfer(root)
    print("\nwrote reports/calibration-a100.png")


def transfer(root: Path) -> None:
    """Hold one GPU out entirely: fit every model of the other, apply to its datasheet."""
    print("\nTransfer (fit every model of one GPU; predict the other from its datasheet):\n")
    print("| fitted on | predicted | all n | n <= 64 | 65-512 | > 512 |")
    print("|---|---|---:|---:|---:|---:|")
    for (src, src_slug), (dst, dst_slug) in (DEVICES, DEVICES[::-1]):
        fit = calibrate(from_vidur(root, src), load_hardware(src_slug), source="table")
        gemm = dataclasses.replace(fit.hardware.efficiency.gemm,
                                   sm_count=load_hardware(dst_slug).sm_count)
        target = load_hardware(dst_slug)
        hw = dataclasses.replace(target, efficiency=dataclasses.replace(
            target.efficiency, gemm=gemm))
        pts = from_vidur(root, dst)
        pts = pts[pts["op_class"] == "gemm"].reset_index(drop=True)
        pts["predicted_s"] = predict_s(pts, hw)
        sums = pts.groupby(["model", "tp", "m"], as_index=False)[["time_s", "predicted_s"]].sum()
        cells = [mape(sums["time_s"], sums["predicted_s"])]
        for _, low, high in REGIONS:
            part = sums[(sums["m"] > low) & (sums["m"] <= high)]
            cells.append(mape(part["time_s"], part["predicted_s"]))
        print(f"| {src} | {dst} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")


if __name__ == "__main__":
    main()

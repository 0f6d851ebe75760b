"""Calibration: fit a GPU profile's efficiency factors to measured kernel times.

Measured points (from `specsim profile`, or Vidur's public tables) are tidy rows: the op, its
class and shape, and the measured seconds. Each op class gets the factors its data supports:

- gemm: the GEMM model of `gemm_model` (effective bandwidth and flops, a memory-path floor,
  tile padding, an epilogue term and a smooth overlap), fitted on the weight GEMMs;
- attention: the tiled FlashAttention model (`attention_time`, fitted by `attention_fit`),
  one set of terms for the decode kernel and one for the causal (prefill, verification)
  kernel, where the GPU's SM count is known and both kinds were measured; also the roofline's
  effective bandwidth, flops and floor on the same points, which MLA and linear attention
  (not tiled) use; tree-masked attention is summarized by its median slowdown over causal
  attention of the same shape;
- memory: effective bandwidth and a floor, fitted on the sampler's passes over the vocabulary.

Fits minimize a robust loss of log(predicted / measured) on the training split; every point is
then predicted with the datasheet profile and with the calibrated one, so the error on held-out
points (other models, or every third point of the token grid) is measured, not assumed.

A fit the GPU's physics rules out is refused (`plausibility_problems`): measured times faster
than the datasheet or slower than any kernel can be (a unit mistake: milliseconds read as
seconds), and fitted efficiencies, floors and overheads outside what real GPUs show. So are a
profile of another device than the hardware profile's and a fit that predicts worse than the
datasheet (`device_match`); the calibrated profile is named for the device measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specsim.errors import SpecError, parameter_error
from specsim.forward.attention_time import attention_kernel_time_s
from specsim.forward.gemm import gemm_time_s
from specsim.forward.ops import attention_work, sampling_bytes
from specsim.forward.shapes import FloatArray, uniform_passes
from specsim.measurement.attention_fit import fit_attention_kernel
from specsim.measurement.device_match import (
    WorseThanDatasheet,
    calibrated_name,
    check_device,
    fitted_efficiency,
    low_bandwidth,
    worse_than_datasheet,
)
from specsim.measurement.gemm_fit import Prior, fit_gemm_efficiency, robust_log_fit
from specsim.measurement.plausibility import (
    ROOFLINE_BOUNDS,
    ImplausibleCalibration,
    efficiency_problems,
    measurement_problems,
    percent_text,
)
from specsim.specs.dtypes import BYTES_PER_PARAM
from specsim.specs.hardware import (
    AttentionKernels,
    Efficiency,
    GemmEfficiency,
    Hardware,
    OpEfficiency,
)
from specsim.specs.transferred import prior_gemm

# Columns of the tidy measurement table every reader produces.
MEASUREMENT_COLUMNS = ("model", "tp", "op", "op_class", "dtype", "m", "k", "n", "count",
                       "batch", "context", "queries", "mask", "kv_heads", "time_s")
# Without named training models, every HOLDOUT_EVERY-th point of each op's grid is held out.
HOLDOUT_EVERY = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """A fitted profile and the evidence: per-point predictions and the error table."""

    hardware: Hardware
    points: pd.DataFrame  # measurements + predicted_s, datasheet_s, split
    errors: pd.DataFrame  # model, op_class, split, points, mape_calibrated, mape_datasheet
    layer_errors: pd.DataFrame  # the same on GEMM time summed per (model, tp, m)
    # GEMM time per (model, tp, m, split) summed over a layer's weight GEMMs: measured,
    # predicted and datasheet seconds (`layer_sums` of `points`; the calibration figure's data).
    layer_sums: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    tree_attention_slowdown: float
    region_errors: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    size_errors: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    notes: tuple[str, ...] = ()  # fields the points could not identify, fields at a bound
    # What the GPU's physics rules out (plausibility_problems), where the caller accepted it.
    problems: tuple[str, ...] = ()
    # What the caller should be told: another device accepted, a worse fit accepted, a fitted
    # bandwidth far below a real GPU's (device_match).
    warnings: tuple[str, ...] = ()


def assign_split(points: pd.DataFrame, train_models: Sequence[str] | None) -> pd.Series:
    """'train' or 'holdout' per point.

    With named training models, their points train and every other model's are held out; an
    op class the named models have no points of (e.g. a separate attention table) and a
    profile without named models are split by grid position instead: every HOLDOUT_EVERY-th
    point of each op's grid is held out.
    """
    # One grid per op and shape: the token grid of a GEMM, the batch x context x queries grid
    # of an attention kernel, the rows of the sampler.
    keys = ["model", "tp", "op", "k", "n", "mask"]
    order = points.groupby(keys, sort=False).cumcount()
    split = pd.Series(np.where(order % HOLDOUT_EVERY == HOLDOUT_EVERY - 1, "holdout", "train"),
                      index=points.index)
    if not train_models:
        return split
    unknown = sorted(set(train_models) - set(points["model"]))
    if unknown:
        have = ", ".join(sorted(set(points["model"])))
        raise parameter_error("train_models", f"{unknown[0]}: no such model in the profile "
                              f"(has: {have})")
    named = points["model"].isin(train_models)
    by_model = pd.Series(np.where(named, "train", "holdout"), index=points.index)
    covered = points["op_class"].isin(set(points.loc[named, "op_class"]))
    return by_model.where(covered, split)


def _rates(hw: Hardware, dtype: str) -> tuple[float, float, float]:
    """Bandwidth, peak flops of the compute dtype, and bytes per element of `dtype`."""
    if dtype not in BYTES_PER_PARAM:
        raise SpecError(f"profile dtype '{dtype}' is not one of {', '.join(BYTES_PER_PARAM)}")
    return hw.hbm_bandwidth_bytes_per_s, hw.flops_per_s(dtype), BYTES_PER_PARAM[dtype]


def _gemm_s(rows: pd.DataFrame, hw: Hardware, eff: GemmEfficiency) -> FloatArray:
    out = np.empty(len(rows))
    for dtype, group in rows.groupby("dtype"):
        bw, peak, elem = _rates(hw, str(dtype))
        idx = rows.index.get_indexer(group.index)
        out[idx] = group["count"].to_numpy() * gemm_time_s(
            group["m"].to_numpy(float), group["k"].to_numpy(float), group["n"].to_numpy(float),
            weight_bytes_per_param=elem, act_bytes_per_elem=elem, bandwidth_bytes_per_s=bw,
            flops_per_s=peak, eff=eff)
    return out


def _attention_terms(rows: pd.DataFrame, hw: Hardware) -> tuple[FloatArray, FloatArray]:
    """Datasheet memory and compute seconds of each attention row (the roofline's formula)."""
    memory, compute = np.empty(len(rows)), np.empty(len(rows))
    for dtype, group in rows.groupby("dtype"):
        bw, peak, elem = _rates(hw, str(dtype))
        idx = rows.index.get_indexer(group.index)
        shape = uniform_passes(group["queries"].to_numpy(float), group["batch"].to_numpy(float),
                               group["context"].to_numpy(float))
        head_dim = group["n"].to_numpy(float)
        work = attention_work(shape, heads=group["k"].to_numpy(float),
                              kv_bytes_per_token=2 * group["kv_heads"].to_numpy(float)
                              * head_dim * elem, qk_dim=head_dim, v_dim=head_dim,
                              act_bytes=elem)
        bytes_ = work.activation_bytes + work.kv_read_bytes + work.kv_write_bytes
        memory[idx], compute[idx] = bytes_ / bw, work.flops / peak
    return memory, compute


def _memory_terms(rows: pd.DataFrame, hw: Hardware) -> FloatArray:
    rows_m = rows["m"].to_numpy(float)
    return sampling_bytes(rows_m, rows["n"].to_numpy(float)) / hw.hbm_bandwidth_bytes_per_s


def _roofline_s(memory: FloatArray, compute: FloatArray, eff: OpEfficiency) -> FloatArray:
    return np.maximum(memory / eff.bandwidth, compute / eff.flops) + eff.floor_s


def _fit_roofline(memory: FloatArray, compute: FloatArray, time: FloatArray, *,
                  fit_flops: bool) -> OpEfficiency:
    """Effective bandwidth (and flops) fractions and a floor, robust least squares on log error."""
    def unpack(x: FloatArray) -> OpEfficiency:
        return OpEfficiency(bandwidth=float(np.exp(x[0])),
                            flops=float(np.exp(x[1])) if fit_flops else 1.0,
                            floor_s=float(np.exp(x[-1])))

    start = np.log([0.8] + ([0.6] if fit_flops else []) + [max(float(time.min()) / 2, 1e-9)])
    # Physical: no kernel beats the datasheet (fractions <= 1), floors are >= 0.
    names = ["bandwidth"] + (["flops"] if fit_flops else []) + ["floor_s"]
    bounds = (np.log([ROOFLINE_BOUNDS[n][0] for n in names]),
              np.log([ROOFLINE_BOUNDS[n][1] for n in names]))
    fit = robust_log_fit(lambda x: _roofline_s(memory, compute, unpack(x)), time, start, bounds)
    return unpack(fit.x)


# Widths of the cross-GPU priors in the log of each field (0.25: +-25% at one sigma). The
# fractions: fitted GEMM bandwidth 0.77-0.86 and flops 0.75-0.79 on Vidur's A100 and A40
# (docs/calibration.md), 75-90% of the bandwidth quoted for real GPUs (DESIGN.md section 9), so
# 0.78 +- 25% (0.61-1.0) holds every GPU measured within one sigma and still lets a table move
# it anywhere in (0, 1]. The floor: 2.0-6.7 us fitted per single model on the two GPUs
# (transferred.py: 5.5 / 2.6 us all-model), so 4 us times or over a factor e^0.7 = 2 (2-8 us).
# Weak: one point's worth of evidence (robust_log_fit), against 176 points at n <= 64 alone.
PRIOR_LOG_SIGMA = {"bandwidth": 0.25, "flops": 0.25, "floor_s": 0.7}


def cross_gpu_priors(sm_count: int) -> dict[str, Prior]:
    """Weak priors at the transferred (cross-GPU) values on the roofline fields: bandwidth,
    flops and floor (widths PRIOR_LOG_SIGMA). The shape terms get none: their flat ends (no
    tile padding, a hard max) are legitimate answers a prior would wrongly pull away from."""
    eff = prior_gemm(sm_count)
    return {name: Prior(float(getattr(eff, name)), sigma)
            for name, sigma in PRIOR_LOG_SIGMA.items()}


def _tree_slowdown(points: pd.DataFrame) -> float:
    """Median time of tree-masked over causal attention with the same batch, queries, context."""
    attn = points[points["op_class"] == "attention"]
    keys = ["model", "tp", "batch", "queries", "context"]
    tree = attn[attn["mask"] == "tree"].set_index(keys)["time_s"]
    causal = attn[attn["mask"] == "causal"].set_index(keys)["time_s"]
    ratio = (tree / causal).dropna()
    return float(ratio.median()) if len(ratio) else 1.0


def fit_efficiency(points: pd.DataFrame, hw: Hardware) -> Efficiency:
    """Efficiency factors per op class from the points given (the training split)."""
    return fit_efficiency_with_notes(points, hw)[0]


def fit_efficiency_with_notes(points: pd.DataFrame, hw: Hardware
                              ) -> tuple[Efficiency, tuple[str, ...]]:
    """fit_efficiency, and a line per GEMM field the points could not identify (kept at the
    transferred prior) or that ended at its physical bound."""
    gemm_rows = points[points["op_class"] == "gemm"]
    if gemm_rows.empty:
        raise SpecError("no GEMM points to calibrate on (the training split is empty?)")
    dtype = str(gemm_rows["dtype"].mode().iloc[0])
    gemm_rows = gemm_rows[gemm_rows["dtype"] == dtype]
    bw, peak, elem = _rates(hw, dtype)
    # Output tiles run in waves over the GPU's SMs: the wave term needs their count.
    gemm, diag = fit_gemm_efficiency(
        gemm_rows["m"].to_numpy(float), gemm_rows["k"].to_numpy(float),
        gemm_rows["n"].to_numpy(float),
        gemm_rows["time_s"].to_numpy(float) / gemm_rows["count"].to_numpy(float),
        weight_bytes_per_param=elem, act_bytes_per_elem=elem, bandwidth_bytes_per_s=bw,
        flops_per_s=peak, base=GemmEfficiency(sm_count=hw.sm_count),
        priors=cross_gpu_priors(hw.sm_count))
    notes = tuple(f"gemm.{name}: {why}" for name, why in diag.kept_priors + diag.loosely_fitted)
    notes += tuple(f"gemm.{name}: at its physical bound (1 = datasheet; the points would have "
                   f"it higher: is {hw.name} the GPU they ran on?)" for name in diag.at_bound)
    attention = OpEfficiency()
    attn = points[(points["op_class"] == "attention") & (points["mask"] != "tree")]
    if len(attn) >= 3:
        memory, compute = _attention_terms(attn, hw)
        attention = _fit_roofline(memory, compute, attn["time_s"].to_numpy(float),
                                  fit_flops=True)
    kernels, why = fit_attention_kernels(attn, hw)
    notes += tuple(f"attention: {part}" for part in why.split("; ") if part)
    memory_eff = OpEfficiency()
    sampling = points[points["op_class"] == "memory"]
    if len(sampling) >= 2:
        memory_eff = _fit_roofline(_memory_terms(sampling, hw), np.zeros(len(sampling)),
                                   sampling["time_s"].to_numpy(float), fit_flops=False)
    return Efficiency(gemm=gemm, attention=attention, memory=memory_eff,
                      attention_kernels=kernels), notes


# Fewest points of each kind (decode, causal) the tiled attention fit takes (7 fitted terms).
MIN_KERNEL_POINTS = 14


def _kernel_geometry(rows: pd.DataFrame, hw: Hardware) -> dict[str, Any]:
    """Heads, head width and datasheet rates of attention rows (one shape per profile)."""
    bw, peak, elem = _rates(hw, str(rows["dtype"].iloc[0]))
    return {"q_heads": float(rows["k"].iloc[0]), "kv_heads": float(rows["kv_heads"].iloc[0]),
            "head_dim": float(rows["n"].iloc[0]), "bandwidth_bytes_per_s": bw,
            "flops_per_s": peak, "sm_count": hw.sm_count, "act_bytes": elem}


def fit_attention_kernels(attn: pd.DataFrame, hw: Hardware
                          ) -> tuple[AttentionKernels | None, str]:
    """The tiled model's decode and prefill terms, fitted separately (two kernels), and the
    terms the points did not identify ('; '-joined); or None and why not (no SM count, too
    few points of a kind, more than one attention shape)."""
    if attn.empty:
        return None, ""
    if hw.sm_count < 1:
        return None, "tiled model not fitted: the profile gives no sm_count (roofline kept)"
    shapes = attn[["k", "kv_heads", "n", "dtype"]].drop_duplicates()
    if len(shapes) > 1:
        return None, "tiled model not fitted: more than one head shape (roofline kept)"
    fitted = {}
    kept: list[str] = []
    for name, rows in (("decode", attn[attn["queries"] == 1]),
                       ("prefill", attn[attn["queries"] > 1])):
        if len(rows) < MIN_KERNEL_POINTS:
            return None, (f"tiled model not fitted: {len(rows)} {name} points, needs "
                          f">= {MIN_KERNEL_POINTS} (roofline kept)")
        fit = fit_attention_kernel(
            rows["batch"], rows["context"], rows["queries"], rows["mask"] != "none",
            rows["time_s"], **_kernel_geometry(rows, hw))
        fitted[name] = fit.eff
        kept += [f"{name}.{why}" for why in fit.kept]
    return AttentionKernels(decode=fitted["decode"], prefill=fitted["prefill"]), "; ".join(kept)


def _tiled_attention_s(rows: pd.DataFrame, hw: Hardware, kernels: AttentionKernels
                       ) -> FloatArray:
    """Per attention row, the tiled model's seconds (tree rows: causal x the slowdown)."""
    geometry = _kernel_geometry(rows, hw)
    queries = rows["queries"].to_numpy(float)
    out = np.empty(len(rows))
    for name, pick in (("decode", queries == 1), ("prefill", queries > 1)):
        part = rows[pick]
        out[pick] = attention_kernel_time_s(
            part["batch"], part["context"], part["queries"], causal=part["mask"] != "none",
            eff=getattr(kernels, name), **geometry)
    tree = (rows["mask"] == "tree").to_numpy()
    return np.where(tree, out * hw.efficiency.tree_attention_slowdown, out)


def predict_s(points: pd.DataFrame, hw: Hardware) -> FloatArray:
    """Predicted seconds of every measured point on `hw` (datasheet or calibrated)."""
    out = np.full(len(points), np.nan)
    eff = hw.efficiency
    for op_class, rows in points.groupby("op_class"):
        idx = points.index.get_indexer(rows.index)
        if op_class == "gemm":
            out[idx] = _gemm_s(rows, hw, eff.gemm)
        elif op_class == "attention" and eff.attention_kernels is not None:
            out[idx] = _tiled_attention_s(rows, hw, eff.attention_kernels)
        elif op_class == "attention":
            memory, compute = _attention_terms(rows, hw)
            out[idx] = _roofline_s(memory, compute, eff.attention)
        else:
            out[idx] = _roofline_s(_memory_terms(rows, hw), np.zeros(len(rows)), eff.memory)
    return out


def _mape(measured: pd.Series, predicted: pd.Series) -> float:
    return float(np.mean(np.abs(predicted / measured - 1.0)) * 100)


def error_table(points: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """MAPE (%) of calibrated and datasheet predictions per group of `keys`."""
    rows = []
    for key, group in points.groupby(list(keys), sort=True):
        values = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(keys, values, strict=True)), "points": len(group),
                     "mape_calibrated": _mape(group["time_s"], group["predicted_s"]),
                     "mape_datasheet": _mape(group["time_s"], group["datasheet_s"])})
    return pd.DataFrame(rows)


def layer_sums(points: pd.DataFrame) -> pd.DataFrame:
    """GEMM time summed per (model, tp, m): a layer's weight GEMMs (the Vidur tables' ops)."""
    gemm = points[points["op_class"] == "gemm"]
    sums = gemm.groupby(["model", "tp", "m", "split"], as_index=False)[
        ["time_s", "predicted_s", "datasheet_s"]].sum()
    return sums


# Token regions of the error report: decode and small speculation rounds, verification of
# larger trees and batches, prefill.
REGIONS: tuple[tuple[str, float, float], ...] = (
    ("n<=64", 0.0, 64.0), ("65-512", 64.0, 512.0), (">512", 512.0, np.inf))
# Weight-matrix sizes (bytes of one GEMM's weight shard) of the size report.
SIZES: tuple[tuple[str, float, float], ...] = (
    ("<16MB", 0.0, 16e6), ("16-64MB", 16e6, 64e6), ("64-256MB", 64e6, 256e6),
    (">256MB", 256e6, np.inf))


def _label(values: FloatArray, bins: tuple[tuple[str, float, float], ...]) -> FloatArray:
    out = np.full(values.shape, "", dtype=object)
    for name, low, high in bins:
        out[(values > low) & (values <= high)] = name
    return np.asarray(out)


def region_errors(sums: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) of the summed layer GEMM time per split and token region (REGIONS)."""
    if sums.empty:
        return pd.DataFrame()
    labelled = sums.assign(region=_label(sums["m"].to_numpy(float), REGIONS))
    return error_table(labelled, ["split", "region"])


def size_errors(points: pd.DataFrame, bytes_per_param: float = 2.0) -> pd.DataFrame:
    """MAPE (%) of single GEMMs per split and weight-shard size (SIZES)."""
    gemm = points[points["op_class"] == "gemm"]
    if gemm.empty:
        return pd.DataFrame()
    size = gemm["k"].to_numpy(float) * gemm["n"].to_numpy(float) * bytes_per_param
    return error_table(gemm.assign(weight_size=_label(size, SIZES)), ["split", "weight_size"])


def calibrate(points: pd.DataFrame, hw: Hardware, *, train_models: Sequence[str] | None = None,
              source: str, accept_implausible: bool = False, measured_on: str = "",
              allow_device_mismatch: bool = False, accept_worse: bool = False) -> Calibration:
    """Fit `hw`'s efficiency on the training split and measure the error on every point.

    measured_on: the device the kernels ran on (a profile's `# device:` line; '' unknown, e.g.
    Vidur's tables, whose folder chose `hw`); the calibrated profile is named for it.
    Raises ImplausibleCalibration when the measured times or the fitted efficiency are
    outside the GPU's physics (plausibility_problems), unless `accept_implausible`: then the
    problems are kept in the result's `problems`. Raises SpecError when `measured_on` is
    another GPU than `hw` (unless `allow_device_mismatch`), and WorseThanDatasheet when the
    fit predicts worse than the datasheet (unless `accept_worse`); accepted, each is one of
    the result's `warnings`.
    """
    missing = [c for c in MEASUREMENT_COLUMNS if c not in points.columns]
    if missing:
        raise SpecError(f"measurements lack column(s) {', '.join(missing)}")
    if hw.is_calibrated:
        raise SpecError(f"{hw.path}: already calibrated; calibrate the datasheet profile")
    warnings = [check_device(measured_on, hw.name, allow_mismatch=allow_device_mismatch)
                if measured_on else ""]
    points = points.reset_index(drop=True).copy()
    # A unit mistake shows in the times alone: refuse before the (longer) fit.
    ideal = predict_s(points, dataclasses.replace(hw, efficiency=Efficiency()))
    problems = measurement_problems(points["op_class"], points["time_s"], ideal, gpu=hw.name)
    if problems and not accept_implausible:
        raise ImplausibleCalibration(problems)
    points["split"] = assign_split(points, train_models)
    efficiency, notes = fit_efficiency_with_notes(points[points["split"] == "train"], hw)
    slowdown = _tree_slowdown(points[points["split"] == "train"])
    efficiency = dataclasses.replace(efficiency, tree_attention_slowdown=max(slowdown, 1.0))
    problems += efficiency_problems(efficiency)
    if problems and not accept_implausible:
        raise ImplausibleCalibration(problems)
    calibrated = dataclasses.replace(
        hw, name=calibrated_name(measured_on, hw.name), efficiency=efficiency,
        sources={**hw.sources, "efficiency": source})
    points["predicted_s"] = predict_s(points, calibrated)
    points["datasheet_s"] = predict_s(points, hw)
    sums = layer_sums(points)
    errors = error_table(points, ["model", "op_class", "split"])
    warnings.append(low_bandwidth(fitted_efficiency(calibrated, hw), hw))
    result = Calibration(
        hardware=calibrated, points=points, errors=errors,
        layer_errors=error_table(sums, ["model", "split"]) if len(sums) else pd.DataFrame(),
        layer_sums=sums, tree_attention_slowdown=slowdown, region_errors=region_errors(sums),
        size_errors=size_errors(points), notes=notes, problems=problems,
        warnings=tuple(w for w in warnings if w))
    worse = worse_than_datasheet(errors)
    if worse and not accept_worse:
        raise WorseThanDatasheet(worse, result)
    if worse:
        result = dataclasses.replace(result, warnings=(
            f"the calibrated profile is worse than the datasheet ({worse}); kept because "
            "accept_worse=True", *result.warnings))
    return result


def calibrated_yaml(datasheet: dict[str, object], calibration: Calibration, *, source: str,
                    kernel_sources: dict[str, str] | None = None) -> dict[str, object]:
    """The datasheet profile's mapping (its sources kept) plus the fitted efficiency block;
    `kernel_sources`: the source line of the tiled attention terms per kernel."""
    from specsim.specs.hardware import efficiency_to_yaml

    out = {k: v for k, v in datasheet.items() if k != "efficiency"}
    out["name"] = calibration.hardware.name
    out["efficiency"] = efficiency_to_yaml(calibration.hardware.efficiency, source,
                                           kernel_sources)
    return out


def attention_kernel_sources(calibration: Calibration, data: str,
                             train_models: Sequence[str] | None) -> dict[str, str]:
    """One source line per tiled attention kernel: the model, the fit, its points and its
    held-out error."""
    attn = calibration.points[(calibration.points["op_class"] == "attention")
                              & (calibration.points["mask"] != "tree")]
    named = sorted(set(attn["model"]) & set(train_models or ()))
    split_rule = f"trained on {', '.join(named)}" if named else \
        f"every {_ordinal(HOLDOUT_EVERY)} point of each grid held out"
    out = {}
    for name, rows in (("decode", attn[attn["queries"] == 1]),
                       ("prefill", attn[attn["queries"] > 1])):
        held = rows[rows["split"] == "holdout"]
        error = percent_text(_mape(held["time_s"], held["predicted_s"])) if len(held) \
            else "n/a"
        kept = [n.removeprefix(f"attention: {name}.") for n in calibration.notes
                if n.startswith(f"attention: {name}.")]
        out[name] = (f"specsim calibrate: tiled attention model (specsim.forward."
                     f"attention_time) fitted by specsim.measurement.attention_fit to "
                     f"{int((rows['split'] == 'train').sum())} {name} kernels of {data} "
                     f"({split_rule}); held-out MAPE {error} over {len(held)} kernels"
                     + "".join(f"; {k}" for k in kept))
    return out


def _ordinal(k: int) -> str:
    return {2: "second", 3: "third"}.get(k, f"{k}th")


def holdout_summary(calibration: Calibration) -> dict[str, float]:
    """MAPE (%) on held-out points per op class, and on held-out summed GEMM time."""
    errors = calibration.errors
    held = errors[errors["split"] == "holdout"]
    out: dict[str, float] = {}
    for op_class, group in held.groupby("op_class"):
        weights = group["points"].to_numpy(float)
        out[str(op_class)] = float(np.average(group["mape_calibrated"], weights=weights))
    points = calibration.points
    attn = points[(points["op_class"] == "attention") & (points["split"] == "holdout")
                  & (points["mask"] != "tree")]
    if calibration.hardware.efficiency.attention_kernels is not None:
        for name, rows in (("attention_decode", attn[attn["queries"] == 1]),
                           ("attention_prefill", attn[attn["queries"] > 1])):
            if len(rows):
                out[name] = _mape(rows["time_s"], rows["predicted_s"])
    layers = calibration.layer_errors
    if len(layers):
        held_layers = layers[layers["split"] == "holdout"]
        if len(held_layers):
            out["gemm_summed"] = float(np.average(held_layers["mape_calibrated"],
                                                  weights=held_layers["points"].to_numpy(float)))
    return out

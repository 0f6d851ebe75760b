"""Result tables: library results turned into rows of unit-suffixed fields (no formatting)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from specsim.forward.cost import pass_cost
from specsim.forward.memory import attention_layer_kv_bytes_per_token, kv_layout, memory_plan
from specsim.forward.shapes import uniform_passes
from specsim.specs.dtypes import Precision
from specsim.specs.hardware import Hardware
from specsim.specs.models import Model
from specsim.specs.params import active_params, param_breakdown, total_params, weight_bytes

if TYPE_CHECKING:
    from specsim.specs.drafters import Drafter

Row = dict[str, Any]


def hardware_rows(hw: Hardware) -> list[Row]:
    """Every number of a profile with its unit and source."""

    def src(*keys: str) -> str:
        return next((hw.sources[k] for k in keys if k in hw.sources), "")

    rows: list[Row] = [
        {"field": "hbm_capacity_GB", "value": hw.hbm_capacity_bytes / 1e9,
         "source": src("memory.hbm_capacity_GB")},
        {"field": "hbm_bandwidth_GB_per_s", "value": hw.hbm_bandwidth_bytes_per_s / 1e9,
         "source": src("memory.hbm_bandwidth_GB_per_s")},
    ]
    for dtype, flops in hw.peak_flops_per_s.items():
        rows.append({"field": f"dense_{dtype}_TFLOPS", "value": flops / 1e12,
                     "source": src(f"compute.dense_TFLOPS.{dtype}")})
    rows += [
        {"field": "sm_count", "value": hw.sm_count, "source": src("compute.sm_count")},
        {"field": "ops_per_byte_bf16", "value": hw.ops_per_byte,
         "source": "derived: bf16 TFLOPS / HBM bandwidth"},
        {"field": f"interconnect_GB_per_s ({hw.interconnect_name})",
         "value": hw.interconnect_bandwidth_bytes_per_s / 1e9,
         "source": src("interconnect.bandwidth_GB_per_s")},
        {"field": "interconnect_latency_us", "value": hw.interconnect_latency_s * 1e6,
         "source": src("interconnect.latency_us")},
        {"field": "pcie_GB_per_s", "value": hw.pcie_bandwidth_bytes_per_s / 1e9,
         "source": src("pcie.bandwidth_GB_per_s")},
    ]
    eff = hw.efficiency
    calibrated = src("efficiency.pass_overhead_s") if hw.is_calibrated else \
        "ideal (datasheet profile, not calibrated)"
    rows += [
        {"field": "gemm_efficiency", "value": _efficiency_text(eff.gemm), "source": calibrated},
        {"field": "attention_efficiency", "value": _efficiency_text(eff.attention),
         "source": calibrated},
        {"field": "pass_overhead_us", "value": eff.pass_overhead_s * 1e6, "source": calibrated},
    ]
    return rows


def _efficiency_text(eff: object) -> str:
    fields = getattr(eff, "__dataclass_fields__", {})
    return ", ".join(f"{k}={getattr(eff, k):.4g}" for k in fields)


def model_summary(model: Model) -> Row:
    total = total_params(model)
    return {
        "model": model.slug, "architecture": model.architecture,
        "layers": model.num_layers, "params_B": total / 1e9,
        "advertised_B": model.advertised_params / 1e9 if model.advertised_params else float("nan"),
        "active_params_B": active_params(model) / 1e9,
        "weights_GB": weight_bytes(model) / 1e9,
        "kv_KB_per_token": kv_layout(model).bytes_per_token / 1e3,
        "state_MB_per_request": kv_layout(model).fixed_bytes_per_request / 1e6,
    }


def model_rows(model: Model) -> list[Row]:
    """Architecture fields (source: config.json) and derived sizes (source: formula)."""
    source = model.sources.get("name", "") or next(iter(model.sources.values()), "")
    rows: list[Row] = []
    for field in ("architecture", "hidden_size", "num_layers", "num_attention_heads",
                  "num_kv_heads", "head_dim", "intermediate_size", "vocab_size",
                  "tie_word_embeddings", "weight_dtype", "sliding_window"):
        rows.append({"field": field, "value": getattr(model, field),
                     "source": model.sources.get(field, source)})
    counts = model.layer_counts
    rows.append({"field": "layer_kinds", "value": ", ".join(f"{k}: {v}" for k, v in counts.items()),
                 "source": model.sources.get("layer_types", source)})
    for block in ("moe", "mla", "linear_attention"):
        spec = getattr(model, block)
        if spec is not None:
            for k in spec.__dataclass_fields__:
                rows.append({"field": f"{block}.{k}", "value": getattr(spec, k),
                             "source": model.sources.get(f"{block}.{k}", source)})
    for part, count in param_breakdown(model).items():
        rows.append({"field": f"params.{part}_B", "value": count / 1e9,
                     "source": "derived from the fields above"})
    rows += [
        {"field": "params_total_B", "value": total_params(model) / 1e9, "source": "derived"},
        {"field": "params_active_B", "value": active_params(model) / 1e9, "source": "derived"},
        {"field": "weights_GB", "value": weight_bytes(model) / 1e9,
         "source": "derived: params x bytes per param of weight_dtype"},
        {"field": "kv_bytes_per_token_per_attention_layer",
         "value": attention_layer_kv_bytes_per_token(model), "source": "derived (bf16 cache)"},
    ]
    if model.advertised_params:
        adv = model.sources.get("advertised.params", "")
        rows.append({"field": "advertised_params_B", "value": model.advertised_params / 1e9,
                     "source": adv})
    return rows


def roofline_rows(hw: Hardware, model: Model, tokens: list[int], *, context: float,
                  queries: int, tp: int, precision: Precision) -> list[Row]:
    """One row per n: time, bound, bytes and flops of the pass."""
    n = np.asarray(tokens, dtype=np.float64)
    cost = pass_cost(model, hw, uniform_passes(queries, n / queries, context), tp=tp,
                     precision=precision)
    t = cost.time_s
    return [
        {"tokens": int(n[i]), "time_ms": float(t[i] * 1e3),
         "tokens_per_s": float(n[i] / t[i]),
         "bound": "compute" if cost.compute_bound[i] else "memory",
         "bytes": float(cost.bytes_[i]), "flops": float(cost.flops[i])}
        for i in range(n.size)
    ]


def roofline_op_rows(hw: Hardware, model: Model, tokens: list[int], *, context: float,
                     queries: int, tp: int, precision: Precision) -> list[Row]:
    """One row per (n, op): where the time of the pass goes."""
    n = np.asarray(tokens, dtype=np.float64)
    cost = pass_cost(model, hw, uniform_passes(queries, n / queries, context), tp=tp,
                     precision=precision)
    rows: list[Row] = []
    for i in range(n.size):
        for c in cost.ops:
            op = c.op
            rows.append({
                "tokens": int(n[i]), "op": op.name, "class": op.op_class, "layers": op.layers,
                "time_ms": float(c.total_time_s[i] * 1e3),
                "bound": "compute" if c.compute_bound[i] else (
                    "link" if op.op_class == "communication" else "memory"),
                "weight_bytes": float(op.weight_bytes[i] * op.layers),
                "activation_bytes": float(op.activation_bytes[i] * op.layers),
                "kv_read_bytes": float(op.kv_read_bytes[i] * op.layers),
                "kv_write_bytes": float(op.kv_write_bytes[i] * op.layers),
                "flops": float(op.flops[i] * op.layers)})
    return rows


def memory_rows(hw: Hardware, model: Model, requests: list[int], context: float, *,
                drafter: Drafter | None, tp: int, memory_fraction: float
                ) -> tuple[list[Row], int]:
    """Rows per concurrency level, and the max concurrency that fits."""
    plan = memory_plan(
        model, hw.hbm_capacity_bytes, requests, context, tp=tp,
        drafter_cache=drafter.cache_layout(tp=tp) if drafter else None,
        drafter_weights_bytes=drafter.weight_bytes() if drafter else 0.0,
        memory_fraction=memory_fraction)
    rows = [
        {"requests": int(plan.requests[i]), "weights_gb": plan.weights_bytes / 1e9,
         "drafter_weights_gb": plan.drafter_weights_bytes / 1e9,
         "workspace_gb": plan.workspace_bytes / 1e9,
         "target_kv_gb": float(plan.target_kv_bytes[i]) / 1e9,
         "drafter_kv_gb": float(plan.drafter_kv_bytes[i]) / 1e9,
         "total_gb": float(plan.total_bytes[i]) / 1e9, "fits": bool(plan.fits[i])}
        for i in range(plan.requests.size)
    ]
    return rows, plan.max_requests

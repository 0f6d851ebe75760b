"""Result tables: library results turned into rows of unit-suffixed fields (no formatting)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specsim.forward.cost import PassCost
from specsim.forward.memory import MemoryPlan
from specsim.specs.hardware import GemmEfficiency, Hardware
from specsim.specs.models import Model
from specsim.specs.params import ModelSizes

if TYPE_CHECKING:
    from specsim.measurement.vllm_metrics import SpecDecodeCounts
    from specsim.specs.drafters import Drafter
    from specsim.speculation.recommend import Recommendation
    from specsim.speculation.speedup import Choice

Row = dict[str, Any]


def hardware_rows(hw: Hardware, transferred: GemmEfficiency | None) -> list[Row]:
    """Every number of a profile with its unit and source; `transferred`: the GEMM terms a GPU
    without measurements runs on (`specs.hardware.datasheet_gemm`), for a datasheet
    profile (None for a calibrated one)."""

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
    for dtype, flops in hw.achievable_flops_per_s.items():
        rows.append({"field": f"achievable_{dtype}_TFLOPS", "value": flops / 1e12,
                     "source": src(f"compute.achievable_TFLOPS.{dtype}",
                                   "compute.achievable_TFLOPS")})
    rows += [
        {"field": "sm_count", "value": hw.sm_count, "source": src("compute.sm_count")},
        {"field": "ops_per_byte_bf16", "value": hw.ops_per_byte,
         "source": "derived: bf16 TFLOPS / HBM bandwidth"},
        {"field": f"interconnect_GB_per_s ({hw.interconnect_name})",
         "value": hw.interconnect_bandwidth_bytes_per_s / 1e9,
         "source": src("interconnect.bandwidth_GB_per_s")},
        {"field": "interconnect_latency_us", "value": hw.interconnect_latency_s * 1e6,
         "source": src("interconnect.latency_us")},
        *({"field": f"allreduce_us_tp{tp} (smallest-largest message)",
           "value": f"{points[0][1] * 1e6:g}-{points[-1][1] * 1e6:g} us at "
                    f"{points[0][0]:,.0f}-{points[-1][0]:,.0f} B",
           "source": src(f"interconnect.allreduce_us.tp{tp}[0][1]")}
          for tp, points in hw.allreduce_s.items()),
        *([{"field": "interconnect_mesh_links (a TP group of n GPUs uses n - 1)",
            "value": hw.mesh_links, "source": src("interconnect.mesh_links")}]
          if hw.mesh_links else []),
        {"field": "pcie_GB_per_s", "value": hw.pcie_bandwidth_bytes_per_s / 1e9,
         "source": src("pcie.bandwidth_GB_per_s")},
    ]
    node = hw.node
    if node is not None:  # the machine and the scale-out network (per GPU)
        rows += [
            {"field": "node_gpus", "value": node.gpus, "source": src("node.gpus")},
            {"field": "scale_up_domain_gpus", "value": node.scale_up_gpus,
             "source": src("node.scale_up_gpus")},
            {"field": f"network_GB_per_s_per_gpu ({node.network_name})",
             "value": node.network_bandwidth_bytes_per_s / 1e9,
             "source": src("node.network.bandwidth_Gb_per_s")},
            {"field": "network_latency_us", "value": node.network_latency_s * 1e6,
             "source": src("node.network.latency_us")},
        ]
    eff = hw.efficiency
    calibrated = src("efficiency.pass_overhead_s", "efficiency") if hw.is_calibrated else \
        ("ideal: the datasheet roofline, what `roofline` without an engine shows; engines and "
         "plans run this GPU's kernels on transferred_gemm_efficiency below")
    rows += [
        {"field": "gemm_efficiency", "value": _efficiency_text(eff.gemm), "source": calibrated},
        {"field": "attention_efficiency", "value": _efficiency_text(eff.attention),
         "source": calibrated},
        {"field": "pass_overhead_us", "value": eff.pass_overhead_s * 1e6, "source": calibrated},
    ]
    if transferred is not None:  # what a GPU without measurements can expect
        from specsim.specs.transferred import SOURCE, expected_error_text

        rows += [
            {"field": "transferred_gemm_efficiency",
             "value": _efficiency_text(transferred),
             "source": f"{SOURCE}; what every engine and plan prices this GPU's kernels "
                       f"with, and --hardware transferred/{hw.slug} names"},
            {"field": "transferred_expected_error", "value": expected_error_text(),
             "source": SOURCE},
        ]
    return rows


def _efficiency_text(eff: object) -> str:
    fields = getattr(eff, "__dataclass_fields__", {})
    return ", ".join(f"{k}={getattr(eff, k):.4g}" for k in fields)


def model_summary(model: Model, sizes: ModelSizes) -> Row:
    """One row of `models list`: `model` with its `sizes` (`specs.params.model_sizes`)."""
    return {
        "model": model.slug, "architecture": model.architecture,
        "layers": model.num_layers, "params_B": sizes.total_params / 1e9,
        "advertised_B": model.advertised_params / 1e9 if model.advertised_params else float("nan"),
        "active_params_B": sizes.active_params / 1e9,
        "weights_GB": sizes.weight_bytes / 1e9,
        "kv_KB_per_token": sizes.kv_bytes_per_token / 1e3,
        "state_MB_per_request": sizes.state_bytes_per_request / 1e6,
    }


def model_rows(model: Model, sizes: ModelSizes) -> list[Row]:
    """Architecture fields (source: config.json) and derived sizes (source: formula), the
    sizes given (`specs.params.model_sizes`)."""
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
    for block in ("moe", "mla", "dsa", "linear_attention", "mamba"):
        spec = getattr(model, block)
        if spec is not None:
            for k in spec.__dataclass_fields__:
                rows.append({"field": f"{block}.{k}", "value": getattr(spec, k),
                             "source": model.sources.get(f"{block}.{k}", source)})
    for part, count in sizes.params_by_part.items():
        rows.append({"field": f"params.{part}_B", "value": count / 1e9,
                     "source": "derived from the fields above"})
    rows += [
        {"field": "params_total_B", "value": sizes.total_params / 1e9, "source": "derived"},
        {"field": "params_active_B", "value": sizes.active_params / 1e9, "source": "derived"},
        {"field": "weights_GB", "value": sizes.weight_bytes / 1e9,
         "source": "derived: params x bytes per param of weight_dtype"},
        {"field": "kv_bytes_per_token_per_attention_layer",
         "value": sizes.attention_layer_kv_bytes_per_token, "source": "derived (bf16 cache)"},
    ]
    if model.advertised_params:
        adv = model.sources.get("advertised.params", "")
        rows.append({"field": "advertised_params_B", "value": model.advertised_params / 1e9,
                     "source": adv})
    return rows


def roofline_rows(cost: PassCost) -> list[Row]:
    """One row per pass of a T(n) sweep: time, bound, bytes and flops."""
    n, t, rate = cost.tokens, cost.time_s, cost.tokens_per_s
    bound, bytes_, flops = cost.compute_bound, cost.bytes_, cost.flops
    return [
        {"tokens": int(round(n[i])), "time_ms": float(t[i] * 1e3),
         "tokens_per_s": float(rate[i]),
         "bound": "compute" if bound[i] else "memory",
         "bytes": float(bytes_[i]), "flops": float(flops[i])}
        for i in range(n.size)
    ]


def roofline_op_rows(cost: PassCost) -> list[Row]:
    """One row per (pass, op): where the time of each pass of a T(n) sweep goes."""
    n = cost.tokens
    fields = ("weight_bytes", "activation_bytes", "kv_read_bytes", "kv_write_bytes", "flops")
    rows: list[Row] = []
    for i in range(n.size):
        for c in cost.ops:
            op = c.op
            rows.append({
                "tokens": int(round(n[i])), "op": op.name, "class": op.op_class,
                "layers": op.layers, "time_ms": float(c.total_time_s[i] * 1e3),
                "bound": "compute" if c.compute_bound[i] else (
                    "link" if op.op_class in ("communication", "all_to_all") else "memory"),
                **{f: float(c.total(f)[i]) for f in fields}})
    return rows


def memory_rows(plan: MemoryPlan) -> list[Row]:
    """One row per concurrency level of a memory plan."""
    return [
        {"requests": int(plan.requests[i]), "weights_GB_per_gpu": plan.weights_bytes / 1e9,
         "drafter_weights_GB_per_gpu": plan.drafter_weights_bytes / 1e9,
         "workspace_GB_per_gpu": plan.workspace_bytes / 1e9,
         "target_kv_GB_per_gpu": float(plan.target_kv_bytes[i]) / 1e9,
         "drafter_kv_GB_per_gpu": float(plan.drafter_kv_bytes[i]) / 1e9,
         "total_GB_per_gpu": float(plan.total_bytes[i]) / 1e9, "fits": bool(plan.fits[i])}
        for i in range(plan.requests.size)
    ]


def speedup_rows(points: list[Choice]) -> list[Row]:
    """One row per (batch, N) of `best_per_nodes`; a batch that does not fit shows no speeds.

    plain_tokens_per_s_per_user is plain decoding's rate at the same batch size (the
    speculative rate over the speedup); throughput is tokens/s per replica (TP GPUs).
    """
    nan = float("nan")
    return [
        {"batch": p.batch, "nodes": p.nodes, "depth": p.depth, "tau": p.tau,
         "round_ms": p.round_s * 1e3, "speedup": p.speedup if p.fits else nan,
         "plain_tokens_per_s_per_user": p.plain_tokens_per_s_per_user,
         "tokens_per_s_per_user": p.tokens_per_s_per_user if p.fits else nan,
         "throughput_tokens_per_s": p.throughput if p.fits else nan, "fits": p.fits}
        for p in points
    ]


def hardware_summary(hw: Hardware) -> Row:
    """One row of `hardware list`."""
    return {"hardware": hw.slug, "name": hw.name, "hbm_GB": hw.hbm_capacity_bytes / 1e9,
            "hbm_TB_per_s": hw.hbm_bandwidth_bytes_per_s / 1e12,
            "bf16_TFLOPS": hw.flops_per_s("bf16") / 1e12, "ops_per_byte": hw.ops_per_byte,
            "calibrated": hw.is_calibrated}


def drafter_summary(d: Drafter, params: float) -> Row:
    """One row of `drafters list` (`params`: `Drafter.params()`)."""
    alpha = "" if d.acceptance is None else f"{d.acceptance.position_alphas[0]:.3f}"
    return {"drafter": d.slug, "family": d.family, "target": d.target.slug,
            "parallel": d.is_parallel, "layers": d.layers, "params_B": params / 1e9,
            "draft_limit": d.draft_limit, "published_alpha": alpha}


DRAFTER_FIELDS = ("family", "layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                  "head_dim", "intermediate_size", "vocab_size", "own_lm_head",
                  "fused_target_layers", "block_size", "markov_rank", "edit_passes",
                  "medusa_heads", "attention_window")
# The numbers of a drafter's cache kind, shown where the spec sets them.
CACHE_FIELDS = ("cache_window", "cache_budget", "cache_dtype", "state_elems",
                "recurrent_gates", "lookup_tokens")


def drafter_rows(d: Drafter, params: float, cache_bytes_per_token: float) -> list[Row]:
    """Architecture fields, target, size, own cache per token and published acceptance
    (`params`: `Drafter.params()`; `cache_bytes_per_token`: of `Drafter.cache_layout()`)."""
    source = next(iter(d.sources.values()), "")
    rows: list[Row] = [{"field": k, "value": getattr(d, k), "source": source}
                       for k in DRAFTER_FIELDS]
    rows.append({"field": "cache", "value": d.cache_kind,
                 "source": source if d.cache else f"family {d.family}"})
    rows += [{"field": k, "value": getattr(d, k), "source": source} for k in CACHE_FIELDS
             if getattr(d, k) and (k != "recurrent_gates" or d.cache_kind == "state")]
    rows += [
        {"field": "target", "value": d.target.slug, "source": d.target.path},
        {"field": "params_B", "value": params / 1e9, "source": "derived"},
        {"field": "cache_bytes_per_token", "value": cache_bytes_per_token,
         "source": "derived (bf16)"},
    ]
    if d.acceptance is not None:
        rows.append({"field": "alpha", "value": d.acceptance.position_alphas[0],
                     "source": d.acceptance.source})
    return rows


def acceptance_rows(counts: SpecDecodeCounts) -> list[Row]:
    """Per draft position: conditional acceptance and the share of drafts reaching it."""
    return [{"position": i + 1, "alpha": float(a), "reached": float(m)}
            for i, (a, m) in enumerate(zip(counts.conditional_alphas, counts.marginal_rates,
                                           strict=True))]


def recommend_rows(rec: Recommendation, columns: dict[str, list[object]]) -> list[Row]:
    """Rows of `recommend`, one per batch size of `rec.best`, with one column per registered
    engine adapter (`columns`: `speculation.recommend.engine_cells`; `vllm_k`: the chain length
    vLLM's schedule runs; `sglang`: SGLang's flags); a batch that does not fit shows no speeds
    and no engine setting."""
    return [{**_recommend_row(c), **{name: cells[i] for name, cells in columns.items()}}
            for i, c in enumerate(rec.best)]


def _recommend_row(c: Any) -> Row:
    nan = float("nan")
    return {"batch": c.batch, "shape": c.shape, "nodes": c.nodes, "depth": c.depth,
            "tau": c.tau, "speedup": c.speedup if c.fits else nan,
            "plain_tokens_per_s_per_user": c.plain_tokens_per_s_per_user,
            "tokens_per_s_per_user": c.tokens_per_s_per_user if c.fits else nan,
            "throughput_tokens_per_s": c.throughput if c.fits else nan,
            "fits": c.fits}


def serving_text(choice: Any, floor: float) -> str:
    """The line under `recommend`'s table: the batch size to serve at, or why there is none."""
    where = f" with every user at >= {floor:g} tokens/s" if floor else ""
    if choice is None:
        return f"\nno batch size above fits in memory{where}"
    return (f"\nserve at batch {choice.batch}: {choice.throughput:,.0f} tokens/s per replica"
            f"{where} ({choice.tokens_per_s_per_user:,.0f} each)")


def scenario_summary(scenario: Any) -> Row:
    """One row of `workloads list`: lengths (median / p90 tokens) and acceptance."""
    return {"workload": scenario.slug, "name": scenario.name,
            "prompt_median": scenario.prompt.median, "prompt_p90": scenario.prompt.p90,
            "output_median": scenario.output.median, "output_p90": scenario.output.p90,
            "lengths": "given" if scenario.lengths_given else "defaults",
            "alpha_1": scenario.acceptance.position_alphas[0],
            "families": ", ".join(sorted(scenario.by_family)) or "-"}


def scenario_rows(scenario: Any) -> list[Row]:
    """`workloads show`: every length and acceptance profile with its source."""
    rows: list[Row] = [
        {"field": "name", "value": scenario.name, "source": scenario.path},
        {"field": "context_tokens", "value": scenario.context, "source": scenario.source}]
    for label, dist in (("prompt", scenario.prompt), ("output", scenario.output)):
        rows += [{"field": f"{label}_tokens_median", "value": dist.median, "source": dist.source},
                 {"field": f"{label}_tokens_p90", "value": dist.p90, "source": dist.source},
                 {"field": f"{label}_tokens_mean", "value": dist.mean,
                  "source": "derived: lognormal through median and p90"}]
    profiles = [("acceptance", scenario.acceptance)]
    profiles += [(f"acceptance.{k}", v) for k, v in sorted(scenario.by_family.items())]
    for label, profile in profiles:
        alphas = ", ".join(f"{a:.3f}" for a in profile.position_alphas[:8])
        rows.append({"field": f"{label}.alphas", "value": alphas, "source": profile.source})
    return rows

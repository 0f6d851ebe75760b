"""`specsim roofline` and `specsim memory`: the time of one forward pass, and what fits."""

from typing import Annotated

import typer

from specsim.cli.common import (
    DEFAULT_ENGINE,
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    ComputeDtypeOpt,
    ContextOpt,
    EngineOpt,
    EpOpt,
    HardwareOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelOpt,
    TpOpt,
    WeightDtypeOpt,
    _load,
    app,
    context_tokens,
    echo,
    note,
    parse_ints,
    precision,
    to_json,
    to_table,
)
from specsim.errors import SpecError
from specsim.specs.defaults import DEFAULT_MEMORY_FRACTION


@app.command()
def roofline(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: ModelOpt = DEFAULT_MODEL,
    tokens: Annotated[str, typer.Option(
        help="Tokens scored per pass, n (list or range: 1,8,295,1024 or 1-512).")]
    = "1,8,64,128,295,512,1024,4096",
    context: ContextOpt = None,
    queries: Annotated[int, typer.Option(
        help="Tokens per request (1 = decoding; N+1 = verifying N drafted tokens).")] = 1,
    tp: TpOpt = 1,
    ep: EpOpt = 1,
    weight_dtype: WeightDtypeOpt = "",
    kv_dtype: KvDtypeOpt = "bf16",
    compute_dtype: ComputeDtypeOpt = "bf16",
    by_op: Annotated[bool, typer.Option("--by-op", help="Break the time down by op.")] = False,
    engine: EngineOpt = DEFAULT_ENGINE,
    as_json: JsonOpt = False,
) -> None:
    """T(n): forward-pass time versus tokens in the pass, with the bound that holds."""
    import numpy as np

    from specsim.forward.cost import roofline as sweep
    from specsim.forward.shapes import batch_mix_passes
    from specsim.present.render import setup_text
    from specsim.present.rows import roofline_op_rows, roofline_rows
    from specsim.specs.engines import load_engine
    from specsim.speculation import engine_time

    hw, target = _load(hardware, model, tp)
    eng = load_engine(engine)
    ctx, prec = context_tokens(context), precision(weight_dtype, kv_dtype, compute_dtype)
    cost = sweep(target, hw, parse_ints(tokens, "--tokens"), context=ctx, queries=queries,
                 tp=tp, precision=prec, ep=ep)
    rows = roofline_op_rows(cost) if by_op else roofline_rows(cost)
    if not by_op and eng.launch != "none":
        contexts = np.atleast_1d(np.asarray(ctx, dtype=np.float64))
        shape = batch_mix_passes(float(queries), cost.tokens / queries, contexts)
        step = engine_time.plain_step_s(eng, hw, target, shape, cost.tokens / queries, tp=tp,
                                        precision=prec, ep=ep)
        for row, seconds in zip(rows, step, strict=True):
            row["engine_ms"] = float(seconds * 1e3)
    header = setup_text(model=target, hardware=hw, context=ctx, tp=tp, precision=prec, ep=ep,
                        engine=engine)
    if as_json:
        echo(to_json({"setup": header, "rows": rows}))
        return
    echo(header)
    echo(to_table(rows))


@app.command()
def memory(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Target model: a built-in slug (`specsim models list`) or a YAML "
        f"path. Default: the drafter's target, else {DEFAULT_MODEL}.")] = None,
    context: ContextOpt = None,
    requests: Annotated[str, typer.Option(help="Concurrent requests (list or range).")]
    = "1,8,24,64,128",
    drafter: Annotated[str | None, typer.Option(
        help="Drafter spec (slug or YAML) whose own cache and weights are added.")] = None,
    tp: TpOpt = 1,
    ep: EpOpt = 1,
    memory_fraction: Annotated[float, typer.Option(
        help="Share of HBM the engine may use (vLLM gpu_memory_utilization).")]
    = DEFAULT_MEMORY_FRACTION,
    weight_dtype: WeightDtypeOpt = "",
    kv_dtype: KvDtypeOpt = "bf16",
    as_json: JsonOpt = False,
) -> None:
    """Weights, KV caches (target and drafter) and max concurrent requests per GPU."""
    from specsim.forward.memory import serving_memory
    from specsim.present.render import context_text, setup_text
    from specsim.present.rows import memory_rows
    from specsim.specs.hardware import load_hardware
    from specsim.specs.models import check_tensor_parallel
    from specsim.speculation.setup import load_target_and_drafter

    # the drafter checked against the target as every command does (an EAGLE-3 for
    # Llama-3.1-8B was priced on the default Qwen3-8B)
    target, draft, notes = load_target_and_drafter(model, drafter)
    check_tensor_parallel(target, tp)
    hw = load_hardware(hardware)
    ctx, prec = context_tokens(context), precision(weight_dtype, kv_dtype)
    for text in notes:
        note(f"note: {text}")
    plan = serving_memory(target, hw, parse_ints(requests, "--requests"), ctx, drafter=draft,
                          tp=tp, memory_fraction=memory_fraction, ep=ep,
                          precision=prec)
    header = setup_text(model=target, hardware=hw, context=ctx, tp=tp, precision=prec,
                        drafter=draft) + "; memory per GPU"
    # Everything is computed before anything is printed: an error leaves no half output,
    # with --json as without.
    try:
        max_requests = plan.max_requests
    except SpecError as err:  # no per-request cache (context 0 and no fixed state)
        raise SpecError(f"option --context: {context_text(ctx)} tokens per request: {err}; "
                        "give a context of at least 1 token") from None
    rows = memory_rows(plan)
    if as_json:
        echo(to_json({"setup": header, "rows": rows, "max_requests": max_requests}))
        return
    echo(header)
    echo(to_table(rows))
    echo(f"\nmax concurrent requests at {context_text(ctx)} tokens: {max_requests} "
         f"({memory_fraction:.0%} of {hw.hbm_capacity_bytes / 1e9:g} GB, TP {tp}"
         + (f", EP {ep})" if ep > 1 else ")"))

"""`specsim roofline` and `specsim memory`: the time of one forward pass, and what fits."""

from typing import Annotated

import typer

from specsim.cli.common import (
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    HardwareOpt,
    JsonOpt,
    ModelOpt,
    TpOpt,
    _load,
    _load_drafter,
    app,
    echo,
    emit,
    parse_ints,
    to_json,
    to_table,
)
from specsim.errors import SpecError


@app.command()
def roofline(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: ModelOpt = DEFAULT_MODEL,
    tokens: Annotated[str, typer.Option(
        help="Tokens scored per pass, n (list or range: 1,8,295,1024 or 1-512).")]
    = "1,8,64,128,295,512,1024,4096",
    context: Annotated[int, typer.Option(help="Cached tokens per request.")] = 0,
    queries: Annotated[int, typer.Option(
        help="Tokens per request (1 = decoding; N+1 = verifying N drafted tokens).")] = 1,
    tp: TpOpt = 1,
    weight_dtype: Annotated[str, typer.Option(help="Stored weight dtype (default: model's).")] = "",
    compute_dtype: Annotated[str, typer.Option(help="Tensor-core dtype for peak flops.")] = "bf16",
    by_op: Annotated[bool, typer.Option("--by-op", help="Break the time down by op.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """T(n): forward-pass time versus tokens in the pass, with the bound that holds."""
    from specsim.present.rows import roofline_op_rows, roofline_rows
    from specsim.specs.dtypes import Precision

    if queries < 1:
        raise SpecError("option --queries: must be >= 1")
    args = _load(hardware, model)
    precision = Precision(weight_dtype=weight_dtype, compute_dtype=compute_dtype)
    n = parse_ints(tokens, "--tokens")
    if by_op:
        rows = roofline_op_rows(*args, n, context=context, queries=queries, tp=tp,
                                precision=precision)
    else:
        rows = roofline_rows(*args, n, context=context, queries=queries, tp=tp,
                             precision=precision)
    emit(rows, as_json)


@app.command()
def memory(
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    model: ModelOpt = DEFAULT_MODEL,
    context: Annotated[int, typer.Option(help="Tokens per request (prompt + output).")] = 32768,
    requests: Annotated[str, typer.Option(help="Concurrent requests (list or range).")]
    = "1,8,24,64,128",
    drafter: Annotated[str | None, typer.Option(
        help="Drafter spec (slug or YAML) whose own cache and weights are added.")] = None,
    tp: TpOpt = 1,
    memory_fraction: Annotated[float, typer.Option(
        help="Share of HBM the engine may use (vLLM gpu_memory_utilization).")] = 0.9,
    as_json: JsonOpt = False,
) -> None:
    """Weights, KV caches (target and drafter) and max concurrent requests per GPU."""
    from specsim.present.rows import memory_rows

    hw, target = _load(hardware, model)
    draft = _load_drafter(drafter, target) if drafter else None
    rows, max_requests = memory_rows(hw, target, parse_ints(requests, "--requests"), context,
                                     drafter=draft, tp=tp, memory_fraction=memory_fraction)
    if as_json:
        echo(to_json(rows))
        return
    echo(to_table(rows))
    echo(f"\nmax concurrent requests at {context:,} tokens: {max_requests} "
         f"({memory_fraction:.0%} of {hw.hbm_capacity_bytes / 1e9:g} GB, TP {tp})")

"""`specsim bench plan` and `specsim bench fit`: measure the engine on the user's own GPU."""

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer

from specsim.cli.common import (
    DEFAULT_ENGINE,
    DEFAULT_HARDWARE,
    HardwareOpt,
    command_group,
    echo,
    to_table,
)

bench_app = command_group(
    "bench", "Measure the serving engine on your own GPU: a benchmark plan with forced "
    "acceptance, and the fit of the engine's host terms to the engines' own result files.")

# Seconds a server takes to load the weights and capture its CUDA graphs (a stated estimate
# for an 8B model on one GPU; larger models take longer).
SERVER_START_S = 120.0


@bench_app.command("plan")
def bench_plan(
    drafter: Annotated[str, typer.Option("--drafter", "-d", help="Drafter (slug or YAML) whose "
                                         "checkpoint the speculative servers load.")],
    engine: Annotated[str, typer.Option(help="vllm or sglang (default: the one every command "
                                        "defaults to).")] = DEFAULT_ENGINE,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Target (default: the drafter's).")] = None,
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel degree.")] = 1,
    input_tokens: Annotated[int, typer.Option(help="Prompt tokens per request.")] = 512,
    output_tokens: Annotated[int, typer.Option(help="Output tokens per request.")] = 256,
    concurrency: Annotated[str, typer.Option(
        help="Concurrencies, comma-separated (at least two).")] = "1,8,32",
    results: Annotated[Path, typer.Option(
        help="Folder the benchmark clients write their result files to.")]
    = Path("bench-results"),
    out: Annotated[Path, typer.Option(help="Folder for bench-plan.json (what `bench fit` "
                                      "reads).")] = Path("bench-plan"),
    force: Annotated[bool, typer.Option(help="Replace an existing bench-plan.json.")] = False,
) -> None:
    """Print the servers and benchmark-client commands to run on your GPU, and write the plan.

    Each server forces the acceptance (vLLM's synthetic rejection sampler, SGLang's
    SGLANG_SIMULATE_ACC_LEN), so a round is timed whatever your drafter accepts. Start each
    server in its own terminal, run its points, stop it; then `specsim bench fit`.
    """
    from specsim.cli.common import parse_ints
    from specsim.measurement.bench import PLAN_FILE, make_bench_plan
    from specsim.specs.drafters import load_drafter
    from specsim.specs.outputs import (
        atomic_write_bytes,
        check_files_folder,
        check_writable,
        make_parent,
    )

    target = model or load_drafter(drafter).target.slug
    plan = make_bench_plan(engine=engine, model=target, hardware=hardware, drafter=drafter,
                           tp=tp, input_tokens=input_tokens, output_tokens=output_tokens,
                           concurrencies=parse_ints(concurrency, "--concurrency"))
    path = out / PLAN_FILE
    check_writable(path, force=force)
    check_files_folder(results, option="--results")  # the clients write their files there
    model_id = plan.model_id
    minutes = _duration_s(plan) / 60
    lines = [f"# specsim bench plan: {plan.engine_version}, {plan.model} on {plan.hardware}, "
             f"TP {plan.tp}, drafter {plan.drafter}; {len(plan.points)} points, about "
             f"{minutes:.0f} min (each server ~{SERVER_START_S / 60:.0f} min to start)",
             f"# results go to {results}/; then: specsim bench fit {shlex.quote(str(out))} "
             f"--results {shlex.quote(str(results))} --out my-engine.yaml",
             f"mkdir -p {shlex.quote(str(results))}"]
    for n, (sid, argv) in enumerate(plan.servers.items(), 1):
        env = plan.server_env.get(sid, {})
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        lines += ["", f"# server {n} of {len(plan.servers)} ({sid}): start it in another "
                  "terminal, wait until it answers, run its points below, then stop it",
                  f"# {prefix + ' ' if prefix else ''}{shlex.join(argv)}"]
        for p in (q for q in plan.points if q.server == sid):
            lines += [f"# {p.id}: {p.why}",
                      shlex.join(plan.client_argv(p, model_id, str(results)))]
    make_parent(path)
    atomic_write_bytes(path, (json.dumps(plan.to_json(), indent=1) + "\n").encode())
    echo("\n".join(lines))
    echo(f"\n# wrote {path}")


def _duration_s(plan: object) -> float:
    """Servers starting plus every point's waves of requests at the model's predicted time."""
    from specsim.measurement.bench import BenchPlan, expected_duration_s

    assert isinstance(plan, BenchPlan)
    return len(plan.servers) * SERVER_START_S + expected_duration_s(plan)


@bench_app.command("fit")
def bench_fit(
    plan_dir: Annotated[Path, typer.Argument(help="The folder `bench plan` wrote.")],
    results: Annotated[Path, typer.Option(help="Folder of the clients' result files.")],
    out: Annotated[Path, typer.Option(help="Engine profile YAML to write (--engine PATH).")],
    name: Annotated[str | None, typer.Option(help="Display name of the profile.")] = None,
    force: Annotated[bool, typer.Option(help="Replace an existing --out file.")] = False,
) -> None:
    """Fit the engine's host terms to the result files of a `bench plan` run and write an
    engine profile every command takes as --engine PATH."""
    from specsim.measurement.bench import PLAN_FILE, engine_yaml, fit_bench, read_bench_plan
    from specsim.specs.outputs import check_writable, write_yaml

    check_writable(out, force=force, suffixes=(".yaml", ".yml"))
    plan = read_bench_plan(plan_dir / PLAN_FILE)
    fit = fit_bench(plan, results)
    rows = [{"point": p.id, "concurrency": p.concurrency, "draft_tokens": p.draft_tokens,
             "measured_tpot_ms": m * 1e3, "fitted_ms": f * 1e3, "held_out_ms": h * 1e3,
             "held_out_error_%": 100 * (h / m - 1)}
            for p, m, f, h in zip(fit.points, fit.measured_s, fit.predicted_s, fit.held_out_s,
                                  strict=True)]
    echo(f"setup: {plan.model} on {plan.hardware}, {plan.engine_version}, TP {plan.tp}, "
         f"drafter {plan.drafter}; {len(fit.points)} of {len(plan.points)} points")
    echo(to_table(rows))
    echo("\n" + to_table([{"term": t, "fitted_us": v * 1e6,
                           "bounds_us": f"{fit.bounds[t][0] * 1e6:.3g}-"
                                        f"{fit.bounds[t][1] * 1e6:.4g}"}
                          for t, v in fit.terms.items()]))
    echo(f"\nmedian leave-one-point-out error: {fit.held_out_error_pct:.1f}%")
    profile = name or f"{plan.engine_version} calibrated on {plan.hardware}"
    write_yaml(out, engine_yaml(fit, profile), force=force)
    echo(f"wrote {out}: use it as --engine {out}")

"""CLI: acceptance from probability arrays (`specsim acceptance from-probs|rounds|objectives|
weights`). The file layout is documented in `specsim.specs.prob_arrays`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from specsim.cli.common import (
    ContextOpt,
    JsonOpt,
    context_tokens,
    echo,
    emit,
    to_json,
    to_table,
)
from specsim.cli.speculation import acceptance_app
from specsim.errors import SpecError, check_int, check_number

PlotOpt = Annotated[Path | None, typer.Option(help="Write the figure (PNG).")]
ForceOpt = Annotated[bool, typer.Option(help="Overwrite an existing output file.")]
# Most draft positions `acceptance weights` takes (as many as the largest tree).
MAX_POSITIONS = 4096


def _check_plot(plot: Path | None, force: bool) -> None:
    from specsim.specs.outputs import PLOT_SUFFIXES, check_writable

    if plot is not None:
        check_writable(plot, force=force, suffixes=PLOT_SUFFIXES)
# Rollouts and rounds each simulated by --check.
CHECK_ROLLOUTS = 16
CHECK_ROUNDS = 4000
CHECK_SEED = 0


@acceptance_app.command("from-probs")
def from_probs(
    target: Annotated[Path, typer.Argument(help="Target's probabilities (.npz).")],
    draft: Annotated[Path, typer.Argument(help="Drafter's probabilities (.npz), same layout.")],
    out: Annotated[Path, typer.Option(help="Workload YAML to write.")],
    verification: Annotated[str, typer.Option(help="tokenwise or block (block needs the "
                                              "target's 'tokens' array).")] = "tokenwise",
    max_draft: Annotated[int | None, typer.Option(
        help="Longest draft length to profile (default: all positions).")] = None,
    name: Annotated[str | None, typer.Option(help="Workload name.")] = None,
    context: ContextOpt = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing output file.")] = False,
    check: Annotated[bool, typer.Option(help="Cross-check tau by seeded Monte Carlo rounds "
                                        "(full distributions only).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Per-position alpha = 1 - TV and tau per draft length, written as a workload profile."""
    import numpy as np

    from specsim.specs.outputs import check_writable, write_yaml
    from specsim.specs.prob_arrays import check_pair, load_prob_arrays
    from specsim.speculation.distributions import acceptance_from_probs, monte_carlo_check

    check_writable(out, force=force, suffixes=(".yaml", ".yml"))
    tokens = context_tokens(context)
    p, q = load_prob_arrays(target), load_prob_arrays(draft)
    check_pair(p, q)
    result = acceptance_from_probs(p, q, verification=verification, max_draft=max_draft)
    mc = monte_carlo_check(p, q, result, np.random.default_rng(CHECK_SEED),
                           rollouts=CHECK_ROLLOUTS, rounds_per_rollout=CHECK_ROUNDS) \
        if check else None
    source = (f"{verification} verification from {target.name} and {draft.name} "
              f"({p.shape[0]} rollouts x {p.shape[1]} positions"
              f"{', top-k: lower bound' if p.is_topk else ''})")
    write_yaml(out, _workload(name or draft.stem, result, tokens, source), force=force)
    rows = _rows(result)
    if as_json:
        echo(to_json({"rows": rows, "check": _check_dict(mc), "out": str(out)}))
        return
    echo(to_table(rows))
    if mc is not None:
        echo(_check_line(mc))
    echo(f"\n{source}; wrote {out}")


def _workload(name: str, result: Any, context: float | tuple[float, ...], source: str
              ) -> dict[str, Any]:
    import numpy as np

    from specsim.specs.workloads import workload_to_yaml

    if isinstance(context, float) and context.is_integer():
        context = int(context)  # written as a whole number of tokens
    data = workload_to_yaml(name, result.profile(source), context=context, counts_source=source)
    per = result.tau_per_rollout
    data["from_probs"] = {
        "verification": result.verification,
        "tau": [round(float(t), 6) for t in result.tau[1:]],
        "tau_p10": [round(float(t), 6) for t in np.percentile(per, 10, axis=0)[1:]],
        "tau_p90": [round(float(t), 6) for t in np.percentile(per, 90, axis=0)[1:]],
    }
    return data


def _rows(result: Any) -> list[dict[str, Any]]:
    import numpy as np

    per = result.tau_per_rollout
    conditional = np.asarray(result.profile("rows").position_alphas)
    se = result.tau_standard_error
    return [{"gamma": k, "alpha": float(result.alpha[:, k - 1].mean()),
             "alpha_std": float(result.alpha[:, k - 1].std()),
             "alpha_conditional": float(conditional[k - 1]),
             "tau": float(result.tau[k]), "tau_se": float(se[k]),
             "tau_p10": float(np.percentile(per[:, k], 10)),
             "tau_p90": float(np.percentile(per[:, k], 90))}
            for k in range(1, result.alpha.shape[1] + 1)]


def _check_dict(mc: Any) -> dict[str, Any] | None:
    if mc is None:
        return None
    return {"gamma": mc.gamma, "rollouts": mc.rollouts, "rounds_per_rollout":
            mc.rounds_per_rollout, "exact_tau": mc.exact_tau, "simulated_tau": mc.simulated_tau,
            "standard_error": mc.standard_error, "agrees": mc.agrees}


def _check_line(mc: Any) -> str:
    verdict = "agree" if mc.agrees else "DISAGREE"
    return (f"\ncheck at gamma = {mc.gamma} on the first {mc.rollouts} rollouts "
            f"({mc.rounds_per_rollout:,} seeded rounds each): computed tau {mc.exact_tau:.4f}, "
            f"simulated {mc.simulated_tau:.4f}, difference "
            f"{mc.simulated_tau - mc.exact_tau:+.4f} (standard error {mc.standard_error:.4f}): "
            f"{verdict}")


@acceptance_app.command("rounds")
def rounds(
    drafter: Annotated[Path, typer.Argument(help="Per-start acceptance array (.npz).")],
    other: Annotated[Path | None, typer.Argument(
        help="A second drafter's array on the same rollouts, to compare.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Exact expected rounds over each rollout (EDR) of a parallel drafter, and tau."""
    from specsim.specs.prob_arrays import load_start_acceptance
    from specsim.speculation.rounds import compare_rounds, equivalent_tau, expected_rounds

    first = load_start_acceptance(drafter)
    files = [drafter] if other is None else [drafter, other]
    arrays = [first] if other is None else [first, load_start_acceptance(other)]
    rows = []
    for path, array in zip(files, arrays, strict=True):
        per = expected_rounds(array)
        se = float(per.std(ddof=1) / math.sqrt(per.size)) if per.size > 1 else 0.0
        rows.append({"drafter": path.name, "rollouts": int(per.size),
                     "positions": int(array.shape[1]), "rounds": float(per.mean()),
                     "rounds_se": se,
                     "tau_equivalent": float(equivalent_tau(per, array.shape[1]).mean())})
    comparison = compare_rounds(arrays[0], arrays[1]) if len(arrays) == 2 else None
    if as_json:
        extra = None if comparison is None else {
            "rounds_difference": comparison.difference,
            "standard_error": comparison.difference_standard_error}
        echo(to_json({"rows": rows, "comparison": extra}))
        return
    echo(to_table(rows))
    if comparison is not None:
        echo(f"\n{files[1].name} minus {files[0].name}: {comparison.difference:+.4f} rounds per "
             f"rollout (paired standard error {comparison.difference_standard_error:.4f})")


@acceptance_app.command("objectives")
def objectives(
    target: Annotated[Path | None, typer.Option(
        help="A target distribution (.npz with 'target' of shape (V,) and optional 'grid'); "
        "default: the article's three-Gaussian toy.")] = None,
    eta: Annotated[float, typer.Option(help="LK hybrid's eta in lambda = exp(-eta alpha).")]
    = 3.0,
    plot: PlotOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Fit one Gaussian drafter by forward KL, reverse KL, TV and LK; print each alpha."""
    _check_plot(plot, force)
    check_number(eta, "eta", low=0.0, high=100.0)
    from specsim.speculation.objectives import TOY_GRID, TOY_OBJECTIVES, fit_gaussian, toy_target

    grid, p, label = (TOY_GRID, toy_target(), "the article's toy") if target is None \
        else (*_user_target(target), target.name)
    fits = [fit_gaussian(p, name, grid, eta=eta) for name in TOY_OBJECTIVES]
    rows = [{"objective": f.objective, "mu": f.mu, "sigma": f.sigma, "alpha": f.alpha,
             "loss": f.loss} for f in fits]
    if plot is not None:
        from specsim.present.acceptance_plots import objectives_figure
        from specsim.speculation.objectives import fitted_drafters

        objectives_figure(grid, p, fits, fitted_drafters(grid, fits), plot,
                          title=f"Single-Gaussian drafter fitted to {label} ({p.size} tokens)")
    emit(rows, as_json)
    if plot is not None and not as_json:
        echo(f"\nwrote {plot}")


def _user_target(path: Path) -> tuple[Any, Any]:
    """(grid, target) from an .npz with 'target' (V,) and optional 'grid' (V,)."""
    import numpy as np

    from specsim.specs.prob_arrays import load_vector

    p = load_vector(path, "target", probabilities=True)
    assert p is not None
    grid = load_vector(path, "grid", probabilities=False, size=p.size, required=False)
    return (np.arange(p.size, dtype=np.float64) if grid is None else grid), p


@acceptance_app.command("weights")
def weights(
    alpha: Annotated[str, typer.Option(help="Acceptance per position: one number for all, or "
                                       "a comma list (default e^(-1/7)).")]
    = f"{math.exp(-1 / 7):.6f}",
    block: Annotated[int, typer.Option(help="Draft positions when --alpha is one number.")]
    = 16,
    kappa: Annotated[float, typer.Option(help="Fixed schedule exp(-(k - 1) / kappa).")] = 7.0,
    plot: PlotOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """The weight tau puts on each position's acceptance, against a fixed loss schedule."""
    import numpy as np

    _check_plot(plot, force)
    check_int(block, "block", low=1, high=MAX_POSITIONS)
    check_number(kappa, "kappa", low=0.0, high=1e6, low_open=True)

    from specsim.specs.acceptance import tau_chain
    from specsim.speculation.objectives import fixed_schedule, normalized_position_weights

    alphas = _alphas(alpha, block)
    w = normalized_position_weights(alphas)
    schedule = fixed_schedule(alphas.size, kappa)
    rows = [{"position": k + 1, "alpha": float(alphas[k]), "tau_weight": float(w[k]),
             "schedule_weight": float(schedule[k]), "ratio": float(w[k] / schedule[k])}
            for k in range(alphas.size)]
    tau = float(tau_chain(alphas))
    if plot is not None:
        from specsim.present.acceptance_plots import weights_figure

        shown = f"{alphas[0]:.3f}" if np.all(alphas == alphas[0]) else "per position"
        weights_figure(w, schedule, plot, schedule_label=f"exp(-(k - 1) / {kappa:g})",
                       title=f"Weight of each position in tau (alpha = {shown}, tau = {tau:.2f})")
    if as_json:
        echo(to_json({"rows": rows, "tau": tau}))
        return
    echo(to_table(rows))
    echo(f"\ntau = {tau:.3f} tokens per round over {alphas.size} draft positions")
    if plot is not None:
        echo(f"wrote {plot}")


def _alphas(text: str, block: int) -> Any:
    import numpy as np

    try:  # ASCII only: float() reads '０.5' and '0_5' too
        if not text.isascii() or "_" in text:
            raise ValueError(text)
        values = [float(v) + 0.0 for v in text.split(",")]
    except ValueError:
        raise SpecError(f"option --alpha: cannot read {text[:40]!r} (use e.g. 0.87 or "
                        "0.9,0.8,0.7)") from None
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise SpecError(f"option --alpha: need acceptances in [0, 1], got {text[:40]!r}")
    if len(values) > MAX_POSITIONS:
        raise SpecError(f"option --alpha: at most {MAX_POSITIONS:,} positions, got "
                        f"{len(values):,}")
    if block < 1:
        raise SpecError(f"option --block: must be >= 1, got {block}")
    return np.array(values * block if len(values) == 1 else values, dtype=np.float64)

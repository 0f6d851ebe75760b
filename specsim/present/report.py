"""The capacity-planning report of `specsim plan`: report.md, report.html, PNG plots, CSV tables.

The report is a list of blocks (headings, paragraphs, tables, images, code) rendered twice:
as Markdown next to its PNG and CSV files, and as one self-contained HTML page with the
plots embedded as base64 PNG and no external reference.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import html
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specsim.errors import SpecError
from specsim.forward.cost import pass_cost
from specsim.forward.shapes import batch_mix_passes
from specsim.serving.capacity import Setting, pareto_front
from specsim.serving.plan import Plan, memory_by_context
from specsim.specs.hardware import Efficiency
from specsim.speculation.recommend import engine_commands

Row = dict[str, Any]
SECTIONS = (
    "Answer", "Forward-pass time T(n) and its knee", "Memory and maximum concurrency",
    "Speedup against drafted nodes", "Recommended chain or tree per batch size",
    "Tokens/s per user against throughput per GPU", "At the SLO: setting and GPU count",
    "Batch-level policies under load", "Engine commands", "Assumptions, sources and error",
)
CONTEXTS = (512.0, 2048.0, 8192.0, 32768.0, 131072.0)
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True, slots=True)
class Block:
    """kind: h2, p, table, img, code; text, rows or a file name."""

    kind: str
    text: str = ""
    rows: tuple[Row, ...] = ()


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        v = float(value)
        if not np.isfinite(v):
            return "-"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(value)


# ---- rendering -------------------------------------------------------------------------------

def to_markdown(blocks: list[Block], title: str) -> str:
    out = [f"# {title}", ""]
    for b in blocks:
        if b.kind == "h2":
            out += [f"## {b.text}", ""]
        elif b.kind == "p":
            out += [b.text, ""]
        elif b.kind == "code":
            out += ["```", b.text, "```", ""]
        elif b.kind == "img":
            out += [f"![{b.text}]({b.text})", ""]
        elif b.kind == "table" and b.rows:
            keys = list(b.rows[0])
            out.append("| " + " | ".join(keys) + " |")
            out.append("|" + "---|" * len(keys))
            for r in b.rows:
                out.append("| " + " | ".join(_fmt(r[k]).replace("|", "\\|") for k in keys)
                           + " |")
            out.append("")
    return "\n".join(out)


STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
         "color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}"
         "td,th{border:1px solid #bbb;padding:3px 7px;text-align:right}th{background:#eee}"
         "pre{background:#f4f4f4;padding:.7em;overflow-x:auto;white-space:pre-wrap}"
         "img{max-width:100%}")


def to_html(blocks: list[Block], title: str, images: dict[str, bytes]) -> str:
    """One page, plots inlined as data: URIs; no script, no external reference."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>"]
    for b in blocks:
        if b.kind == "h2":
            out.append(f"<h2>{html.escape(b.text)}</h2>")
        elif b.kind == "p":
            out.append(f"<p>{html.escape(b.text)}</p>")
        elif b.kind == "code":
            out.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
        elif b.kind == "img":
            data = base64.b64encode(images[b.text]).decode("ascii")
            out.append(f'<p><img alt="{html.escape(b.text)}" '
                       f'src="data:image/png;base64,{data}"></p>')
        elif b.kind == "table" and b.rows:
            keys = list(b.rows[0])
            out.append("<table><tr>" + "".join(f"<th>{html.escape(k)}</th>" for k in keys)
                       + "</tr>")
            for r in b.rows:
                out.append("<tr>" + "".join(f"<td>{html.escape(_fmt(r[k]))}</td>"
                                            for k in keys) + "</tr>")
            out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


def _png(draw: Callable[[Any], None], size: tuple[float, float] = (7.5, 4.3)) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size, dpi=110)
    try:
        draw(ax)
        ax.grid(True, which="both", alpha=0.25)
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.12, top=0.92)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return buf.getvalue()


# ---- sections --------------------------------------------------------------------------------

def tn_rows(plan: Plan) -> list[Row]:
    """T(n) of the target at TP 1 with no cached context: datasheet, and calibrated if so."""
    hw = plan.hardware
    n = np.asarray(TOKENS, dtype=np.float64)
    shape = batch_mix_passes(1.0, n, np.array([0.0]))
    ideal = dataclasses.replace(hw, efficiency=Efficiency())
    tp = plan.best.tp if plan.best else 1
    sheet = pass_cost(plan.model, ideal, shape, tp=tp).time_s
    cal = pass_cost(plan.model, hw, shape, tp=tp).time_s if hw.is_calibrated else sheet
    return [{"tokens": int(k), "datasheet_ms": float(a) * 1e3, "calibrated_ms": float(c) * 1e3,
             "tp": tp} for k, a, c in zip(n, sheet, cal, strict=True)]


def _section_tn(plan: Plan, add: Callable[..., None]) -> None:
    rows = tn_rows(plan)
    knee = plan.hardware.ops_per_byte
    calibrated = plan.hardware.is_calibrated

    def draw(ax: Any) -> None:
        n = [r["tokens"] for r in rows]
        ax.plot(n, [r["datasheet_ms"] for r in rows], "o-", ms=3, label="datasheet roofline")
        if calibrated:
            ax.plot(n, [r["calibrated_ms"] for r in rows], "s-", ms=3, label="calibrated")
        ax.axvline(knee, color="tab:red", ls="--", lw=1, label=f"knee {knee:.0f} tokens")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens in the pass n")
        ax.set_ylabel("T(n), ms")
        ax.set_title(f"{plan.model.name} on {plan.hardware.name}, TP {rows[0]['tp']}",
                     fontsize=10)
        ax.legend(fontsize=8)
    add("p", f"Time of one target forward pass over n tokens (no cached context), TP "
        f"{rows[0]['tp']}. Flat while memory-bound, linear once compute-bound; the knee is at "
        f"ops:byte = peak flops / bandwidth = {knee:.0f} tokens. "
        + ("The calibrated curve uses the fitted efficiencies of this profile."
           if calibrated else "This is a datasheet profile; give a calibrated one "
           "(hardware/calibrated/) for the calibrated curve."))
    add("img", "tn.png", png=_png(draw))
    add("table", rows=rows, csv="tn.csv")


def _section_memory(plan: Plan, add: Callable[..., None]) -> None:
    rows = memory_by_context(plan, CONTEXTS)

    def draw(ax: Any) -> None:
        for tp in sorted({r["tp"] for r in rows}):
            pts = [r for r in rows if r["tp"] == tp]
            ax.plot([r["context_tokens"] for r in pts],
                    [max(r["max_concurrency"], 0.5) for r in pts], "o-", label=f"TP {tp}")
        ax.axvline(plan.scenario.decode_context_tokens, color="0.4", ls=":", lw=1,
                   label="scenario's mean context")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("cached tokens per request")
        ax.set_ylabel("max concurrent requests (per TP group)")
        ax.legend(fontsize=8)
    who = plan.drafters[0].name
    add("p", f"Weights, workspace and caches per GPU (the target's and {who}'s cache) against "
        "the context each request holds; the largest batch that fits in 90% of HBM. At the "
        f"scenario's mean decoding context ({plan.scenario.decode_context_tokens:,.0f} tokens) "
        "the serving model caps the batch at: "
        + ", ".join(f"TP {t.tp}: {t.max_concurrency:,}" for t in plan.drafters[0].tables)
        + ".")
    add("img", "memory.png", png=_png(draw))
    add("table", rows=rows, csv="memory.csv")


def _section_speedup(plan: Plan, add: Callable[..., None]) -> None:
    from specsim.present.plots import speedup_figure

    add("p", "Speedup over plain decoding against drafted nodes per request, per batch size "
        "(the article's figure), at the scenario's context, engine round time included; dots "
        "mark the best size. Under light load large trees win; as the batch grows "
        "verification passes the knee and the best size shrinks.")
    for d in plan.drafters:
        if d.speedup is None:
            continue
        name = f"speedup-{d.name}.png"
        add("img", name, figure=lambda path, d=d: speedup_figure(
            d.speedup, path, title=f"{plan.model.name} on {plan.hardware.name}, {d.name}, "
            f"{plan.scenario.slug}"))


def recommendation_rows(plan: Plan) -> list[Row]:
    """Per batch size, each drafter's best setting side by side."""
    parts = [d for d in plan.drafters if d.recommendation is not None]
    if not parts:
        return []
    rows = []
    for i, c0 in enumerate(parts[0].recommendation.best):  # type: ignore[union-attr]
        row: Row = {"batch": c0.batch}
        for d in parts:
            c = d.recommendation.best[i]  # type: ignore[union-attr]
            what = "none" if c.nodes == 0 else f"{c.shape} {c.nodes} (depth {c.depth})"
            row[d.name] = f"{what}, x{c.speedup:.2f}" + ("" if c.fits else " (no fit)")
        rows.append(row)
    return rows


def _section_recommend(plan: Plan, add: Callable[..., None]) -> None:
    rows = recommendation_rows(plan)
    if not rows:
        add("p", "No drafter: nothing to recommend.")
        return
    add("p", "The chain or tree with the highest speedup at each batch size (specsim "
        "recommend), with its speedup over plain decoding, for every drafter.")
    add("table", rows=rows, csv="recommend.csv")


def pareto_rows(plan: Plan) -> list[Row]:
    """Frontier points per drafter: with speculation, and the plain-decoding frontier."""
    rows: list[Row] = []
    for d in plan.drafters:
        us, ts, labels = [], [], []
        for t in d.tables:
            ok = t.usable
            idx = np.nonzero(ok)
            us.append(t.tokens_per_s_per_user[idx])
            ts.append(t.throughput_per_gpu[idx])
            labels += [(t.tp, int(t.batch[i]), int(t.candidates.nodes[k]))
                       for i, k in zip(*idx, strict=True)]
        u, th = np.concatenate(us), np.concatenate(ts)
        for j in pareto_front(u, th):
            tp, b, n = labels[j]
            rows.append({"drafter": d.name, "tokens_per_s_per_user": float(u[j]),
                         "throughput_per_gpu": float(th[j]), "tp": tp, "batch": b, "nodes": n})
    return rows


def _section_pareto(plan: Plan, add: Callable[..., None]) -> None:
    rows = pareto_rows(plan)

    def draw(ax: Any) -> None:
        for name in dict.fromkeys(r["drafter"] for r in rows):
            pts = [r for r in rows if r["drafter"] == name]
            style = "k--" if name == "none" else "-"
            ax.plot([r["tokens_per_s_per_user"] for r in pts],
                    [r["throughput_per_gpu"] for r in pts], style, marker=".",
                    label="plain decoding" if name == "none" else name)
        ax.axvline(plan.min_tokens_per_s_per_user, color="tab:red", lw=1, ls=":",
                   label="SLO")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("output tokens/s per user")
        ax.set_ylabel("output tokens/s per GPU")
        ax.legend(fontsize=8)
    add("p", "The Pareto frontier of the serving model over batch size, TP degree and "
        "speculation setting (chunked prefill included): the most throughput per GPU at each "
        "speed per user, with each drafter and with plain decoding (dashed).")
    add("img", "pareto.png", png=_png(draw))
    add("table", rows=rows, csv="pareto.csv")


def _setting_row(label: str, s: Setting | None, target: float | None) -> Row:
    if s is None:
        return {"option": label, "setting": "no setting meets the SLO"}
    what = "no speculation" if s.nodes == 0 else \
        f"{s.drafter}: {s.shape} of {s.nodes} nodes, depth {s.depth}"
    return {"option": label, "setting": what, "tp": s.tp, "batch": s.batch,
            "tau": s.tau, "tokens_per_s_per_user": s.tokens_per_s_per_user,
            "throughput_per_gpu": s.throughput_per_gpu, "ttft_ms": s.ttft_s * 1e3,
            "ttft_p90_ms": s.ttft_p90_s * 1e3,
            "gpus_for_target": s.gpus_for(target) if target else "-",
            "replicas": s.gpus_for(target) // s.tp if target else "-"}


def _section_slo(plan: Plan, add: Callable[..., None]) -> None:
    slo, target = plan.min_tokens_per_s_per_user, plan.target_tokens_per_s
    add("p", f"SLO: at least {slo:g} output tokens/s per user"
        + (f"; target: {target:,.0f} output tokens/s in total." if target else
           "; no --target-throughput given, so the setting with the most throughput per GPU "
           "is shown (GPU count: give --target-throughput)."))
    rows = [_setting_row("with speculation", plan.best, target),
            _setting_row("plain decoding", plan.best_plain, target)]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    add("table", rows=[{k: r.get(k, "") for k in keys} for r in rows], csv="slo.csv")
    if plan.best is None and plan.best_plain is None:
        c = plan.closest
        add("p", "No setting meets this SLO. " + (
            f"The closest is {c.drafter} at TP {c.tp}, batch {c.batch}, "
            f"{c.nodes} drafted nodes: {c.tokens_per_s_per_user:,.1f} tokens/s per user. "
            "It would need a faster GPU, a smaller target, a stronger drafter or a lower SLO."
            if c else "Nothing fits in memory."))


def _section_policies(plan: Plan, add: Callable[..., None]) -> None:
    sw = plan.policies
    if sw is None:
        add("p", "No drafter with an acceptance profile: no policy simulation.")
        return
    rel = sw.relative_to_none()

    def draw(ax: Any) -> None:
        for j, name in enumerate(sw.policies):
            ax.plot(sw.batch, rel[j], "o-", ms=3, label=name,
                    color="k" if name == "none" else None)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("load: concurrent requests in the batch")
        ax.set_ylabel("throughput / plain decoding")
        from matplotlib.ticker import FormatStrFormatter

        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        ax.legend(fontsize=8)
    slower = [f"{p} from batch {int(sw.slower_than_none(p)[0])}" for p in sw.policies
              if p.startswith("fixed") and sw.slower_than_none(p).size]
    add("p", f"Simulated with {plan.policy_drafter}'s acceptance (per-request confidences "
        "drawn with a fixed seed) over a load sweep on the smallest TP group that fits: fixed "
        "draft lengths, DSpark's allocation of draft lengths across the batch, and a "
        "goodput-driven policy that turns speculation down under load (TurboSpec). "
        + ("Fixed speculation makes the busy server slower than none: " + "; ".join(slower)
           + "." if slower else "No fixed setting falls below plain decoding in this sweep."))
    add("img", "policies.png", png=_png(draw))
    rows = []
    for i, b in enumerate(sw.batch):
        row: Row = {"batch": int(b)}
        for j, name in enumerate(sw.policies):
            row[f"{name} x"] = float(rel[j, i])
            if name in ("DSpark allocation", "goodput (TurboSpec)"):
                row[f"{name} draft"] = float(sw.mean_draft[j, i])
        rows.append(row)
    add("table", rows=rows, csv="policies.csv")


def command_lines(plan: Plan) -> list[tuple[str, str]]:
    """(drafter, text) per drafter: the recommend API's engine commands, or why there is none.
    """
    out = []
    for d in plan.drafters:
        if d.recommendation is None or d.setup is None:
            continue
        try:
            cmds = engine_commands(d.recommendation, d.setup)
        except SpecError as err:
            out.append((d.name, f"# no command: {err}"))
            continue
        lines = []
        for c in cmds:
            if c.command is None:
                lines.append(f"# {c.engine} {c.version}: {c.reason}")
            else:
                batches = f" (batch {_batch_text(c.batches)})" if c.batches else ""
                lines += [f"# {c.engine} {c.version}{batches}", c.command]
        out.append((d.name, "\n".join(lines)))
    return out


def _batch_text(batches: tuple[int, ...]) -> str:
    """'1-256' for a contiguous run of batch sizes, else the list."""
    if len(batches) > 2 and list(batches) == list(range(batches[0], batches[-1] + 1)):
        return f"{batches[0]}-{batches[-1]}"
    return ", ".join(map(str, batches))


def _section_commands(plan: Plan, add: Callable[..., None]) -> None:
    lines = command_lines(plan)
    if not lines:
        add("p", "No drafter, so plain decoding: start the engine without speculative flags.")
        return
    add("p", "Commands that start a server with the recommended setting (specsim recommend's "
        "engine commands), on the smallest TP group that fits:")
    for name, text in lines:
        add("p", f"{name}:")
        add("code", text)


def _section_assumptions(plan: Plan, add: Callable[..., None]) -> None:
    from specsim.measurement.published import load_published
    from specsim.measurement.validate import validate

    sc = plan.scenario
    rows: list[Row] = [
        {"assumption": "prompt tokens", "value": f"median {sc.prompt.median:g}, p90 "
         f"{sc.prompt.p90:g}", "source": sc.prompt.source},
        {"assumption": "output tokens", "value": f"median {sc.output.median:g}, p90 "
         f"{sc.output.p90:g}", "source": sc.output.source},
    ]
    for d in plan.drafters:
        if d.profile is not None:
            rows.append({"assumption": f"acceptance of {d.name}",
                         "value": ", ".join(f"{a:.2f}" for a in d.profile.position_alphas[:4]),
                         "source": d.profile.source})
    rows += [
        {"assumption": "memory", "value": "90% of HBM usable, 8,192-token workspace",
         "source": "vLLM defaults (gpu_memory_utilization, max_num_batched_tokens)"},
        {"assumption": "chunked prefill", "value": "prompts ride in the round's pass",
         "source": "steady state: B tau / L_out prompts arrive per round"},
        {"assumption": "engine", "value": plan.engine, "source": "engines/ (specsim engines)"},
        {"assumption": "hardware", "value": plan.hardware.name,
         "source": next(iter(plan.hardware.sources.values()), "")},
    ]
    add("table", rows=rows, csv="assumptions.csv")
    results = [v for v in validate(load_published()) if v.error is not None]
    errors = np.abs([float(v.error) for v in results]) * 100  # type: ignore[arg-type]
    by_group: dict[str, list[float]] = {}
    for v, e in zip(results, errors, strict=True):
        by_group.setdefault(v.group, []).append(float(e))
    err_rows: list[Row] = [{"group": "all", "rows": len(errors),
                            "median_abs_error_pct": float(np.median(errors))}]
    err_rows += [{"group": g, "rows": len(e), "median_abs_error_pct": float(np.median(e))}
                 for g, e in sorted(by_group.items())]
    add("p", "Measured error of the round-time model: `specsim validate` against published "
        "speedups, engine terms fitted on the other sources (held out):")
    add("table", rows=err_rows, csv="validate.csv")
    cal = [{"profile": slug, "calibration": hw.sources.get("efficiency.pass_overhead_s", "")}
           for slug, hw in _calibrated()]
    if cal:
        add("p", "Calibration of T(n) against measured kernels (held-out error per op class):")
        add("table", rows=cal, csv="calibration.csv")
    for note in plan.notes:
        add("p", f"Note: {note}")


def _calibrated() -> list[tuple[str, Any]]:
    from specsim.specs.hardware import load_hardware
    from specsim.specs.io import builtin_dir

    folder = builtin_dir("hardware") / "calibrated"
    return [(p.stem, load_hardware(str(p))) for p in sorted(folder.glob("*.yaml"))]


def _section_answer(plan: Plan, add: Callable[..., None]) -> None:
    b, p = plan.best, plan.best_plain
    slo = plan.min_tokens_per_s_per_user
    if b is None and p is None:
        add("p", f"No setting reaches {slo:g} tokens/s per user on {plan.hardware.name}; see "
            "the SLO section for the closest one.")
        return
    s = b or p
    assert s is not None
    text = (f"Serve {plan.model.name} on {plan.hardware.name} for {plan.scenario.name} with "
            + ("no speculation" if s.nodes == 0 else
               f"{s.drafter} ({s.shape} of {s.nodes} drafted nodes)")
            + f" at TP {s.tp}, batch {s.batch}: {s.throughput_per_gpu:,.0f} output tokens/s "
            f"per GPU at {s.tokens_per_s_per_user:,.0f} tokens/s per user (SLO {slo:g}).")
    if p is not None and s.nodes:
        text += (f" Plain decoding at the same SLO: {p.throughput_per_gpu:,.0f} tokens/s per "
                 f"GPU ({s.throughput_per_gpu / p.throughput_per_gpu:.2f}x from speculation).")
    elif p is None and s.nodes:
        text += " Plain decoding cannot meet this SLO."
    if plan.target_tokens_per_s:
        target = plan.target_tokens_per_s
        text += (f" For {target:,.0f} tokens/s: {s.gpus_for(target)} GPUs"
                 + (f" (plain decoding: {p.gpus_for(target)})" if p is not None else "") + ".")
    add("p", text)


SECTION_BUILDERS = (_section_answer, _section_tn, _section_memory, _section_speedup,
                    _section_recommend, _section_pareto, _section_slo, _section_policies,
                    _section_commands, _section_assumptions)


def build_report(plan: Plan, out: Path) -> tuple[list[Block], dict[str, bytes]]:
    """The report's blocks; writes the CSV tables and PNG plots into `out` as it goes."""
    blocks: list[Block] = []
    images: dict[str, bytes] = {}

    def add(kind: str, text: str = "", *, rows: list[Row] | None = None, csv: str = "",
            png: bytes | None = None, figure: Callable[[Path], None] | None = None) -> None:
        if kind == "img":
            path = out / text
            if figure is not None:
                figure(path)
                images[text] = path.read_bytes()
            else:
                assert png is not None
                path.write_bytes(png)
                images[text] = png
        if kind == "table" and rows and csv:
            _write_csv(out / csv, rows)
        blocks.append(Block(kind, text, tuple(rows or ())))

    for title, builder in zip(SECTIONS, SECTION_BUILDERS, strict=True):
        blocks.append(Block("h2", title))
        builder(plan, add)
    return blocks, images


def _write_csv(path: Path, rows: list[Row]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def write_report(plan: Plan, out: Path, *, force: bool = False) -> list[Path]:
    """Write report.md, report.html, the PNGs and CSVs to `out`; refuse an existing report
    folder without `force`. Returns the files written."""
    if out.exists() and any(out.iterdir()) and not force:
        raise SpecError(f"{out}: exists and is not empty; pass --force to overwrite")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SpecError(f"{out}: cannot create the report folder ({err.strerror})") from None
    blocks, images = build_report(plan, out)
    title = f"Capacity plan: {plan.model.name} on {plan.hardware.name}, {plan.scenario.name}"
    (out / "report.md").write_text(to_markdown(blocks, title), encoding="utf-8")
    (out / "report.html").write_text(to_html(blocks, title, images), encoding="utf-8")
    return sorted(out.iterdir())

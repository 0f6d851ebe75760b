"""One round-time formula: `engine_time.round_time` is what validate, speedup, recommend, plan
and `roofline --engine` time a round with (issue 20); and no import cycle through the modules
that carry it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specsim.measurement.published import load_published
from specsim.measurement.validate import METRICS, _samples
from specsim.measurement.validate_rows import row_setup
from specsim.specs.engines import Engine, load_engine
from specsim.specs.models import load_model
from specsim.speculation import engine_time
from specsim.speculation.speedup import speedup_table

REPO_ROOT = Path(__file__).resolve().parent.parent


def _shipped_terms(engine: Engine) -> dict[str, float]:
    """The engine's own term values (what validate's `terms` hold for a full fit)."""
    from specsim.measurement.validate_rows import ZEROED

    return {k: getattr(engine, k) for k in ZEROED}


def _row_waves() -> list[tuple[Any, Any]]:
    """(published row at the batch of one of its waves, that wave's RoundParts) of every
    predicted published row."""
    rows = {r.id: r for r in load_published()}
    out = []
    for row_id, sample in _samples(list(rows.values())).items():
        for parts, _ in sample.run.waves:
            out.append((dataclasses.replace(rows[row_id], batch=int(parts.batch)), parts))
    return out


def test_validate_times_move_with_round_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Add 1 s to every pass round_time returns: each row's plain step and round, as
    validate times them, move by exactly 1 s (the round by its verify pass; no formula of
    validate's own is left to stay put)."""
    waves = _row_waves()[:12]
    terms = [_shipped_terms(load_engine(row.engine)) for row, _ in waves]
    before = [parts.times(t) for (_, parts), t in zip(waves, terms, strict=True)]
    original = engine_time.round_time

    def later(*args: Any, **kwargs: Any) -> engine_time.RoundTime:
        rt = original(*args, **kwargs)
        return dataclasses.replace(rt, step_s=rt.step_s + 1.0, verify_s=rt.verify_s + 1.0)

    monkeypatch.setattr(engine_time, "round_time", later)
    after = [parts.times(t) for (_, parts), t in zip(waves, terms, strict=True)]
    for (step0, round0), (step1, round1) in zip(before, after, strict=True):
        assert step1 - step0 == pytest.approx(1.0, abs=1e-9)
        assert round1 - round0 == pytest.approx(1.0, abs=1e-9)


def test_validate_times_every_published_row_as_speedup_does() -> None:
    """On every wave of every predicted published row, validate's (step, round) with the
    engine's shipped terms equal the speedup table of the same setting (the path speedup,
    recommend and plan take), computed in one go from the kernels up."""
    waves = _row_waves()
    assert len(waves) > 100
    for row, parts in waves:
        if row.concurrency:  # its passes also carry the arriving prompts (validate's own)
            continue
        engine = load_engine(row.engine)
        step, round_s = parts.times(_shipped_terms(engine))
        setup, cands = row_setup(row, engine)
        table = speedup_table(setup, [row.batch], cands)
        assert step == pytest.approx(float(table.baseline_s[0]), rel=1e-12), row.id
        if not row.plain:  # a plain row's "round" is no round (nodes 0)
            assert round_s == pytest.approx(float(table.round_s[0, 0]), rel=1e-12), row.id


def test_validate_times_every_row_at_once_as_one_by_one() -> None:
    """A fit times every row of an engine in one call per engine (`PartsTimer`) and predicts
    every sample at once (`SamplePredictor`): the same (step, round) as each wave's own
    `RoundParts.times`, and the same prediction as each `Sample.predict`, to the last bit, at
    the shipped terms and at terms away from them (graph and eager engines, synchronous and
    overlapped, every metric)."""
    from specsim.measurement.validate import PartsTimer, SamplePredictor

    waves = _row_waves()
    by_engine: dict[str, list[Any]] = {}
    for row, parts in waves:
        by_engine.setdefault(row.engine, []).append(parts)
    assert len(by_engine) >= 3
    assert {p.engine.spec_overlap for _, p in waves} == {False, True}
    rows = {r.id: r for r in load_published()}
    samples: dict[str, list[Any]] = {}
    for row_id, sample in _samples(list(rows.values())).items():
        samples.setdefault(rows[row_id].engine, []).append(sample)
    assert {s.metric for group in samples.values() for s in group} == set(METRICS)
    for slug, parts in by_engine.items():
        shipped = _shipped_terms(load_engine(slug))
        timer = PartsTimer(parts)
        predict = SamplePredictor(samples[slug])
        for terms in (shipped, {k: 1.7 * v + 1e-5 for k, v in shipped.items()}):
            step, round_s = timer(terms)
            assert [(step[timer.index[id(p)]], round_s[timer.index[id(p)]]) for p in parts] \
                == [p.times(terms) for p in parts], slug
            assert predict(terms).tolist() == [s.predict(terms) for s in samples[slug]], slug


def test_round_time_by_hand() -> None:
    """A CUDA-graph engine, per_pass 1 ms, per_request 0.1 ms, drafter_pass 0.2 ms, round 1 ms,
    round_request 0.05 ms, batch 4: step = 5 + 1 + 0.4 = 6.4 ms; verify = 7 + 1.4 = 8.4 ms;
    draft (3 passes, 2 ms of kernels) = 2 + 0.6 = 2.6 ms; host = 1 + 0.2 = 1.2 ms; round
    8.4 + 2.6 + 1.2 = 12.2 ms synchronous, max(11, 1.2) = 11 ms overlapped."""
    engine = Engine(slug="t", name="t", version="1", launch="graphs", per_pass_s=1e-3,
                    per_request_s=1e-4, drafter_pass_s=2e-4, round_s=1e-3,
                    round_request_s=5e-5)
    target = load_model("llama-3.1-8b")
    for overlap, want in ((False, 12.2e-3), (True, 11.0e-3)):
        rt = engine_time.round_time(engine.with_spec_overlap(overlap), target, None, batch=4.0,
                                    step_gpu_s=5e-3, verify_gpu_s=7e-3, draft_gpu_s=2e-3,
                                    passes=3.0)
        assert float(rt.step_s) == pytest.approx(6.4e-3)
        assert float(rt.verify_s) == pytest.approx(8.4e-3)
        assert float(rt.draft_s) == pytest.approx(2.6e-3)
        assert float(rt.round_s) == pytest.approx(want)
    # vectorized: (B, 1) batches against (B, K) verify passes
    rt = engine_time.round_time(engine, target, None, batch=np.array([[1.0], [8.0]]),
                                step_gpu_s=np.array([[5e-3], [5e-3]]),
                                verify_gpu_s=np.full((2, 3), 7e-3),
                                draft_gpu_s=np.zeros((2, 3)), passes=np.zeros((2, 3)))
    assert rt.round_s.shape == (2, 3)
    np.testing.assert_allclose(rt.verify_s[:, 0], [8.1e-3, 8.8e-3])


# ---------------------------------------------------------------- import cycles

# The modules of this change: none may sit in an import cycle (specs.hardware and
# specs.transferred imported each other).
NO_CYCLE = ("specsim.specs.hardware", "specsim.specs.transferred",
            "specsim.specs.gemm_efficiency", "specsim.specs.engines",
            "specsim.speculation.engine_time", "specsim.measurement.validate",
            "specsim.measurement.validate_rows",
            "specsim.speculation.speedup", "specsim.serving.capacity")


def _import_graph() -> dict[str, set[str]]:
    """Module -> the specsim modules it imports anywhere in its file (lazy imports too)."""
    files = {".".join(p.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (REPO_ROOT / "specsim").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specsim"):
                module = str(node.module)
                deps |= {f"{module}.{a.name}" if f"{module}.{a.name}" in files else module
                         for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("specsim")}
        graph[name] = {d for d in deps if d in files and d not in (name, "specsim")}
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), list(graph[start])
    while todo:
        module = todo.pop()
        if module == goal:
            return True
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return False


def test_no_import_cycle_through_the_round_time_and_hardware_modules() -> None:
    graph = _import_graph()
    assert "specsim.specs.transferred" in graph["specsim.specs.hardware"]  # one way only
    assert not _reaches(graph, "specsim.specs.transferred", "specsim.specs.hardware")
    for module in NO_CYCLE:
        assert not _reaches(graph, module, module), module


def test_the_graph_finds_a_cycle_when_there_is_one() -> None:
    """The check above can fail: a two-module loop is found."""
    assert _reaches({"a": {"b"}, "b": {"a"}}, "a", "a")
    assert not _reaches({"a": {"b"}, "b": set()}, "a", "a")


# ---------------------------------------------------------------- dtypes by name


def test_int8_weights_are_not_priced_as_fp8() -> None:
    """Dtypes travel by name: int8 and fp8 store one byte per weight, but only fp8 has a
    quantized-GEMM rate in engines/vllm.yaml (0.82 of bf16's). By hand, an int8 decoding step
    at one token on an H100 is its roofline time at the GPU's kernel model (0.862 of its
    bandwidth) + per_pass (0) + per_request 0.0011 ms + 364 graph kernels (32 layers x 11 + 12
    per pass) x 2.5 us + 129 memory-bound weight GEMMs (32 x 4 + the LM head) x the 5.67 us
    GEMM floor (the GEMMs' compute adds < 0.5% through the smooth maximum); fp8's is longer
    (its GEMMs stream at 0.82 of the bf16 rate)."""
    import json

    from tests.test_cli import run

    def first_row(dtype: str) -> dict[str, float]:
        out = run("roofline", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--context", "0",
                  "--tokens", "1", "--engine", "vllm", "--weight-dtype", dtype, "--json")
        assert out.returncode == 0, out.stderr
        return dict(json.loads(out.stdout)["rows"][0])

    int8, fp8 = first_row("int8"), first_row("fp8")
    assert int8["time_ms"] == pytest.approx(fp8["time_ms"])  # same bytes, same roofline
    want = int8["time_ms"] / 0.862 + 0.0 + 0.0011 + 364 * 2.5e-3 + 129 * 5.67e-3
    assert int8["engine_ms"] == pytest.approx(want, rel=5e-3)
    assert fp8["engine_ms"] > int8["engine_ms"] + 0.1


def test_a_gemm_op_carries_its_weight_dtype_by_name() -> None:
    """gpt-oss-20b ships bf16 attention and mxfp4 experts: each GEMM says which."""
    from specsim.forward.cost import pass_cost
    from specsim.forward.shapes import batch_mix_passes
    from specsim.specs.hardware import load_hardware

    cost = pass_cost(load_model("gpt-oss-20b"), load_hardware("h100-sxm"),
                     batch_mix_passes(1.0, np.array([1.0]), np.array([0.0])))
    dtypes = {c.op.name: c.op.weight_dtype for c in cost.ops if c.op.op_class == "gemm"}
    assert dtypes["experts_up"] == dtypes["experts_down"] == "mxfp4"
    assert dtypes["lm_head"] == "bf16"

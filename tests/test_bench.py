"""The user's-GPU loop: `specsim bench plan` and `specsim bench fit`.

The round trip: result files written in vLLM's `--save-result` format from a known engine whose
host terms differ from the built-in ones (chosen by hand below) are fitted back within 5% per
term, and a concurrency the fit never saw is predicted within 3%.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specsim.errors import SpecError
from specsim.measurement.bench import (
    PLAN_FILE,
    TERMS,
    BenchPlan,
    BenchPoint,
    fit_bench,
    make_bench_plan,
    read_bench_plan,
)

# The engine the result files come from: every host term well away from vLLM's built-in
# values (per_pass 0, per_request 1.1 us, round 0.26 ms, drafter pass 0.31 ms, round per
# request 0).
TRUE = {"per_pass_s": 400e-6, "per_request_s": 25e-6, "round_s": 900e-6,
        "round_request_s": 40e-6, "drafter_pass_s": 120e-6}


def _plan() -> BenchPlan:
    return make_bench_plan(engine="vllm", model="llama-3.1-8b", hardware="h100-sxm",
                           drafter="eagle3-llama-3.1-8b")


def _tpot_s(plan: BenchPlan, terms: dict[str, float]) -> dict[str, float]:
    """Each point's mean TPOT under the given host terms (the engine the files come from)."""
    from specsim.measurement.bench import _plan_rows
    from specsim.measurement.published import _row
    from specsim.measurement.validate import _samples
    from specsim.specs.engines import load_engine

    rows = [_row(r, Path(PLAN_FILE), i) for i, r in enumerate(_plan_rows(plan))]
    samples = _samples(rows, "vllm")
    base = load_engine("vllm")
    full = {t: getattr(base, t) for t in ("op_host_s", "kernel_s", "per_pass_s",
                                          "per_request_s", "drafter_pass_s", "round_s",
                                          "round_request_s")}
    full.update(terms)
    return {r.id: samples[r.id].predict(full) / 1e3 for r in rows}


def _write_vllm(folder: Path, plan: BenchPlan, tpot_s: dict[str, float]) -> None:
    """One `--save-result` file per point, with the keys vllm/benchmarks/serve.py writes."""
    folder.mkdir(parents=True, exist_ok=True)
    for p in plan.points:
        n, out = p.num_prompts, plan.output_tokens
        tpot_ms = tpot_s[p.id] * 1e3
        duration = n / p.concurrency * out * tpot_s[p.id]
        data = {
            "date": "20261201-120000", "endpoint_type": "openai", "backend": "vllm",
            "label": None, "model_id": "meta-llama/Llama-3.1-8B-Instruct",
            "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": n,
            "request_rate": "inf", "burstiness": 1.0, "max_concurrency": p.concurrency,
            "duration": duration, "completed": n, "failed": 0,
            "total_input_tokens": n * plan.input_tokens, "total_output_tokens": n * out,
            "request_throughput": n / duration, "request_goodput": None,
            "output_throughput": n * out / duration,
            "total_token_throughput": n * (out + plan.input_tokens) / duration,
            "max_output_tokens_per_s": n * out / duration, "max_concurrent_requests": p.concurrency,
            "mean_ttft_ms": 40.0, "median_ttft_ms": 40.0, "std_ttft_ms": 1.0,
            "p99_ttft_ms": 45.0, "mean_tpot_ms": tpot_ms, "median_tpot_ms": tpot_ms,
            "std_tpot_ms": 0.0, "p99_tpot_ms": tpot_ms, "mean_itl_ms": tpot_ms,
            "median_itl_ms": tpot_ms, "std_itl_ms": 0.0, "p99_itl_ms": tpot_ms}
        if p.draft_tokens:
            k, accepted = p.draft_tokens, p.tokens_per_round - 1.0
            rates = [accepted / k] * k  # marginal rates summing to the accepted tokens
            drafts = int(n * out / p.tokens_per_round)
            data.update(spec_decode_acceptance_rate=100 * accepted / k,
                        spec_decode_acceptance_length=p.tokens_per_round,
                        spec_decode_num_drafts=drafts, spec_decode_draft_tokens=drafts * k,
                        spec_decode_accepted_tokens=int(drafts * accepted),
                        spec_decode_per_position_acceptance_rates=rates)
        (folder / f"{p.id}.json").write_text(json.dumps(data))


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory: pytest.TempPathFactory) -> tuple[BenchPlan, Path]:
    plan = _plan()
    folder = tmp_path_factory.mktemp("results")
    _write_vllm(folder, plan, _tpot_s(plan, TRUE))
    return plan, folder


def test_terms_are_fitted_back_within_5_percent(round_trip: tuple[BenchPlan, Path]) -> None:
    plan, folder = round_trip
    fit = fit_bench(plan, folder)
    for term in TERMS:
        assert fit.terms[term] == pytest.approx(TRUE[term], rel=0.05), term
    assert fit.held_out_error_pct < 3.0


def test_an_unseen_concurrency_is_predicted_within_3_percent(
        round_trip: tuple[BenchPlan, Path]) -> None:
    plan, folder = round_trip
    fit = fit_bench(plan, folder)
    unseen = dataclasses.replace(plan, points=(
        BenchPoint(id="plain-c16", concurrency=16, draft_tokens=0, tokens_per_round=1.0,
                   num_prompts=64, why="held out", server="plain"),
        BenchPoint(id="k2-tau2-c16", concurrency=16, draft_tokens=2, tokens_per_round=2.0,
                   num_prompts=64, why="held out", server="k2-tau2")))
    truth = _tpot_s(unseen, TRUE)
    predicted = _tpot_s(unseen, fit.terms)
    for point in truth:
        assert predicted[point] == pytest.approx(truth[point], rel=0.03), point


def test_the_profile_is_an_engine_every_command_takes(round_trip: tuple[BenchPlan, Path],
                                                       tmp_path: Path) -> None:
    from specsim.measurement.bench import engine_yaml
    from specsim.specs.engines import load_engine

    plan, folder = round_trip
    fit = fit_bench(plan, folder)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(engine_yaml(fit, "vLLM on my H100")))
    engine = load_engine(str(path))
    assert engine.base_slug == "vllm" and engine.name == "vLLM on my H100"
    for term in TERMS:
        assert getattr(engine, term) == pytest.approx(fit.terms[term], rel=1e-3)
        assert "specsim bench fit" in engine.sources[term]
    r = subprocess.run([sys.executable, "-m", "specsim", "recommend", "--engine", str(path),
                        "--drafter", "eagle3-llama-3.1-8b", "--batch", "1,8"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "vllm serve" in r.stdout


def test_the_printed_plan_runs_as_pasted(tmp_path: Path) -> None:
    """Every uncommented line is one command whose words are the plan's argv; the servers
    are printed commented (they run in their own terminal)."""
    out = tmp_path / "plan"
    r = subprocess.run([sys.executable, "-m", "specsim", "bench", "plan", "--engine", "vllm",
                        "--drafter", "eagle3-llama-3.1-8b", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    plan = read_bench_plan(out / PLAN_FILE)
    commands = [line for line in r.stdout.splitlines() if line and not line.startswith("#")]
    assert commands[0] == "mkdir -p bench-results"
    clients = [shlex.split(c) for c in commands[1:]]
    assert clients == [list(plan.client_argv(p, "meta-llama/Llama-3.1-8B-Instruct",
                                             "bench-results")) for p in plan.points]
    for argv in clients:  # vllm bench serve's own flags (vllm/benchmarks/serve.py)
        assert argv[:3] == ["vllm", "bench", "serve"] and "--save-result" in argv
    servers = [line[2:] for line in r.stdout.splitlines() if line.startswith("# vllm serve")]
    assert [shlex.split(s) for s in servers] == [list(v) for v in plan.servers.values()]
    forced = [json.loads(a[a.index("--speculative-config") + 1])
              for a in plan.servers.values() if "--speculative-config" in a]
    assert {(c["num_speculative_tokens"], c["synthetic_acceptance_length"]) for c in forced} \
        == {(2, 2.0), (4, 3.0), (4, 2.0)}
    assert all(c["rejection_sample_method"] == "synthetic" for c in forced)


def test_sglang_servers_force_acceptance_through_the_environment() -> None:
    plan = make_bench_plan(engine="sglang", model="llama-3.1-8b", hardware="h100-sxm",
                           drafter="eagle3-llama-3.1-8b")
    assert plan.server_env["k2-tau2"] == {"SGLANG_SIMULATE_ACC_LEN": "2"}
    argv = plan.servers["k2-tau2"]
    assert argv[argv.index("--speculative-num-steps") + 1] == "2"
    # synchronous rounds: their host work shows in the measured time
    assert "--disable-overlap-schedule" in argv
    assert "--disable-overlap-schedule" not in plan.servers["plain"]
    client = plan.client_argv(plan.points[0], "m", "out")
    assert client[:3] == ("python", "-m", "sglang.bench_serving")
    assert "--output-details" in client and client[client.index("--output-file") + 1] \
        == "out/plain-c1.jsonl"


def test_missing_points_say_which_to_run(round_trip: tuple[BenchPlan, Path],
                                         tmp_path: Path) -> None:
    plan, folder = round_trip
    for p in plan.points:
        if p.draft_tokens == 4:
            continue
        (tmp_path / f"{p.id}.json").write_text((folder / f"{p.id}.json").read_text())
    with pytest.raises(SpecError, match="no point identifies drafter_pass_s; run point k4-"):
        fit_bench(plan, tmp_path)


def test_a_result_of_another_concurrency_is_refused(round_trip: tuple[BenchPlan, Path],
                                                    tmp_path: Path) -> None:
    plan, folder = round_trip
    for p in plan.points:
        text = (folder / f"{p.id}.json").read_text()
        if p.id == "plain-c8":
            data = json.loads(text)
            data["max_concurrency"] = 4
            text = json.dumps(data)
        (tmp_path / f"{p.id}.json").write_text(text)
    with pytest.raises(SpecError) as err:
        fit_bench(plan, tmp_path)
    assert "plain-c8.json" in str(err.value) and "max_concurrency" in str(err.value)


def test_a_plan_with_the_profile_says_it_is_calibrated(round_trip: tuple[BenchPlan, Path],
                                                       tmp_path: Path) -> None:
    from specsim.measurement.bench import engine_yaml
    from specsim.present.report_answer import answer_text
    from specsim.serving.plan import make_plan

    plan, folder = round_trip
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(engine_yaml(fit_bench(plan, folder), "vLLM on my H100")))
    report = make_plan(hardware="h100-sxm", model="llama-3.1-8b",
                       drafters=["eagle3-llama-3.1-8b"], engine=str(path), workload="chat",
                       tps=(1,))
    assert f"calibrated on your own measurements (vLLM on my H100, {path}" in \
        answer_text(report)


def test_a_result_of_another_model_or_client_is_refused(round_trip: tuple[BenchPlan, Path],
                                                        tmp_path: Path) -> None:
    plan, folder = round_trip
    for p in plan.points:
        data = json.loads((folder / f"{p.id}.json").read_text())
        if p.id == "plain-c1":
            data["model_id"] = "Qwen/Qwen3-8B"
        (tmp_path / f"{p.id}.json").write_text(json.dumps(data))
    with pytest.raises(SpecError) as err:
        fit_bench(plan, tmp_path)
    text = str(err.value)
    assert "plain-c1.json" in text and "model_id" in text and "\n" not in text
    (tmp_path / "plain-c1.json").write_text("{not json")
    with pytest.raises(SpecError, match="plain-c1.json"):
        fit_bench(plan, tmp_path)


def test_bench_fit_cli_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "specsim", "bench", "fit", str(tmp_path),
                        "--results", str(tmp_path), "--out", str(tmp_path / "x.yaml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert PLAN_FILE in r.stderr and not (tmp_path / "x.yaml").exists()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_printed_flag_is_one_the_engines_recorded(engine: str) -> None:
    """The clients' flags are those recorded from the released wheels in engines/*.yaml
    (`speculative.benchmark_client`), and every server's speculative setting passes the
    engine's own rules (vLLM's allowed config keys include the forcing keys)."""
    from specsim.engines import adapter

    plan = make_bench_plan(engine=engine, model="llama-3.1-8b", hardware="h100-sxm",
                           drafter="eagle3-llama-3.1-8b")
    client = adapter(engine).args.rules["benchmark_client"]
    head = tuple(shlex.split(client["command"]))
    for p in plan.points:
        argv = plan.client_argv(p, plan.model_id, "out")
        assert argv[:len(head)] == head
        flags = [a for a in argv[len(head):] if a.startswith("--")]
        assert set(flags) <= set(client["flags"]), set(flags) - set(client["flags"])


def test_a_result_of_another_engine_version_is_refused(tmp_path: Path) -> None:
    """SGLang's result names the server's version (server_info.version): another version
    than the plan's is refused, naming the file and field."""
    plan = make_bench_plan(engine="sglang", model="llama-3.1-8b", hardware="h100-sxm",
                           drafter="eagle3-llama-3.1-8b")
    source = Path(__file__).parent / "data" / "engine_results" / "sglang_two_runs.jsonl"
    run = json.loads(source.read_text().splitlines()[0])
    run["server_info"] = {**run["server_info"], "version": "0.5.9",
                          "model_path": plan.model_id}
    run["max_concurrency"] = 1
    (tmp_path / "plain-c1.jsonl").write_text(json.dumps(run) + "\n")
    with pytest.raises(SpecError) as err:
        fit_bench(plan, tmp_path)
    text = str(err.value)
    assert "plain-c1.jsonl" in text and "server_info.version" in text and "0.5.23" in text

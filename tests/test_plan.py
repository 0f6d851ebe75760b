"""specsim plan: scenarios, the serving model, batch policies, and the report (issue 11)."""

from __future__ import annotations

import csv
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from specsim.errors import SpecError
from specsim.present.report import SECTIONS, write_report
from specsim.serving.capacity import Demand, Setting, best_setting, pareto_front
from specsim.serving.latency import Latency
from specsim.serving.plan import make_plan
from specsim.serving.policies import dspark_allocation, round_profile, simulate_policies
from specsim.serving.scenarios import LengthDistribution, load_scenario
from specsim.specs.acceptance import AcceptanceProfile, constant_profile
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from specsim.specs.outputs import write_yaml
from specsim.specs.workloads import workload_to_yaml
from specsim.speculation.setup import load_setup
from specsim.speculation.speedup import Setup

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_every_scenario_loads_with_lengths_and_family_profiles() -> None:
    for slug in ("chat", "code", "math", "long-context", "agentic"):
        sc = load_scenario(slug)
        assert sc.lengths_given
        assert {"eagle3", "dflash", "p_eagle"} <= set(sc.by_family)
    # The old workloads still load, with stated default lengths.
    old = load_scenario("chat-dflash-qwen3-8b")
    assert not old.lengths_given and old.prompt.median == 2048


def test_chat_acceptance_is_below_math_for_the_same_drafter() -> None:
    """published_measurements.md: chat tau is 40-50% of math/code tau for one drafter."""
    chat, math = load_scenario("chat"), load_scenario("math")
    for family in ("dflash", "dspark"):
        ratio = chat.by_family[family].alphas(1)[0] / math.by_family[family].alphas(1)[0]
        assert ratio < 1


def test_lognormal_mean_by_hand() -> None:
    # median 100, p90 350: sigma = ln 3.5 / 1.2816 = 0.9775; mean = 100 e^(sigma^2/2) = 161.3
    d = LengthDistribution(median=100, p90=350, source="hand")
    assert d.sigma == pytest.approx(np.log(3.5) / 1.2815516, rel=1e-6)
    assert d.mean == pytest.approx(161.25, abs=0.1)
    assert d.quantile(0.9) == pytest.approx(350, rel=1e-6)
    with pytest.raises(SpecError):
        LengthDistribution(median=100, p90=50, source="bad")


def test_fitted_acceptance_plugs_in_as_a_scenario(tmp_path: Path) -> None:
    fitted = AcceptanceProfile(position_alphas=(0.9, 0.8, 0.7), source="vLLM counters")
    path = tmp_path / "fitted.yaml"
    write_yaml(path, workload_to_yaml("measured", fitted, context=3000.0,
                                      counts_source="vLLM counters"), force=False)
    sc = load_scenario(str(path))
    assert sc.prompt.median == 3000 and not sc.lengths_given
    assert sc.profile_for(None).position_alphas == (0.9, 0.8, 0.7)
    plan = make_plan(hardware="h100-sxm", model="llama-3.1-8b",
                     drafters=["eagle3-llama-3.1-8b"], engine="roofline", workload="chat",
                     acceptance=sc.acceptance, tps=(1,))
    assert plan.drafters[0].profile is not None
    assert plan.drafters[0].profile.position_alphas == (0.9, 0.8, 0.7)


def test_pareto_front_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    u, t = rng.random(200), rng.random(200)
    front = set(pareto_front(u, t).tolist())
    brute = {i for i in range(200)
             if not np.any((u >= u[i]) & (t >= t[i]) & ((u > u[i]) | (t > t[i])))}
    assert front == brute


def test_gpus_for_target_by_hand() -> None:
    lat = Latency(ttft_s=(0.01, 0.02, 0.03), itl_s=(0.01, 0.01, 0.02), tpot_s=0.005)
    s = Setting(drafter="d", tp=2, batch=8, shape="chain", nodes=3, depth=3, max_width=1,
                tau=2.0, round_s=0.01, tokens_per_s_per_user=200.0, throughput_per_gpu=800.0,
                latency=lat)
    # one replica = 2 GPUs x 800 = 1600 tokens/s; 10,000 needs ceil(6.25) = 7 replicas = 14 GPUs
    assert s.gpus_for(10_000) == 14
    assert s.gpus_for(1_600) == 2


def test_demand_replicas_by_hand() -> None:
    # 1,000 users at 300 per replica: ceil(3.33) = 4 replicas; at 250 exactly 4
    users = Demand(users=1000)
    assert users.replicas(np.array([300.0, 250.0, 1000.0]), 1.0).tolist() == [4, 4, 1]
    # 10 requests/s of 500 output tokens = 5,000 tokens/s over 1,600 per replica: 4 replicas
    rate = Demand(requests_per_s=10, output_tokens=500)
    assert rate.rate_tokens_per_s == 5000
    assert rate.replicas(8, 1600.0) == 4
    with pytest.raises(SpecError, match="one demand"):
        Demand(users=10, tokens_per_s=100)
    with pytest.raises(SpecError, match="users"):
        Demand(users=-1)


def _article_setup() -> Setup:
    """The article's tree figure: 8B on H100, drafting 0.05 of a step, contexts ignored."""
    return Setup(target=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"),
                 draft_cost=0.05, context=0.0)


def test_policies_reproduce_the_article() -> None:
    sweep = simulate_policies(_article_setup(), constant_profile(0.8), seed=0)
    rel = sweep.relative_to_none()
    b = list(sweep.batch)
    tree = rel[sweep.policies.index("fixed tree 64")]
    # "A 64-node tree there [B = 128] makes decoding almost four times slower"
    assert 1 / tree[b.index(128)] == pytest.approx(3.8, rel=0.1)
    # light load: long drafts win (DSpark drafts the whole block, tree beats chains)
    dspark = sweep.policies.index("DSpark allocation")
    assert sweep.mean_draft[dspark, b.index(1)] >= 12
    assert tree[b.index(1)] > rel[sweep.policies.index("fixed chain 2"), b.index(1)]
    # heavy load: speculation shrinks, and adaptive policies never fall below none
    assert sweep.mean_draft[dspark, b.index(256)] <= 2
    goodput = sweep.policies.index("goodput (TurboSpec)")
    assert sweep.mean_draft[goodput, b.index(256)] <= 2
    assert rel[dspark].min() >= 0.99 and rel[goodput].min() >= 0.97
    assert 128 in sweep.slower_than_none("fixed tree 64")


def test_policies_are_deterministic_for_a_seed() -> None:
    a = simulate_policies(_article_setup(), constant_profile(0.7), seed=5, loads=(4, 64))
    b = simulate_policies(_article_setup(), constant_profile(0.7), seed=5, loads=(4, 64))
    assert np.array_equal(a.tokens_per_s, b.tokens_per_s)


def test_dspark_allocation_is_the_brute_force_optimum() -> None:
    """Greedy over sorted survivals (per cap on the longest draft) equals exhaustive search
    over prefix lengths (B = 2), every round charged the drafter's passes to its longer draft."""
    rounds = round_profile(_article_setup(), [2], 4)
    conf = np.array([[0.9, 0.8, 0.7, 0.6], [0.5, 0.4, 0.3, 0.2]])
    surv = np.cumprod(conf, axis=1)
    _, rate = dspark_allocation(surv, rounds, 0)
    best = 0.0
    for g0 in range(5):
        for g1 in range(5):
            tokens = 2 + surv[0, :g0].sum() + surv[1, :g1].sum()
            best = max(best, tokens / float(rounds.seconds(0, g0 + g1, max(g0, g1))))
    assert rate == pytest.approx(best, rel=1e-12)


@pytest.fixture(scope="module")
def small_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    plan = make_plan(hardware="h100-sxm", model="llama-3.1-8b",
                     drafters=["eagle3-llama-3.1-8b"], engine="roofline", workload="chat",
                     min_tokens_per_s_per_user=100, target_tokens_per_s=50_000, tps=(1, 2))
    out = tmp_path_factory.mktemp("report")
    write_report(plan, out, force=True)
    return plan, out


def test_report_has_every_section_and_valid_pngs(small_report: tuple[object, Path]) -> None:
    from matplotlib.image import imread

    _, out = small_report
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    for title in SECTIONS:
        assert f"## {title}" in md and f"<h2>{title}</h2>" in page
    pngs = sorted(out.glob("*.png"))
    assert {p.name for p in pngs} >= {"tn.png", "memory.png", "pareto.png", "policies.png",
                                      "speedup-eagle3-llama-3.1-8b.png"}
    for p in pngs:
        assert p.read_bytes()[:8] == PNG_SIGNATURE
        image = imread(p)
        assert image.shape[0] > 100 and float(np.std(image)) > 0.01  # not blank
    assert (out / "slo.csv").exists() and (out / "pareto.csv").exists()


def test_report_html_is_self_contained(small_report: tuple[object, Path]) -> None:
    _, out = small_report
    page = (out / "report.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert refs and all(r.startswith("data:image/png;base64,") for r in refs)
    assert "http://" not in page.split("<body>")[0] and "<script" not in page
    assert "<link" not in page


def test_report_numbers_equal_the_library(small_report: tuple[object, Path]) -> None:
    plan, out = small_report
    best = best_setting(plan.tables, min_tokens_per_s_per_user=100,  # type: ignore[attr-defined]
                        target_tokens_per_s=50_000)
    assert best is not None and best == plan.best  # type: ignore[attr-defined]
    md = (out / "report.md").read_text()
    assert f"{best.throughput_per_gpu:,.0f} output tokens/s per GPU" in md
    assert best.gpus == best.gpus_for(50_000)
    replicas = best.gpus // best.tp  # "1 replica", "2 replicas"
    assert (f"{best.gpus} GPUs ({replicas} replica{'s' * (replicas != 1)} of TP {best.tp}) "
            "for 50,000 output tokens/s") in md
    slo = (out / "slo.csv").read_text().splitlines()
    assert slo[1].startswith("with speculation") and f",{best.gpus}," in slo[1]


def test_report_folder_is_not_overwritten(small_report: tuple[object, Path]) -> None:
    plan, out = small_report
    with pytest.raises(SpecError, match="--force"):
        write_report(plan, out)  # type: ignore[arg-type]


def test_unmeetable_slo_says_what_is_closest(tmp_path: Path) -> None:
    plan = make_plan(hardware="h100-sxm", model="llama-3.1-8b",
                     drafters=["eagle3-llama-3.1-8b"], engine="roofline", workload="chat",
                     min_tokens_per_s_per_user=1e6, tps=(1,))
    assert plan.best is None and plan.best_plain is None and plan.closest is not None
    write_report(plan, tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text()
    assert "No setting meets this SLO. The closest is" in md


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from specsim.cli import app

    runner = CliRunner()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("keep")
    cases = [
        (["plan", "--out", str(tmp_path / "taken")], "--force"),
        (["plan", "--workload", "nope", "--out", str(tmp_path / "a")], "unknown"),
        (["plan", "--model", "deepseek-v3", "--hardware", "l40", "--out", str(tmp_path / "b")],
         "does not fit"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args, standalone_mode=False)
        assert isinstance(result.exception, SpecError) and message in str(result.exception)
    assert (tmp_path / "taken" / "x").read_text() == "keep"


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="chromium is not installed (`.ci/run` installs it: apt-get install "
                    "-y chromium)")
def test_report_html_in_headless_chromium(small_report: tuple[object, Path],
                                          tmp_path: Path) -> None:
    """The page loads with no console error, requests nothing off the machine, renders."""
    from matplotlib.image import imread

    _, out = small_report
    url = (out / "report.html").resolve().as_uri()
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0 and "<h2>Engine commands</h2>" in dom.stdout
    urls = re.findall(r'(?:src|href)="([^"]*)"', dom.stdout)
    assert all(u.startswith("data:") for u in urls)
    assert not re.search(r"CONSOLE\(\d+\)|Uncaught|net::ERR_", dom.stderr)
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,2000", url],
                   capture_output=True, timeout=120, check=True)
    image = imread(shot)
    assert image.shape[:2] == (2000, 1200) and float(np.std(image)) > 0.05


def _answer_section(md: str) -> str:
    return md.split("## Answer", 1)[1].split("\n## ", 1)[0]


def test_answer_names_the_command_of_its_own_setting(small_report: tuple[object, Path]) -> None:
    """The Answer's command runs exactly the chosen chain, TP and batch (a chain of k drafts is
    vLLM's num_speculative_tokens k and SGLang's steps k, draft tokens k + 1)."""
    from specsim.serving.plan import setting_commands

    plan, out = small_report
    best = plan.best  # type: ignore[attr-defined]
    assert best is not None and best.nodes > 0 and best.shape == "chain"
    answer = _answer_section((out / "report.md").read_text())
    commands = {c.engine: c.command for c in setting_commands(plan, best)}  # type: ignore[arg-type]
    assert set(commands) == {"vllm", "sglang", "trtllm"}
    vllm, sglang = commands["vllm"], commands["sglang"]
    # TensorRT-LLM: the chain in its extra-options YAML, capped at the batch
    (trtllm,) = [c for c in setting_commands(plan, best) if c.engine == "trtllm"]  # type: ignore[arg-type]
    ((_, text),) = trtllm.files
    assert yaml.safe_load(text)["speculative_config"]["max_draft_len"] == best.nodes
    assert trtllm.argv[-2:] == ("--max_batch_size", str(best.batch))
    assert f'"num_speculative_tokens":{best.nodes}}}' in vllm
    assert f"--max-num-seqs {best.batch}" in vllm
    assert f"--speculative-num-steps {best.nodes} " in sglang
    assert f"--speculative-num-draft-tokens {best.nodes + 1} " in sglang
    assert f"--max-running-requests {best.batch}" in sglang
    assert ("--tensor-parallel-size" in vllm) == (best.tp > 1)
    assert vllm in answer and sglang in answer
    # the SLO, the demand and plain decoding are stated in the Answer with their meaning
    assert "at least 100 output tokens/s (TPOT at most 10 ms, --min-tokens-per-s-per-user)" \
        in answer
    assert (f"{best.gpus} GPUs ({best.replicas} replica{'s' * (best.replicas != 1)} of TP "
            f"{best.tp}) for 50,000 output tokens/s") in answer
    plain = plan.best_plain  # type: ignore[attr-defined]
    assert (f"Without speculation: {plain.gpus} GPUs (TP {plain.tp}, batch {plain.batch:,} "
            "per replica") in answer


def test_speedup_curves_keep_the_best_candidate_per_node_count() -> None:
    """Two candidates of 2 nodes (depth caps 1 and 2): the curve keeps the faster one; the best
    per batch is the table's best. speedup = tau x baseline / round, round = verify + draft."""
    from specsim.speculation.speedup import Candidates, SpeedupTable, speedup_curves

    cands = Candidates(nodes=np.array([0.0, 2.0, 2.0, 3.0]), depth=np.array([0.0, 1.0, 2.0, 3.0]),
                       tau=np.array([1.0, 1.5, 2.0, 2.2]), max_width=np.array([0.0, 2.0, 1.0, 1.0]),
                       shape=("chain", "tree", "chain", "chain"))
    table = SpeedupTable(batch=np.array([1.0, 64.0]), candidates=cands,
                         baseline_s=np.array([1.0, 1.0]),
                         verify_s=np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 2.0]]),
                         draft_s=np.zeros((2, 4)), round_overhead_s=0.0,
                         fits=np.array([True, False]), context=0.0)
    curves = speedup_curves(table)
    assert list(curves.nodes) == [0.0, 2.0, 3.0]
    # batch 1: speedups 1, 1.5, 2, 2.2 -> per N: 1, 2 (depth 2 beats depth 1), 2.2
    # batch 64: the 3-node chain's round takes 2 s -> 1.1
    assert curves.speedup.tolist() == [[1.0, 2.0, 2.2], [1.0, 2.0, 1.1]]
    assert curves.best_nodes.tolist() == [3.0, 2.0]
    assert curves.best_speedup.tolist() == [2.2, 2.0]
    assert curves.fits.tolist() == [True, False]


def test_serving_settings_are_what_the_engines_build(small_report: tuple[object, Path]) -> None:
    """The chat profile's ranks come from chain data, so recommend weighs chains only: every
    serving candidate is a chain within its depth limit (7 measured positions), and the speedup
    figure's best point per batch is the recommendation table's setting."""
    plan, _ = small_report
    part = plan.drafters[0]  # type: ignore[attr-defined]
    assert not part.uses_trees
    for table in part.tables:
        c = table.candidates
        assert set(c.shape) == {"chain"} and c.nodes.max() == 7
        assert np.array_equal(c.depth, c.nodes)
    curves = part.curves
    assert list(curves.batch) == [c.batch for c in part.recommendation.best]
    assert list(curves.nodes) == list(range(8))  # chains of 0..7 draft tokens
    for i, choice in enumerate(part.recommendation.best):
        speedup = curves.speedup[i]
        assert speedup.max() == pytest.approx(choice.speedup, rel=1e-12)
        assert curves.nodes[int(np.argmax(speedup))] == choice.nodes
        # one chain per N: each curve point is that chain's speedup in the table
        order = np.argsort(part.speedup.candidates.nodes)
        assert np.array_equal(speedup, part.speedup.speedup[i][order])
    # the any-shape bound is drawn (dashed) and never below the engine curves
    assert part.bound is not None and part.bound_curves is not None
    for i in range(part.bound.batch.size):
        assert part.bound_curves.speedup[i].max() == part.bound.speedup[i].max()
        assert part.bound_curves.speedup[i].max() >= curves.speedup[i].max() - 1e-12


@pytest.mark.parametrize(("hardware", "engine"), [
    ("h100-sxm", "sglang"), ("h100-sxm", "vllm"), ("transferred/h100-sxm", "sglang"),
    ("calibrated/a100-80g-sxm-vidur", "vllm"), ("h100-sxm", "roofline")])
def test_the_plan_shows_the_one_t_n_it_prices_with(hardware: str, engine: str) -> None:
    """Issue 24: the plan printed an 'expected real' T(n) and priced with another (datasheet
    plus engine terms). The report's T(n) is now the datasheet roofline, for reference, and
    the plain step the serving tables price at batch n (speedup_table's baseline, another
    path through the library), whatever the profile (datasheet, transferred, calibrated)."""
    from specsim.forward.cost import pass_cost
    from specsim.forward.shapes import batch_mix_passes
    from specsim.serving.curves import DATASHEET_LABEL, priced_label, tn_table
    from specsim.specs.engines import engine_or_none, load_engine
    from specsim.specs.hardware import Efficiency
    from specsim.speculation.speedup import Candidates, speedup_table

    hw, model = load_hardware(hardware), load_model("llama-3.1-8b")
    eng = engine_or_none(load_engine(engine))
    table = tn_table(model, hw, eng, tokens=(1, 64, 1024))
    assert list(table.seconds) == [DATASHEET_LABEL, priced_label(eng)]
    plain = Candidates(nodes=np.zeros(1), depth=np.zeros(1), tau=np.ones(1),
                       max_width=np.ones(1), shape=("chain",))
    setup = Setup(target=model, hardware=hw, context=0.0, draft_cost=0.0, engine=eng)
    priced = speedup_table(setup, [1, 64, 1024], plain).baseline_s
    assert table.seconds[priced_label(eng)] == pytest.approx(priced, rel=1e-9)
    ideal = dataclasses.replace(hw, efficiency=Efficiency())
    shape = batch_mix_passes(1.0, np.array([1.0, 64.0, 1024.0]), np.array([0.0]))
    assert table.seconds[DATASHEET_LABEL] == pytest.approx(pass_cost(model, ideal, shape).time_s,
                                                           rel=1e-12)
    # The seed's 8B on an H100: 16 GB / 3.35 TB/s ~ 4.5 ms at one token on the datasheet;
    # an engine only adds time to it, the roofline engine none.
    if hw.slug.endswith("h100-sxm"):
        assert table.seconds[DATASHEET_LABEL][0] == pytest.approx(4.48e-3, rel=0.01)
    if eng is None:
        assert table.seconds[priced_label(eng)] == pytest.approx(
            table.seconds[DATASHEET_LABEL], rel=1e-12)
    else:
        assert np.all(table.seconds[priced_label(eng)] > table.seconds[DATASHEET_LABEL])


def test_report_tn_table_and_formatting(small_report: tuple[object, Path]) -> None:
    from specsim.present.document import cell_text
    from specsim.specs.paths import builtin_dir

    _, out = small_report
    md = (out / "report.md").read_text()
    assert "| tokens n | datasheet roofline (ms) | priced by the plan (ms) |" in md
    assert "the one T(n) this plan prices every setting with" in md
    assert "calibrated_ms" not in md and "| 1,024 |" in md
    assert cell_text(1820) == "1,820" and cell_text(26866.9) == "26,867"
    assert cell_text(4.483) == "4.48"
    assert str(builtin_dir("hardware").parent) not in md  # no checkout path in the sources


def test_the_drafter_shown_alone_is_the_one_that_serves_a_user_fastest() -> None:
    # Given in alphabetical order (EAGLE before EAGLE-3), the plan puts first the drafter
    # whose best setting gives one user the most tokens/s: the memory and policy sections
    # show that one.
    from specsim.serving.capacity import fastest_setting

    plan = make_plan(hardware="h100-sxm", model="llama-3.1-8b", workload="chat",
                     engine="sglang", drafters=["eagle-llama-3.1-8b", "eagle3-llama-3.1-8b"],
                     tps=(1,))
    speeds = [fastest_setting({d.name: d.tables}) for d in plan.drafters[:2]]
    assert all(s is not None for s in speeds)
    assert speeds[0].tokens_per_s_per_user >= speeds[1].tokens_per_s_per_user  # type: ignore[union-attr]
    assert plan.policy_drafter == plan.drafters[0].name


def test_an_moe_plan_states_its_routing_assumption(tmp_path: Path) -> None:
    """A plan for an MoE target lists how experts are counted, with the locality exponent and
    its sources; a dense target's plan does not (see small_report)."""
    plan = make_plan(hardware="h200", model="gpt-oss-20b", drafters=["eagle3-gpt-oss-20b"],
                     engine="sglang", workload="chat", tps=(1,))
    write_report(plan, tmp_path, force=True)
    rows = {r["assumption"]: r for r in csv.DictReader((tmp_path / "assumptions.csv").open())}
    assert "q^0.78 independent tokens" in rows["MoE routing"]["value"]
    assert "nkipy PR #63" in rows["MoE routing"]["source"]


def test_a_dense_plan_has_no_routing_assumption(small_report: tuple[object, Path]) -> None:
    _, out = small_report
    rows = {r["assumption"] for r in csv.DictReader((out / "assumptions.csv").open())}
    assert "MoE routing" not in rows and "engine" in rows


def test_bad_drafter_is_refused_before_any_progress_line(tmp_path: Path) -> None:
    said: list[str] = []
    with pytest.raises(SpecError, match="no-such-drafter"):
        make_plan(hardware="h100-sxm", model="llama-3.1-8b", drafters=["no-such-drafter"],
                  engine="roofline", workload="chat", tps=(1,), progress=said.append)
    assert said == []  # the error is the only line the user sees


def test_a_drafter_for_another_model_is_refused_before_any_progress_line() -> None:
    """Qwen3-32B with Llama-3.1-8B's EAGLE-3 drafter: the plan would have printed a vLLM
    command serving Llama-3.1-8B; it is refused naming both models, as recommend refuses it."""
    said: list[str] = []
    with pytest.raises(SpecError, match=r"drafter eagle3-llama-3.1-8b \(made for llama-3.1-8b\) "
                                        r"does not fit target qwen3-32b: vocabulary"):
        make_plan(hardware="h100-sxm", model="qwen3-32b", drafters=["eagle3-llama-3.1-8b"],
                  engine="roofline", workload="chat", tps=(1,), progress=said.append)
    assert said == []


def test_tp_degrees_a_drafter_cannot_split_are_left_out_with_a_note() -> None:
    # llama-68m has 12 attention heads (its config.json): 4 divides 12, 8 does not.
    plan = make_plan(hardware="h100-sxm", model="llama-2-7b",
                     drafters=["llama-68m-for-llama-2-7b"], engine="roofline", workload="chat",
                     tps=(4, 8))
    drafted = next(d for d in plan.drafters if d.name == "llama-68m-for-llama-2-7b")
    assert [t.tp for t in drafted.tables] == [4]
    plain = next(d for d in plan.drafters if d.name == "none")
    assert [t.tp for t in plain.tables] == [4, 8]  # Llama-2-7B's 32 heads split over both
    assert any("TP 8 left out for llama-68m" in n and "12 attention heads" in n
               for n in plan.notes)


def test_throughput_gain_is_speculation_over_plain(small_report: tuple[object, Path]) -> None:
    """300 tokens/s per GPU with speculation over 200 plain: 1.5x; no gain without a plain
    setting or where the best setting does not speculate."""
    import dataclasses

    plan, _ = small_report
    best = dataclasses.replace(plan.best, throughput_per_gpu=300.0)  # type: ignore[attr-defined]
    plain = dataclasses.replace(plan.best_plain,  # type: ignore[attr-defined]
                                throughput_per_gpu=200.0)
    assert best.nodes > 0
    assert dataclasses.replace(plan, best=best, best_plain=plain  # type: ignore[type-var]
                               ).throughput_gain == 1.5
    assert dataclasses.replace(plan, best=best, best_plain=None  # type: ignore[type-var]
                               ).throughput_gain is None
    assert dataclasses.replace(plan, best=dataclasses.replace(best, nodes=0),  # type: ignore[type-var]
                               best_plain=plain).throughput_gain is None


def test_time_to_first_token_carries_the_prompts_prefill() -> None:
    """Qwen3-8B's weight GEMMs hold 36 x (4096 x 4096 x 2 + 4096 x 1024 x 2 + 3 x 4096 x
    12288) = 6.95e9 parameters: prefilling 8,000 tokens costs at least 2 x 6.95e9 x 8,000
    flops at 0.757 of the H100's 989.4 TFLOPS = 148 ms, attention and the rest on top. The
    long-context scenario's TTFT at its median prompt is at least its own prefill, and the
    chat scenario's p90 prompt waits longer than its median one."""
    from specsim.serving.capacity import prompt_prefill_s, serving_table, table_latency
    from specsim.speculation.setup import load_setup
    from specsim.speculation.speedup import Candidates

    setup, _ = load_setup(model="qwen3-8b", draft_cost=0.1, alpha=0.7)
    gemm_params = 36 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 12288)
    floor = 2 * gemm_params * 8000 / (989.4e12 * 0.757)
    assert floor == pytest.approx(0.1484, rel=1e-3)
    assert floor <= prompt_prefill_s(setup, 8000.0) <= 1.6 * floor
    plain = Candidates(nodes=np.array([0.0]), depth=np.array([0.0]), tau=np.array([1.0]),
                       max_width=np.array([1.0]), shape=("chain",))
    for workload in ("long-context", "chat"):
        scenario = load_scenario(workload)
        table = serving_table(setup, scenario, plain, batch=[1, 8])
        own = prompt_prefill_s(dataclasses.replace(setup, context=0.0), scenario.prompt.median)
        ttft, _ = table_latency(table, [0, 1], [0, 0])
        assert np.all(ttft[:, 0] >= own)
        assert np.all(ttft[:, 1] > ttft[:, 0]) and np.all(ttft[:, 2] > ttft[:, 1])


@pytest.mark.parametrize("drafter", ["eagle3-llama-3.1-8b", "eagle-llama-3.1-8b",
                                     "dflash-qwen3-8b", "eagle3-gpt-oss-120b"])
def test_the_goodput_policy_is_never_slower_than_plain_decoding(drafter: str) -> None:
    """With each built-in engine setup (SGLang), on the chat workload, the goodput controller
    measures plain decoding too and turns speculation off where it is faster: at every load it
    is within its measurement noise (2%) of plain decoding or above, and at batch 1 it finds
    a draft at least as good as a fixed chain of 2 (it used to climb down from 16 and stop at
    13, 1.19x against the chain's 1.68x)."""
    setup, profile = load_setup(drafter=drafter, workload="chat")
    sweep = simulate_policies(setup, profile, seed=0)
    rel = sweep.relative_to_none()
    goodput = rel[sweep.policies.index("goodput (TurboSpec)")]
    assert goodput.min() >= 0.98
    assert goodput[0] >= 0.98 * rel[sweep.policies.index("fixed chain 2")][0]


def test_a_plain_answer_prints_commands_with_their_batch_cap() -> None:
    """With no drafter the answer is plain decoding, and its commands say so: each engine's
    launch line for the target (its spec's Hub id) at the answer's TP, capped at the answer's
    batch."""
    plan = make_plan(hardware="h100-sxm", model="llama-3.1-8b", drafters=[],
                     engine="roofline", workload="chat", tps=(1,))
    s = plan.best_plain
    assert s is not None and s.nodes == 0
    argvs = {c.engine: c.argv for c in plan.answer_commands}
    assert argvs == {
        "vllm": ("vllm", "serve", "meta-llama/Llama-3.1-8B", "--max-num-seqs",
                 str(s.batch)),
        # beyond 8 requests SGLang captures decode graphs only as far as its GPU-memory default
        "sglang": ("python", "-m", "sglang.launch_server", "--model-path",
                   "meta-llama/Llama-3.1-8B", "--cuda-graph-max-bs-decode", str(s.batch),
                   "--max-running-requests", str(s.batch)),
        # TensorRT-LLM captures graphs up to 128 requests, unpadded, unless its extra-options
        # YAML says otherwise: the file captures them up to the batch
        "trtllm": ("trtllm-serve", "meta-llama/Llama-3.1-8B", "--extra_llm_api_options",
                   argvs["trtllm"][3], "--max_batch_size", str(s.batch))}
    (trtllm,) = [c for c in plan.answer_commands if c.engine == "trtllm"]
    assert yaml.safe_load(dict(trtllm.files)[argvs["trtllm"][3]]) == {
        "cuda_graph_config": {"enable_padding": True, "max_batch_size": s.batch}}


def test_slo_bounds_below_ten_ms_keep_their_digits() -> None:
    """A bound under 10 ms is printed to three significant digits: 4 us was 'at most 0 ms'."""
    import types

    from specsim.present.report_answer import slo_text
    from specsim.serving.capacity import Slo

    plan = types.SimpleNamespace(slo=Slo(min_tokens_per_s_per_user=250.0, max_ttft_p90_s=4e-6,
                                         max_itl_p99_s=0.25))
    text = slo_text(plan)  # type: ignore[arg-type]
    assert "(TPOT at most 4 ms," in text
    assert "TTFT p90 at most 0.004 ms" in text
    assert "chunks at most 250 ms" in text


def test_one_replica_is_singular() -> None:
    from specsim.present.report_answer import _replicas

    assert (_replicas(1), _replicas(2)) == ("1 replica", "2 replicas")


def test_the_answer_states_the_error_of_decode_rates_like_its_own(tmp_path: Path) -> None:
    """An MoE model on an AMD GPU: the answer quotes the published decode rates of MoE models
    on AMD GPUs, their median error in the direction of speed recomputed here by hand from
    validate's rows (a time per token inverted: measured / predicted - 1), and warns that the
    GPU count may be low when specsim runs faster than they were measured."""
    from specsim.measurement.published import load_published
    from specsim.measurement.validate import validate
    from specsim.present.report_answer import answer_text

    plan = make_plan(hardware="mi300x", model="gpt-oss-20b", drafters=[], engine="vllm",
                     workload="chat", tps=(1,))
    assert plan.rate_error is not None and plan.rate_error.group == "rates=AMD, MoE"
    by_hand = []
    for v in validate(load_published()):
        if v.predicted is None or v.measured is None or v.metric not in (
                "tokens_per_s", "plain_tokens_per_s", "plain_tpot_ms", "spec_tpot_ms"):
            continue
        if load_hardware(v.row.hardware).vendor != "AMD" or load_model(v.row.model).moe is None:
            continue
        by_hand.append(v.measured / v.predicted - 1.0 if v.metric.endswith("tpot_ms")
                       else v.predicted / v.measured - 1.0)
    assert plan.rate_error.rows == len(by_hand) > 0
    assert plan.rate_error.median_signed_error == pytest.approx(float(np.median(by_hand)))
    signed = 100 * plan.rate_error.median_signed_error
    assert signed > 10  # published: DeepSeek and gpt-oss on MI300X run far slower
    assert (f"Published decode rates of MoE models on AMD GPUs ({len(by_hand)} rows of "
            f"specsim validate) come out {signed:.0f}% faster than measured in median: the "
            "GPU count above may be that much too low.") in answer_text(plan)
    write_report(plan, tmp_path, force=True)
    groups = [r["published decode rates"]
              for r in csv.DictReader((tmp_path / "validate-rates.csv").open())]
    assert groups == ["AMD, MoE", "AMD, dense", "NVIDIA, MoE", "NVIDIA, dense"]


def test_the_why_sentence_parts_add_up_to_its_round() -> None:
    """At Kimi-K2's batch of 625 on GB200s the SGLang round's host work is a quarter of it or
    more, so the answer splits the round: the arriving prompts' prefill, the GPU's verification
    and drafting, and the host work the engine overlaps with them. With the overlap a round is
    the longer of the GPU's part (prefill, verification, drafting) and the host's, so the
    printed numbers (0.1 ms apart) add up that way."""
    plan = make_plan(hardware="gb200", model="kimi-k2", drafters=None, engine="sglang",
                     workload="chat", users=5000)
    found = re.search(r"of its ([\d,.]+) ms \(([\d,.]+) ms of it the arriving prompts' "
                      r"prefill\), the GPU's verification and drafting take ([\d,.]+) ms and "
                      r"the engine's host work per speculative round \(engines/sglang.yaml\) "
                      r"([\d,.]+) ms, done while the GPU runs", plan.why)
    assert found, plan.why
    total, prefill, gpu, host = (float(g.replace(",", "")) for g in found.groups())
    assert total == pytest.approx(max(prefill + gpu, host), abs=0.15)
    assert host > 0.25 * total


def test_a_plan_serves_the_weights_and_cache_it_was_given() -> None:
    """--kv-dtype fp8 halves each request's cache: Qwen3-8B holds 36 layers x 8 KV heads x
    128 x (K, V) per token, at 2,048 tokens 301,989,888 bytes in bf16 plus EAGLE-3's one
    layer (8,388,608), so 0.3104 GB a request, 0.1552 GB in fp8, and twice the requests fit.
    The answer says which cache it is for, and its commands start it (vLLM's flag)."""
    from specsim.present.report_answer import answer_text
    from specsim.serving.plan import memory_by_context
    from specsim.specs.dtypes import Precision

    plans = {kv: make_plan(hardware="h100-sxm", model="qwen3-8b", drafters=["eagle3-qwen3-8b"],
                           engine="vllm", workload="chat", tps=(1,),
                           precision=Precision(kv_dtype=kv)) for kv in ("bf16", "fp8")}
    per_request = (36 * 8 * 128 * 2 * 2048 + 1 * 8 * 128 * 2 * 2048) * 2 / 1e9
    (bf16,), (fp8,) = (memory_by_context(plans[kv], (2048.0,)) for kv in ("bf16", "fp8"))
    assert bf16["cache_per_request_gb"] == pytest.approx(per_request, rel=1e-9)
    assert fp8["cache_per_request_gb"] == pytest.approx(per_request / 2, rel=1e-9)
    assert fp8["max_concurrency"] >= 2 * bf16["max_concurrency"] - 1
    assert answer_text(plans["fp8"]).startswith("Serve Qwen3-8B (an fp8 KV cache) on ")
    assert answer_text(plans["bf16"]).startswith("Serve Qwen3-8B on ")
    vllm = [c for c in plans["fp8"].answer_commands if c.engine == "vllm"]
    assert vllm and all(("--kv-cache-dtype", "fp8") == c.argv[3:5] for c in vllm)


def test_a_plain_answer_does_not_say_speculation_pays() -> None:
    """Where the plan serves without speculation although the fastest draft gives each user a
    little more (Qwen3-8B with an FP8 cache on vLLM at batch 500: EAGLE-3's chain of 1 at
    1.01x, the same GPU count), the answer's reason says the gain is too little; it said
    'Why speculation pays here' under an answer of no speculation."""
    from specsim.present.report_answer import answer_text
    from specsim.specs.dtypes import Precision

    plan = make_plan(hardware="h100-sxm", model="qwen3-8b", drafters=["eagle3-qwen3-8b"],
                     engine="vllm", workload="chat", tps=(1,),
                     precision=Precision(kv_dtype="fp8"))
    text = answer_text(plan)
    assert plan.best_plain is not None and "with no speculation" in text
    gain = re.search(r"yields τ = [0-9.]+ tokens: ([0-9.]+)x plain decoding per user", text)
    assert gain is not None and float(gain.group(1)) > 1.0
    assert "Why speculation gains too little here" in text


def test_a_cache_no_engine_stores_is_planned_but_not_given_commands() -> None:
    """An int8 cache is timed and sized (specsim's model), but no engine stores one (vLLM's,
    SGLang's and TensorRT-LLM's recorded choices): the answer says no engine serves it, and
    no command is offered that would start a 16-bit cache."""
    from specsim.present.report_answer import answer_text
    from specsim.specs.dtypes import Precision

    plan = make_plan(hardware="h100-sxm", model="qwen3-8b", drafters=["eagle3-qwen3-8b"],
                     engine="sglang", workload="chat", tps=(1,),
                     precision=Precision(kv_dtype="int8"))
    assert plan.answer_commands == () and plan.best_engines == ()
    assert "(no engine serves an int8 KV cache: specsim's model only; see the commands)" \
        in answer_text(plan)

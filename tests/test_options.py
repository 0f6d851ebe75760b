"""Options with one meaning on every command, and the library calls behind them.

Expectations are derived by hand in each test (Llama 3.1 8B's config.json: 32 layers, 8 KV
heads of 128 dims, hidden 4096, MLP 14336, vocabulary 128256; the H100 SXM: 80 GB), or by an
independent computation (brute force over a table, linearity of the KV reads in the context).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.cost import roofline
from specsim.forward.memory import serving_memory
from specsim.measurement.tables import measured_hardware
from specsim.measurement.vidur import device_of_hardware, vidur_target
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.defaults import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_DRAFTER,
    DEFAULT_ENGINE,
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
)
from specsim.specs.dtypes import Precision
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from specsim.speculation.setup import load_setup
from specsim.speculation.speedup import (
    Setup,
    best_per_nodes,
    chain_candidates,
    speedup_sweep,
    speedup_table,
)
from tests.test_cli import ok, run

# Llama 3.1 8B on one H100 SXM at 32,768 tokens per request, hand-derived:
# cache per token = 32 layers x 2 (K, V) x 8 heads x 128 dims x 2 bytes (bf16) = 131,072 B,
# so 4,294,967,296 B per request in bf16 and half that, 2,147,483,648 B, in fp8.
# weights: 8,030,261,248 parameters (Meta's model card: 8.03B) x 2 B = 16,060,522,496 B.
# workspace of an 8,192-token pass: 8,192 x (4 x 4,096 + 2 x 14,336) x 2 B = 738,197,504 B
# plus fp32 logits of 256 rows: 256 x 128,256 x 4 B = 131,334,144 B; 869,531,648 B in all.
# free = 0.9 x 80e9 - 16,060,522,496 - 869,531,648 = 55,069,945,856 B
# max requests: bf16 floor(55,069,945,856 / 4,294,967,296) = floor(12.82) = 12;
#               fp8  floor(55,069,945,856 / 2,147,483,648) = floor(25.64) = 25.
# fp8 weights too: free = 72e9 - 8,030,261,248 - 869,531,648 = 63,100,207,104 B,
#               bf16 cache: floor(14.69) = 14.
CONTEXT = 32768.0


def _plan(**precision: str) -> object:
    return serving_memory(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), [1.0],
                          CONTEXT, precision=Precision(**precision))


def test_fp8_kv_cache_halves_the_cache_and_doubles_what_fits() -> None:
    bf16, fp8 = _plan(), _plan(kv_dtype="fp8")
    assert bf16.per_request_bytes == 4_294_967_296  # type: ignore[attr-defined]
    assert fp8.per_request_bytes == 2_147_483_648  # type: ignore[attr-defined]
    assert bf16.max_requests == 12  # type: ignore[attr-defined]
    assert fp8.max_requests == 25  # type: ignore[attr-defined]


def test_fp8_weights_free_memory_for_the_cache() -> None:
    plan = _plan(weight_dtype="fp8")
    assert plan.weights_bytes == 8_030_261_248  # type: ignore[attr-defined]
    assert plan.max_requests == 14  # type: ignore[attr-defined]


def test_memory_command_takes_the_kv_dtype() -> None:
    """25 requests fit with an fp8 cache (see above), 26 do not; in bf16 neither does."""
    def fits(*dtype: str) -> list[bool]:
        rows = json.loads(ok("memory", "--model", "llama-3.1-8b", "--context", "32768",
                             "--requests", "25,26", *dtype, "--json"))["rows"]
        return [r["fits"] for r in rows]

    assert fits("--kv-dtype", "fp8") == [True, False]
    assert fits() == [False, False]


def test_speedup_fits_sees_the_kv_dtype() -> None:
    """The fits-in-memory check of a speedup table uses the same precision as the pass time."""
    profile = AcceptanceProfile(position_alphas=(0.8,), source="test")
    chains = chain_candidates(profile, 2)

    def fits(kv_dtype: str) -> list[bool]:
        setup = Setup(target=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"),
                      context=CONTEXT, draft_cost=0.05, precision=Precision(kv_dtype=kv_dtype))
        return speedup_table(setup, [25, 26], chains).fits.tolist()

    assert fits("fp8") == [True, False]
    assert fits("bf16") == [False, False]


def test_a_context_mix_reads_the_mean_cache() -> None:
    """KV reads grow linearly with the context (full attention): requests spread evenly over
    0 and 2L tokens read what requests all at L read, and write the same."""
    model, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    mix = roofline(model, hw, [8, 64], context=(0.0, 8192.0))
    mean = roofline(model, hw, [8, 64], context=4096.0)
    np.testing.assert_allclose(mix.total("kv_read_bytes"), mean.total("kv_read_bytes"))
    assert mix.total("kv_read_bytes")[0] > 0
    rows = json.loads(ok("memory", "--context", "0,8192", "--requests", "4", "--json"))["rows"]
    same = json.loads(ok("memory", "--context", "4096", "--requests", "4", "--json"))["rows"]
    assert rows[0]["target_kv_GB_per_gpu"] == pytest.approx(same[0]["target_kv_GB_per_gpu"],
                                                           rel=1e-12)


def test_roofline_context_mix_on_the_command_line() -> None:
    rows = json.loads(ok("roofline", "--tokens", "64", "--context", "0,8192", "--by-op",
                         "--json"))["rows"]
    same = json.loads(ok("roofline", "--tokens", "64", "--context", "4096", "--by-op",
                         "--json"))["rows"]
    kv = [sum(r["kv_read_bytes"] for r in x) for x in (rows, same)]
    assert kv[0] == pytest.approx(kv[1], rel=1e-12) and kv[0] > 0


def test_acceptance_precedence() -> None:
    """alpha, else the workload's, else the drafter's published acceptance; else an error."""
    _, alpha = load_setup(drafter="dflash-qwen3-8b", alpha=0.5)
    assert alpha.position_alphas == (0.5,)
    setup, workload = load_setup(drafter="dflash-qwen3-8b", workload="chat-dflash-qwen3-8b")
    assert "chat-dflash-qwen3-8b" in workload.source and setup.context == 2048.0
    setup, published = load_setup(drafter="dflash-qwen3-8b", context=(1024.0, 32768.0))
    assert "dflash-qwen3-8b.yaml" in published.source
    assert setup.context == (1024.0, 32768.0) and setup.target.slug == "qwen3-8b"
    with pytest.raises(SpecError, match="no acceptance"):
        load_setup(model="llama-3.1-8b")  # no drafter, no alpha, no workload
    with pytest.raises(SpecError, match="^alpha: give a constant alpha or a workload, not") \
            as both:
        load_setup(alpha=0.5, workload="chat-dflash-qwen3-8b")
    assert both.value.parameter == "alpha"
    # nothing given: the one default setup (the default drafter on its target)
    setup, _ = load_setup(alpha=0.5)
    assert (setup.target.slug, setup.hardware.slug) == (DEFAULT_MODEL, DEFAULT_HARDWARE)
    assert setup.drafter is not None and setup.drafter.slug == DEFAULT_DRAFTER
    setup, _ = load_setup(model="llama-3.1-8b", alpha=0.5, draft_cost=0.1)
    assert setup.drafter is None  # no drafter is guessed for another model


def test_best_per_nodes_is_the_best_depth_cap() -> None:
    """Brute force over the table: for each (batch, N), the largest speedup among the
    candidates of N nodes (an autoregressive drafter's trees come in several depth caps)."""
    setup, profile = load_setup(drafter="eagle3-llama-3.1-8b", alpha=0.7)
    table = speedup_sweep(setup, profile, [1, 32], [0, 4, 16], shape="tree")
    points = best_per_nodes(table, [16, 0, 4, 999])
    assert [(p.batch, p.nodes) for p in points] == [(1, 0), (1, 4), (1, 16),
                                                    (32, 0), (32, 4), (32, 16)]
    c = table.candidates
    for p, i in zip(points, [0, 0, 0, 1, 1, 1], strict=True):
        best = max(float(table.speedup[i, k]) for k in range(c.nodes.size) if c.nodes[k] == p.nodes)
        assert p.speedup == best
    assert len({int(d) for d in c.depth[c.nodes == 16]}) > 1  # there was a choice to make


@pytest.mark.parametrize("command", [
    ["speedup", "--alpha", "0.5", "--draft-cost", "0.1"], ["recommend"]])
def test_shape_fails_with_one_message(command: list[str]) -> None:
    result = run(*command, "--shape", "ring")
    assert result.returncode == 2
    assert "option --shape: shape 'ring' is not one of auto, chain, tree" in result.stderr


def _vidur_folder(root: Path, *devices: str) -> Path:
    for device in devices:
        (root / "compute" / device).mkdir(parents=True)
    return root


def test_vidur_device_follows_the_data_or_the_hardware(tmp_path: Path) -> None:
    one = _vidur_folder(tmp_path / "one", "a40")
    assert vidur_target(one, hardware=None, device=None) == ("a40", "a40")
    both = _vidur_folder(tmp_path / "both", "a100", "a40")
    with pytest.raises(SpecError, match="holds devices a100, a40"):
        vidur_target(both, hardware=None, device=None)
    assert vidur_target(both, hardware="a100-80g-sxm", device=None) == ("a100-80g-sxm", "a100")
    assert vidur_target(both, hardware=None, device="a100") == ("a100-80g-sxm", "a100")
    assert device_of_hardware("calibrated/a100-80g-sxm-vidur") == "a100"
    # Vidur's h100 folder is the SXM part (its device config: 1,000 dense fp16 TFLOP/s)
    h100 = _vidur_folder(tmp_path / "h100", "h100")
    assert vidur_target(h100, hardware=None, device=None) == ("h100-sxm", "h100")
    assert device_of_hardware("h100-sxm") == "h100"
    with pytest.raises(SpecError, match="pass --device"):
        device_of_hardware("mi300x")
    # the specsim format: the hardware everyone defaults to
    assert measured_hardware(tmp_path / "p.csv", "specsim", hardware=None, device=None) \
        == (DEFAULT_HARDWARE, "")


def test_json_on_import_and_acceptance_fit(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
        "vocab_size": 128256}))
    made = json.loads(ok("models", "import", str(config), "--name", "mine", "--out",
                         str(tmp_path / "mine.yaml"), "--json"))
    assert made["params_B"] == pytest.approx(8.03, abs=0.005)
    metrics = tmp_path / "metrics.txt"
    metrics.write_text('vllm:spec_decode_num_drafts_total{engine="0"} 100\n'
                       'vllm:spec_decode_num_draft_tokens_total{engine="0"} 200\n'
                       'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 120\n'
                       'vllm:spec_decode_num_accepted_tokens_per_pos_total'
                       '{engine="0",position="0"} 80\n'
                       'vllm:spec_decode_num_accepted_tokens_per_pos_total'
                       '{engine="0",position="1"} 40\n')
    fit = json.loads(ok("acceptance", "fit", str(metrics), "--out", str(tmp_path / "w.yaml"),
                        "--json"))
    # alpha_1 = 80 / 100, alpha_2 = 40 / 80; tokens per round = 1 + 120 / 100
    assert [r["alpha"] for r in fit["rows"]] == pytest.approx([0.8, 0.5])
    assert fit["tokens_per_round"] == pytest.approx(2.2)
    mixed = run("acceptance", "fit", str(metrics), "--out", str(tmp_path / "x.yaml"),
                "--context", "1024,32768")
    assert mixed.returncode == 2 and "one context length" in mixed.stderr



# ------------------------------------------------ one default setup, one meaning per option


@pytest.mark.parametrize("command", ["speedup", "recommend", "roofline", "memory"])
def test_every_command_runs_with_no_options_on_the_one_default_setup(command: str) -> None:
    """`specsim X` alone runs, and every command's setup line names the same GPU, model and
    context (and, where a command times rounds, the same engine and drafter)."""
    setup = ok(command).splitlines()[0]
    assert setup.startswith(f"setup: {DEFAULT_MODEL} on {DEFAULT_HARDWARE}")
    assert f"context {DEFAULT_CONTEXT_TOKENS:,.0f} tokens" in setup
    if command != "memory":
        assert f"engine {DEFAULT_ENGINE}" in setup
    if command in ("speedup", "recommend"):
        assert f"drafter {DEFAULT_DRAFTER}" in setup


def test_plan_runs_with_no_options(tmp_path: Path) -> None:
    """`specsim plan` alone writes its report into ./specsim-report."""
    result = run("plan", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = (tmp_path / "specsim-report" / "report.md").read_text()
    assert DEFAULT_MODEL in report.lower() or "qwen3" in report.lower()


@pytest.mark.parametrize("command", ["hardware list", "models list", "drafters list",
                                     "engines list", "workloads list", "acceptance objectives",
                                     "acceptance weights", "validate"])
def test_listing_and_analysis_commands_run_with_no_options(command: str) -> None:
    ok(*command.split())


def test_profile_with_no_options_profiles_the_default_model_into_a_default_file(
        tmp_path: Path) -> None:
    """`specsim profile` alone times the default model into ./specsim-profile.csv (a full grid
    takes minutes on a GPU, hours on a CPU: here it stops at the existing file, before timing)."""
    (tmp_path / "specsim-profile.csv").write_text("keep")
    refused = run("profile", cwd=tmp_path)
    assert refused.returncode == 2 and "specsim-profile.csv: exists" in refused.stderr
    assert (tmp_path / "specsim-profile.csv").read_text() == "keep"
    assert _defaults("--model")["profile"] == DEFAULT_MODEL


def test_speedup_alone_is_the_default_drafter_not_an_error() -> None:
    """No drafter given: the default drafter on its target, the same table as naming it."""
    assert ok("speedup", "--batch", "1", "--nodes", "4") == \
        ok("speedup", "--drafter", DEFAULT_DRAFTER, "--batch", "1", "--nodes", "4")


def _defaults(option: str) -> dict[str, object]:
    """Each command's default of `option` (by its long name), from the CLI's own parser."""
    import typer

    from specsim.cli import app

    found: dict[str, object] = {}

    def walk(command: object, path: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())
        for param in getattr(command, "params", []):
            if option in getattr(param, "opts", ()):
                found[path] = param.default
    walk(typer.main.get_command(app), "")
    return found


@pytest.mark.parametrize(("option", "default"), [
    ("--engine", DEFAULT_ENGINE), ("--context", None), ("--tp", 1), ("--ep", 1),
    ("--kv-dtype", "bf16"), ("--weight-dtype", ""), ("--json", False)])
def test_an_option_has_one_default_on_every_command(option: str, default: object) -> None:
    """--context None means everywhere: a --workload's context, else the default 2,048. plan's
    --tp and --ep are the exceptions: None there means the plan chooses the layout (TP 1, 2,
    4 or 8, and across nodes for a model no node holds; experts spread or split by TP)."""
    found = _defaults(option)
    if option in ("--tp", "--ep"):
        assert found.pop("plan") is None
    assert len(found) >= 2, found
    assert set(found.values()) == {default}, found


def test_hardware_and_model_default_to_the_one_setup() -> None:
    hardware = _defaults("--hardware")
    # calibrate: None means DEFAULT_HARDWARE, or a Vidur folder's own device
    assert {v for k, v in hardware.items() if k != "calibrate"} == {DEFAULT_HARDWARE}
    models = _defaults("--model")
    # speedup, recommend, memory: None = the drafter's target, else DEFAULT_MODEL (memory
    # priced a drafter on DEFAULT_MODEL whatever it was made for); calibrate, profile: the
    # profile's model (a check, or what to time)
    assert {models[c] for c in ("roofline", "plan")} == {DEFAULT_MODEL}
    assert models["speedup"] is None and models["recommend"] is None
    assert models["memory"] is None


# ------------------------------------------- validation in the library, named by parameter


def test_library_errors_name_the_parameter_and_the_cli_the_option() -> None:
    from specsim.speculation.recommend import recommend

    setup, profile = load_setup()
    with pytest.raises(SpecError) as err:
        recommend(setup, profile, [1], max_nodes=0)
    assert str(err.value) == "max_nodes: must be in 1..4,096, got 0"
    assert err.value.parameter == "max_nodes"
    refused = run("recommend", "--max-nodes", "0")
    assert refused.returncode == 2
    assert refused.stderr.strip() == \
        "specsim: error: option --max-nodes: must be in 1..4,096, got 0"
    with pytest.raises(SpecError, match=r"^tp: must be in 1\.\.64, got 0$"):
        load_setup(tp=0)
    assert "option --tp: must be in 1..64, got 0" in run("speedup", "--tp", "0").stderr


@pytest.mark.parametrize("command", [["recommend"], ["plan", "--out", "unused"]])
def test_the_same_option_has_the_same_bounds_on_every_command(command: list[str]) -> None:
    refused = run(*command, "--min-tokens-per-s-per-user", "-1")
    assert refused.returncode == 2
    assert "option --min-tokens-per-s-per-user: must be in [0, 1e+06], got -1" in refused.stderr


def test_a_zero_per_user_floor_is_accepted_by_recommend_and_plan() -> None:
    """0 tokens/s per user is "no floor" on both commands (plan refused it before)."""
    from specsim.serving.plan import make_plan

    ok("recommend", "--min-tokens-per-s-per-user", "0", "--batch", "1")
    with pytest.raises(SpecError, match="^target_tokens_per_s: must be in"):
        make_plan(hardware=DEFAULT_HARDWARE, model=DEFAULT_MODEL, drafters=None,
                  engine=DEFAULT_ENGINE, workload="chat", min_tokens_per_s_per_user=0.0,
                  target_tokens_per_s=0.0)  # the floor passes; the throughput is refused


def test_flags_named_in_library_messages_become_options() -> None:
    """The library says "pass accept_worse=True"; the command line says "--accept-worse"."""
    from specsim.cli.common import option_text
    from specsim.measurement.device_match import WorseThanDatasheet

    err = WorseThanDatasheet("holdout MAPE 30% calibrated vs 20% datasheet", calibration=None)
    assert str(err).endswith("pass accept_worse=True to keep it")
    assert option_text(str(err), err.parameter).endswith("pass --accept-worse to keep it")
    assert option_text("fmt: must be one of specsim, vidur", "fmt") == \
        "option --format: must be one of specsim, vidur"
    assert option_text("a fmt: b", "fmt") == "a fmt: b"  # only a leading parameter


def test_version() -> None:
    from importlib import metadata

    assert ok("--version").strip() == f"specsim {metadata.version('specsim')}"


# ------------------------------------------------------ one loader, one type for workloads


def test_one_workload_loader_for_scenarios_and_fitted_files(tmp_path: Path) -> None:
    """A scenario name and a workload YAML load through the same function into the same
    type; a file without lengths gets its context as the prompt and 512 output tokens."""
    from specsim.serving.scenarios import Scenario, load_scenario
    from specsim.specs.outputs import write_yaml
    from specsim.specs.workloads import Workload, load_workload, workload_to_yaml

    assert Scenario is Workload and load_scenario is load_workload
    chat = load_workload("chat")
    assert chat.lengths_given and chat.prompt.median > 0
    path = tmp_path / "fitted.yaml"
    write_yaml(path, workload_to_yaml("fitted", AcceptanceProfile(position_alphas=(0.8, 0.5),
                                                                  source="hand"),
                                      context=1000.0, counts_source="hand"), force=False)
    fitted = load_workload(str(path))
    assert not fitted.lengths_given
    assert (fitted.context, fitted.prompt.median, fitted.output.median) == (1000.0, 1000.0,
                                                                           512.0)
    assert fitted.acceptance.position_alphas == (0.8, 0.5)
    # --workload means the same for speedup and plan: both take the scenario and the file
    assert ok("speedup", "--workload", "chat", "--batch", "1", "--nodes", "4")
    assert ok("speedup", "--workload", str(path), "--batch", "1", "--nodes", "4")

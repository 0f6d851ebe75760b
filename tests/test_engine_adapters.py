"""Engine adapters: adding an engine is one adapter and one YAML, and the adapters' rules refuse
what vLLM 0.33.0 and SGLang 0.5.23 refuse (engines/*.yaml `speculative:`).

ToyServe is a made-up chain-only engine, written the way a new engine is added: one module-level
`EngineAdapter` (here in this file) and one YAML (tests/fixtures/engines/toyserve.yaml). Nothing
else in specsim names it, yet recommend's table, its printed commands and the plan's settings
pick it up.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from specsim.cli import app
from specsim.engines import EngineAdapter, EngineCommand, adapter, register, unregister
from specsim.engines.base import target_id, tp_args
from specsim.errors import SpecError
from specsim.serving.plan import make_plan, setting_commands, setting_engines
from specsim.specs.acceptance import constant_profile
from specsim.specs.drafters import load_drafter
from specsim.specs.hardware import load_hardware
from specsim.speculation.recommend import Recommendation, engine_commands, recommend
from specsim.speculation.speedup import Setup

FIXTURES = Path(__file__).parent / "fixtures" / "engines"


def _toy_problems(engine: EngineAdapter, setting: Mapping[str, Any], _: str) -> list[str]:
    methods = engine.args.rules["methods"]
    spec = methods.get(setting.get("method"))
    if spec is None:
        return [f"method {setting.get('method')!r} is not one of {sorted(methods)}"]
    k = setting.get("k")
    if isinstance(k, int) and 1 <= k <= spec["max_k"]:
        return []
    return [f"k {k!r} not in 1..{spec['max_k']}"]


def _toy_commands(engine: EngineAdapter, rec: Recommendation, setup: Setup) -> list[EngineCommand]:
    method = engine.method(setup.drafter)
    if setup.drafter is None or method is None:
        return [engine.unable(setup.drafter)]
    by_k: dict[int, list[int]] = {}
    for c in engine.rows(rec) or []:
        if c.fits and c.nodes:
            k = min(c.nodes, engine.args.rules["methods"][method]["max_k"])
            by_k.setdefault(k, []).append(c.batch)
    commands = []
    for k, batches in by_k.items():
        assert engine.problems({"method": method, "k": k}) == []
        argv = (*engine.args.launch_argv(target_id(setup)), *tp_args(engine.args.tp_flag, setup.tp),
                "--draft", method, "--draft-k", str(k), "--draft-model", setup.drafter.checkpoint)
        commands.append(EngineCommand(engine=engine.slug, version=engine.version, argv=argv,
                                      batches=tuple(batches)))
    return commands or [engine.refuse("speculation does not pay at any batch size that fits")]


def _toy_cells(engine: EngineAdapter, rec: Recommendation, drafter: Any) -> list[object]:
    runs = engine.method(drafter) is not None
    return [c.nodes if runs and c.fits else None for c in rec.best]


# The new engine: one module-level adapter (registered by the fixture, so other tests never
# see it) and its YAML.
TOY = EngineAdapter(slug="toyserve", name="ToyServe", builds="chains", batch_flag="--max-batch",
                    per_batch_schedule=False, column="toy_k", table_cells=_toy_cells,
                    find_problems=_toy_problems, build_commands=_toy_commands,
                    spec_path=FIXTURES / "toyserve.yaml")


@pytest.fixture
def toy() -> Iterator[EngineAdapter]:
    register(TOY)
    yield TOY
    unregister(TOY.slug)


def _setup(slug: str) -> Setup:
    drafter = load_drafter(slug)
    return Setup(target=drafter.target, hardware=load_hardware("h100-sxm"), drafter=drafter,
                 context=1024)


def test_recommend_emits_the_new_engines_command(toy: EngineAdapter) -> None:
    setup = _setup("eagle3-llama-3.1-8b")
    rec = recommend(setup, constant_profile(0.8), [1, 8, 64], max_nodes=32)
    toys = [c for c in engine_commands(rec, setup) if c.engine == "toyserve"]
    assert [c.engine for c in engine_commands(rec, setup)][:2] == ["vllm", "sglang"]
    # one command per draft length of the chains recommended for batch 1..64 (what a chain
    # engine runs), capped at the YAML's max_k of 8
    assert [c.batch for c in rec.schedule_chain] == list(range(1, 65))
    ks = {min(c.nodes, 8) for c in rec.schedule_chain if c.fits and c.nodes}
    assert ks and {int(c.argv[c.argv.index("--draft-k") + 1]) for c in toys} == ks
    for c in toys:
        assert c.argv[:3] == ("toyserve", "run", "meta-llama/Llama-3.1-8B-Instruct")
        assert c.argv[3:5] == ("--draft", "eagle-3")  # the YAML's name for the eagle3 family
        assert c.argv[-3] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
        # capped at the largest batch the command was computed for (its batch_flag)
        assert c.argv[-2:] == ("--max-batch", str(max(c.batches)))
        assert c.command == " ".join(c.argv)  # nothing here needs quoting
    assert toy.label == "ToyServe 1.0"


def test_a_family_the_new_engine_does_not_declare_gets_a_reason(toy: EngineAdapter) -> None:
    setup = _setup("dflash-qwen3-8b")
    rec = recommend(setup, constant_profile(0.8), [1, 8], max_nodes=16)
    (c,) = [c for c in engine_commands(rec, setup) if c.engine == "toyserve"]
    assert c.argv == () and c.reason == "ToyServe 1.0 cannot run the dflash family"


def test_the_recommend_cli_prints_the_new_engines_column_and_command(toy: EngineAdapter) -> None:
    result = CliRunner().invoke(app, ["recommend", "--drafter", "eagle3-llama-3.1-8b",
                                      "--alpha", "0.8", "--batch", "1,8"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if line.startswith("batch"))
    assert header.split()[-4:] == ["vllm_k", "sglang", "trtllm_k", "toy_k"]
    assert "ToyServe 1.0 (batch " in result.output
    assert "toyserve run meta-llama/Llama-3.1-8B-Instruct --draft eagle-3" in result.output


def test_the_plan_runs_its_setting_on_the_new_engine(toy: EngineAdapter) -> None:
    plan = make_plan(hardware="h100-sxm", model="llama-3.1-8b",
                     drafters=["eagle3-llama-3.1-8b"], engine="vllm", workload="chat",
                     tps=(1,))
    s = plan.best
    assert s is not None and s.shape == "chain" and s.nodes > 0
    assert setting_engines(plan, s) == ["vLLM", "SGLang", "TensorRT-LLM", "ToyServe"]
    (c,) = [c for c in setting_commands(plan, s) if c.engine == "toyserve"]
    assert c.argv[-4:] == ("--draft-model", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                           "--max-batch", str(s.batch))
    assert c.argv[c.argv.index("--draft-k") + 1] == str(min(s.nodes, 8))


def test_an_unknown_engine_or_family_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="engine 'nope' has no command adapter; known: vllm, "
                                        "sglang, trtllm"):
        adapter("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text((FIXTURES / "toyserve.yaml").read_text().replace("small_llm", "small_lm"))
    engine = EngineAdapter(slug="bad", name="Bad", builds="chains", batch_flag="--b",
                           per_batch_schedule=False, column="bad", table_cells=_toy_cells,
                           find_problems=_toy_problems, build_commands=_toy_commands,
                           spec_path=bad)
    with pytest.raises(SpecError, match=r"bad.yaml: field 'speculative.families' names "
                                        r"\['small_lm'\], not drafter families"):
        engine.method(load_drafter("eagle3-llama-3.1-8b"))
    with pytest.raises(SpecError, match="builds 'graphs'"):
        EngineAdapter(slug="x", name="X", builds="graphs",  # type: ignore[arg-type]
                      batch_flag="--b", per_batch_schedule=False, column="x",
                      table_cells=_toy_cells, find_problems=_toy_problems,
                      build_commands=_toy_commands)


def test_registering_a_second_adapter_under_a_taken_name_is_refused() -> None:
    clash = EngineAdapter(slug="vllm", name="vLLM", builds="chains", batch_flag="--b",
                          per_batch_schedule=True, column="x", table_cells=_toy_cells,
                          find_problems=_toy_problems, build_commands=_toy_commands)
    with pytest.raises(SpecError, match="'vllm' is registered twice"):
        register(clash)


# vLLM 0.33.0's SpeculativeConfig, as recorded in engines/vllm.yaml: each refused config
# (and the phrase that says why), by hand from the recorded rules.
VLLM_REFUSED = [
    ({"method": "eagle3", "num_speculative_tokens": 4}, "needs 'model'"),
    ({"method": "medusa", "model": "m", "num_speculative_tokens": 4}, "method 'medusa' is not"),
    ({"method": "eagle", "model": "m", "num_speculative_tokens": 0}, "must be an int >= 1"),
    ({"method": "eagle", "model": "m", "num_speculative_tokens": 3, "tree": "x"},
     "key 'tree' is not a SpeculativeConfig field"),
    ({"method": "eagle", "model": "m", "num_speculative_tokens": 3,
      "num_speculative_tokens_per_batch_size": [[2, 8, 3]]}, "leaves a gap"),
    ({"method": "eagle", "model": "m", "num_speculative_tokens": 3,
      "num_speculative_tokens_per_batch_size": [[1, 8, 3], [8, 16, 2]]}, "overlaps"),
    ({"method": "eagle", "model": "m", "num_speculative_tokens": 3,
      "num_speculative_tokens_per_batch_size": [[1, 8, 4]]}, "0 <= k <= num_speculative_tokens"),
    ({"method": "eagle", "model": "m", "num_speculative_tokens": 3,
      "num_speculative_tokens_per_batch_size": []}, "non-empty list"),
]


@pytest.mark.parametrize(("config", "why"), VLLM_REFUSED)
def test_vllm_adapter_refuses_what_vllm_refuses(config: dict[str, Any], why: str) -> None:
    assert any(why in p for p in adapter("vllm").problems(config)), config


def test_vllm_adapter_accepts_a_schedule_from_batch_one_and_the_target_as_mtp_draft() -> None:
    vllm = adapter("vllm")
    assert vllm.problems({"method": "eagle", "model": "m", "num_speculative_tokens": 3,
                          "num_speculative_tokens_per_batch_size": [[1, 8, 3], [9, 64, 0]]}) == []
    assert vllm.problems({"method": "mtp", "num_speculative_tokens": 1}) == []


# SGLang 0.5.23's flags, as recorded in engines/sglang.yaml.
EAGLE3 = {"--speculative-algorithm": "EAGLE3", "--speculative-draft-model-path": "x/y"}
SGLANG_REFUSED = [
    ({"--speculative-algorithm": "MEDUSA"}, "algorithm 'MEDUSA' is not one of"),
    ({**EAGLE3, "--speculative-num-steps": 3}, "pass all three"),
    ({"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 3,
      "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 4},
     "needs --speculative-draft-model-path"),
    ({**EAGLE3, "--speculative-num-steps": 3, "--speculative-eagle-topk": 1,
      "--speculative-num-draft-tokens": 5}, "topk 1: SGLang sets draft tokens to steps + 1 = 4"),
    # steps 2, topk 3: the pool holds 3 + 1 * 9 = 12 candidates, so at most 13 draft tokens
    ({**EAGLE3, "--speculative-num-steps": 2, "--speculative-eagle-topk": 3,
      "--speculative-num-draft-tokens": 14}, "need 2 <= draft tokens <= 1 + 12"),
    ({**EAGLE3, "--speculative-num-steps": 0, "--speculative-eagle-topk": 2,
      "--speculative-num-draft-tokens": 3}, "steps and topk must be >= 1"),
    ({"--speculative-algorithm": "DFLASH", "--speculative-draft-model-path": "x/y"},
     "DFLASH needs --speculative-dflash-block-size >= 1"),
    ({"--speculative-algorithm": "DFLASH", "--speculative-draft-model-path": "x/y",
      "--speculative-dflash-block-size": 16, "--speculative-num-steps": 1,
      "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 2},
     "do not pass the triple"),
]


@pytest.mark.parametrize(("flags", "why"), SGLANG_REFUSED)
def test_sglang_adapter_refuses_what_sglang_refuses(flags: dict[str, Any], why: str) -> None:
    assert any(why in p for p in adapter("sglang").problems(flags)), flags


def test_sglang_adapter_lets_a_builtin_mtp_target_draft_for_itself() -> None:
    sglang = adapter("sglang")
    flags = {"--speculative-algorithm": "EAGLE", "--speculative-num-steps": 1,
             "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 2}
    assert sglang.problems(flags, "DeepseekV3ForCausalLM") == []
    assert sglang.problems(flags, "LlamaForCausalLM") == [
        "EAGLE needs --speculative-draft-model-path"]

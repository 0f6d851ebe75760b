"""TensorRT-LLM commands: every `trtllm-serve` command specsim emits, and the extra-options YAML
beside it, pass trtllm-serve's own argument parsing and TorchLlmArgs' field checks as recorded
in engines/trtllm.yaml (read from the TensorRT-LLM source: tensorrt_llm/commands/serve.py,
tensorrt_llm/llmapi/llm_args.py). The parser below is written apart from the adapter
(specsim/engines/trtllm.py): click's rules for the recorded options, pydantic's for the recorded
fields (extra="forbid"). Expected settings are written out by hand from the rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from specsim.engines import adapter
from specsim.errors import SpecError
from specsim.specs.paths import builtin_dir, builtin_names
from specsim.speculation.recommend import Choice, Recommendation, engine_commands, recommend
from specsim.speculation.setup import load_setup

REPO = Path(__file__).resolve().parent.parent
TRTLLM = adapter("trtllm")
RULES = yaml.safe_load((builtin_dir("engines") / "trtllm.yaml").read_text())["speculative"]


# ------------------------------------------------------------------ the recorded definitions


def test_the_recorded_definitions_are_the_sources():
    """Spot checks against the source, by hand: serve.py's click options and llm_args.py's
    field types (commit ids in engines/trtllm.yaml)."""
    options = RULES["cli"]["options"]
    # @click.option("--tensor_parallel_size", "--tp_size", type=int, default=1)
    assert options["--tp_size"] == {"type": "int", "alias_of": "--tensor_parallel_size",
                                    "default": 1}
    # @click.option("--moe_expert_parallel_size", "--ep_size", type=int, default=None)
    assert options["--ep_size"]["type"] == "int" and options["--ep_size"]["default"] is None
    # @click.option("--config", "--extra_llm_api_options", "extra_llm_api_options", type=str)
    assert options["--extra_llm_api_options"]["type"] == "str"
    assert options["--backend"]["choices"] == ["pytorch", "tensorrt", "_autodeploy", "trt"]
    args = RULES["llm_args"]
    # max_draft_len: Optional[NonNegativeInt]; max_concurrency: Optional[PositiveInt]
    assert args["decoding_base"]["max_draft_len"] == {"type": "int", "ge": 0, "nullable": True}
    assert args["decoding_base"]["max_concurrency"]["gt"] == 0
    # the SpeculativeConfig union's decoding types specsim may emit
    assert set(args["algorithms"]) == {"Eagle3", "Eagle", "MTP", "NGram", "SA", "Draft_Target"}
    mtp = args["algorithms"]["MTP"]["fields"]
    # use_relaxed_acceptance_for_thinking: bool = False; relaxed_topk: PositiveInt = 1;
    # relaxed_delta: NonNegativeFloat = 0.0
    assert mtp["use_relaxed_acceptance_for_thinking"] == {"type": "bool", "default": False}
    assert mtp["relaxed_topk"] == {"type": "int", "gt": 0, "default": 1}
    assert mtp["relaxed_delta"] == {"type": "float", "ge": 0, "default": 0.0}
    assert mtp["num_nextn_predict_layers"]["deprecated_for"] == "max_draft_len"
    ngram = args["algorithms"]["NGram"]["fields"]
    assert ngram["max_matching_ngram_size"] == {"type": "int", "gt": 0, "default": 2}
    # BaseCudaGraphConfig: batch_sizes, max_batch_size (NonNegativeInt), enable_padding
    graphs = args["cuda_graph_config"]
    assert graphs["enable_padding"]["type"] == "bool" and graphs["max_batch_size"]["ge"] == 0
    assert graphs["default_max_batch_size"] == 128
    assert args["top_level"]["max_num_tokens"]["default"] == 8192
    assert set(RULES["absent_algorithms"]) == {"Medusa", "Lookahead", "ExplicitDraftTokens"}


# ------------------------------------------------------------------ an independent parser


def _typed(kind: str, word: str) -> object:
    """What click makes of one option value of the recorded type (ValueError: refused)."""
    if kind == "int":
        return int(word)
    if kind == "float":
        return float(word)
    return word


def parse_serve(argv: list[str], files: dict[str, str]) -> tuple[str, dict[str, object], Any]:
    """(model, options, extra YAML) as trtllm-serve's click parser and YAML loading would take
    them; AssertionError where they would refuse."""
    assert argv[0] == "trtllm-serve"
    options = RULES["cli"]["options"]
    model, seen, words = None, {}, argv[1:]
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--"):
            assert model is None, f"second positional argument {word!r}"
            model, i = word, i + 1
            continue
        spec = options.get(word)
        assert spec is not None, f"no such option: {word}"
        assert word not in seen, f"{word} given twice"
        if spec["type"] == "flag":
            seen[word], i = True, i + 1
            continue
        assert i + 1 < len(words), f"{word} needs a value"
        value = words[i + 1]
        if spec["type"] == "choice":
            assert value in spec["choices"], (word, value)
        seen[word] = _typed(spec["type"], value)
        i += 2
    assert model, "missing argument MODEL"
    extra = None
    if "--extra_llm_api_options" in seen:
        extra = yaml.safe_load(files[str(seen["--extra_llm_api_options"])])
        assert isinstance(extra, dict)
        _check_llm_args(extra)
    return model, seen, extra


def _field(where: str, value: object, spec: dict[str, Any]) -> None:
    """pydantic's check of one recorded field (strict ints: YAML gives ints as ints)."""
    if value is None:
        assert spec.get("nullable"), f"{where} is null"
        return
    kind = spec["type"]
    ok = {"int": type(value) is int, "float": type(value) in (int, float),
          "bool": type(value) is bool, "str": type(value) is str,
          "mapping": type(value) is dict,
          "int_list": type(value) is list and all(type(v) is int for v in value),
          "int_map": type(value) is dict and all(type(k) is int and type(v) is int
                                                  for k, v in value.items())}[kind]
    assert ok, f"{where}: {value!r} is not {kind}"
    if kind in ("int", "float"):
        number = float(value)  # type: ignore[arg-type]
        assert number >= spec.get("ge", number) and number <= spec.get("le", number), where
        assert "gt" not in spec or number > spec["gt"], where


def _fields(where: str, block: dict[str, Any], fields: dict[str, Any]) -> None:
    for key, value in block.items():
        assert key in fields and isinstance(fields[key], dict), \
            f"{where}.{key}: extra fields not permitted"
        _field(f"{where}.{key}", value, fields[key])


def _check_llm_args(extra: dict[str, Any]) -> None:
    args = RULES["llm_args"]
    _fields("options", extra, args["top_level"])
    if "cuda_graph_config" in extra:
        _fields("cuda_graph_config", extra["cuda_graph_config"],
                {k: v for k, v in args["cuda_graph_config"].items() if isinstance(v, dict)})
    if "kv_cache_config" in extra:
        _fields("kv_cache_config", extra["kv_cache_config"], args["kv_cache_config"])
    spec = extra.get("speculative_config")
    if spec is None:
        return
    algorithm = args["algorithms"][spec["decoding_type"]]
    _fields("speculative_config", spec, {**args["decoding_base"], **algorithm["fields"]})
    k = spec["max_draft_len"]
    assert k >= algorithm["min_draft_len"], "max_draft_len must be > 0"
    if algorithm["requires_model"]:  # either name (AliasChoices)
        assert spec.get("speculative_model") or spec.get("speculative_model_dir"), \
            "Draft model must be provided"
    schedule = spec.get("draft_len_schedule")
    assert schedule is None or "max_concurrency" not in spec, "mutually exclusive"
    if schedule is not None:
        assert algorithm["per_batch_size"]
        assert all(key >= 1 and 0 <= v <= k for key, v in schedule.items())
        assert schedule[min(schedule)] == k, "schedule[smallest] must equal max_draft_len"


# ------------------------------------------------------------------ every emitted command


def _emitted(slug: str, engine: str, tp: int) -> list[Any]:
    setup, profile = load_setup(hardware="h200", drafter=slug, tp=tp, engine=engine, alpha=0.7)
    rec = recommend(setup, profile, [1, 8, 64, 256])
    return [c for c in engine_commands(rec, setup) if c.engine == "trtllm"]


@pytest.mark.parametrize("slug", builtin_names("drafters"))
def test_every_emitted_command_and_yaml_parse(slug: str) -> None:
    emitted, reasons = 0, []
    for engine, tp in (("trtllm", 1), ("trtllm:sync", 8), ("sglang", 2)):
        try:
            commands = _emitted(slug, engine, tp)
        except SpecError:  # TP does not split the heads, or trtllm times what it cannot run
            continue
        for c in commands:
            if c.command is None:
                assert c.reason and "\n" not in c.reason
                reasons.append(c.reason)
                continue
            emitted += 1
            model, options, extra = parse_serve(list(c.argv), dict(c.files))
            assert options["--max_batch_size"] == max(c.batches)
            assert options.get("--tp_size", 1) == tp
            assert extra is not None
            # graphs captured up to the batch the command serves, padded
            assert extra["cuda_graph_config"] == {"enable_padding": True,
                                                  "max_batch_size": max(c.batches)}
            # rounds timed without the overlap scheduler run without it; plain servers keep it
            assert extra.get("disable_overlap_scheduler", False) == (
                engine == "trtllm:sync" and "speculative_config" in extra)
    method = TRTLLM.methods.get(
        yaml.safe_load((builtin_dir("drafters") / f"{slug}.yaml").read_text())["family"])
    if method is None:
        assert emitted == 0, slug
    elif not emitted:  # a target too large for the GPUs tried, or no published checkpoint
        assert reasons and all("that fits" in r or "checkpoint" in r for r in reasons), reasons


# ------------------------------------------------------------------ settings by hand


def _choice(batch: int, nodes: int) -> Choice:
    return Choice(batch=batch, shape="chain" if nodes else "none", nodes=nodes, depth=nodes,
                  max_width=1, tau=2.0, round_s=0.01, speedup=1.5,
                  tokens_per_s_per_user=100.0, throughput=100.0 * batch, fits=True)


def _commands(ks: dict[int, int], drafter: str = "eagle3-llama-3.1-8b") -> list[Any]:
    rows = [_choice(b, k) for b, k in ks.items()]
    rec = Recommendation(best=rows, best_chain=rows, objective="speedup", engine_trees=None,
                         schedule_chain=rows)
    setup, _ = load_setup(drafter=drafter, engine="trtllm")
    return [c for c in engine_commands(rec, setup) if c.engine == "trtllm"]


def _spec(c: Any) -> dict[str, Any] | None:
    ((_, text),) = c.files
    return yaml.safe_load(text).get("speculative_config")


def test_a_shortening_chain_is_one_server_with_a_schedule() -> None:
    # 5 at batches 1-8, 3 at 9-64: draft_len_schedule {8: 5, 64: 3}, max_draft_len 5
    (c,) = _commands({1: 5, 8: 5, 64: 3})
    # EAGLE-3 as `decoding_type: Eagle` with `speculative_model_dir`, as TensorRT-LLM's own
    # published configs write it (issues #9603, #9208)
    assert _spec(c) == {"decoding_type": "Eagle", "max_draft_len": 5,
                        "speculative_model_dir": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                        "draft_len_schedule": {8: 5, 64: 3}}
    assert c.batch_range == (1, 64) and c.argv[-2:] == ("--max_batch_size", "64")


def test_speculation_that_stops_paying_is_a_cut_off() -> None:
    # 3 at batches 1-8, none at 9-64: max_concurrency 8
    (c,) = _commands({1: 3, 8: 3, 64: 0})
    assert _spec(c) == {"decoding_type": "Eagle", "max_draft_len": 3,
                        "speculative_model_dir": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                        "max_concurrency": 8}


def test_a_lengthening_chain_is_one_server_per_range() -> None:
    # 2 at 1-8, 4 at 9-64: a schedule's smallest key must hold max_draft_len, so two servers
    first, second = _commands({1: 2, 8: 2, 64: 4})
    assert (first.batch_range, _spec(first)["max_draft_len"]) == ((1, 8), 2)
    assert (second.batch_range, _spec(second)["max_draft_len"]) == ((9, 64), 4)
    assert "draft_len_schedule" not in _spec(first) and first.argv[-1] == "8"


def test_mtp_uses_the_targets_own_layers() -> None:
    setup, _ = load_setup(drafter="mtp-deepseek-v3", hardware="h200", tp=8, engine="trtllm")
    rows = [_choice(1, 1)]
    rec = Recommendation(best=rows, best_chain=rows, objective="speedup", engine_trees=None,
                         schedule_chain=rows)
    (c,) = [c for c in engine_commands(rec, setup) if c.engine == "trtllm"]
    assert list(c.argv[:4]) == ["trtllm-serve", "deepseek-ai/DeepSeek-V3", "--tp_size", "8"]
    # num_nextn_predict_layers beside max_draft_len: what tech blog 2's config gives
    assert _spec(c) == {"decoding_type": "MTP", "max_draft_len": 1,
                        "num_nextn_predict_layers": 1}


MTP_RELAXED = {"decoding_type": "MTP", "max_draft_len": 3,
               "use_relaxed_acceptance_for_thinking": True, "relaxed_topk": 10,
               "relaxed_delta": 0.6}  # TensorRT-LLM tech blog 2's relaxed acceptance

# Refused by TorchLlmArgs as recorded (and the phrase that says why), by hand.
REFUSED = [
    ({"speculative_config": {"decoding_type": "Medusa", "max_draft_len": 3}},
     "decoding_type 'Medusa' (absent from TensorRT-LLM's PyTorch backend)"),
    ({"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3}},
     "Eagle3 needs speculative_model"),
    ({"speculative_config": {"decoding_type": "Eagle", "max_draft_len": 3,
                             "speculative_model": "x/y", "speculative_model_dir": "x/y"}},
     "not both"),
    ({"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 0,
                             "speculative_model": "x/y"}}, "max_draft_len must be > 0"),
    ({"speculative_config": {**MTP_RELAXED, "relaxed_topk": 0}}, "relaxed_topk = 0 must be > 0"),
    ({"speculative_config": {**MTP_RELAXED, "draft_len_schedule": {4: 2, 8: 1}}},
     "draft_len_schedule[4] = 2 must equal max_draft_len = 3"),
    ({"speculative_config": {**MTP_RELAXED, "draft_len_schedule": {4: 3},
                             "max_concurrency": 4}}, "mutually exclusive"),
    ({"speculative_config": {"decoding_type": "NGram", "max_draft_len": 3,
                             "max_concurrency": 8}}, "NGram has no dynamic draft length"),
    ({"speculative_config": {**MTP_RELAXED, "num_medusa_heads": 4}},
     "speculative_config.num_medusa_heads is not a field"),
    ({"cuda_graph_config": {"max_batch_size": 64, "batch_sizes": [1, 8]}},
     "max_batch_size must equal max(batch_sizes)"),
    ({"cuda_graph_config": {"enable_padding": "yes"}}, "is not a bool"),
    ({"kv_cache_config": {"free_gpu_memory_fraction": 1.5}}, "must be <= 1"),
    ({"disable_overlap": True}, "options.disable_overlap is not a field"),
]


@pytest.mark.parametrize(("options", "why"), REFUSED)
def test_the_adapter_refuses_what_trtllm_refuses(options: dict[str, Any], why: str) -> None:
    assert any(why in p for p in TRTLLM.problems(options)), TRTLLM.problems(options)


def test_relaxed_acceptance_and_the_deprecated_mtp_key_are_accepted() -> None:
    assert TRTLLM.problems({"speculative_config": MTP_RELAXED}) == []
    parse_serve(["trtllm-serve", "m", "--extra_llm_api_options", "x.yaml"],
                {"x.yaml": yaml.safe_dump({"speculative_config": MTP_RELAXED})})
    # blog 2's own key: num_nextn_predict_layers, remapped to max_draft_len
    assert TRTLLM.problems({"speculative_config": {"decoding_type": "MTP", "max_draft_len": 3,
                                                   "num_nextn_predict_layers": 3}}) == []


# ------------------------------------------------------------------ the CLI


def _run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specsim", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_a_drafter_trtllm_cannot_run_is_refused_in_one_line() -> None:
    out = _run("recommend", "--engine", "trtllm", "--drafter", "medusa-vicuna-7b")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1
    assert "engine trtllm:" in out.stderr and "cannot run the medusa family" in out.stderr
    assert "absent: Medusa, Lookahead, ExplicitDraftTokens" in out.stderr
    assert "trtllm.yaml" in out.stderr


def test_plan_and_speedup_refuse_it_too(tmp_path: Path) -> None:
    for args in (["plan", "--model", "vicuna-7b-v1.3", "-d", "medusa-vicuna-7b", "--engine",
                  "trtllm", "--workload", "chat", "--out", str(tmp_path / "plan")],
                 ["speedup", "-d", "medusa-vicuna-7b", "--engine", "trtllm:sync", "--alpha",
                  "0.7", "--batch", "1"]):
        out = _run(*args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert "cannot run the medusa family" in out.stderr
    assert list(tmp_path.iterdir()) == []
    # an engine that times any drafter (SGLang answers with a reason beside its commands)
    assert _run("speedup", "-d", "medusa-vicuna-7b", "--engine", "sglang", "--alpha", "0.7",
                "--batch", "1").returncode == 0


def test_recommend_prints_the_yaml_beside_the_command() -> None:
    out = _run("recommend", "--engine", "trtllm", "--drafter", "eagle3-llama-3.1-8b",
               "--batch", "1,8")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    (i,) = [i for i, line in enumerate(lines) if line.startswith("TensorRT-LLM ")]
    argv = lines[i].split(": ", 1)[1].split()
    name = argv[argv.index("--extra_llm_api_options") + 1]
    assert lines[i + 1] == (f"  {name} (the file the command reads, as it must be written, or "
                            "pass --configs-out DIR):")
    body = []
    for line in lines[i + 2:]:
        if not line.startswith("    "):
            break
        body.append(line[4:])
    parse_serve(argv, {name: "\n".join(body)})


def test_plan_writes_each_yaml_its_commands_read(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = _run("plan", "--model", "llama-3.1-8b", "--drafter", "eagle3-llama-3.1-8b",
                  "--engine", "trtllm", "--workload", "chat", "--out", str(out))
    assert result.returncode == 0, result.stderr
    report = (out / "report.md").read_text()
    commands = [line for line in report.splitlines() if line.startswith("trtllm-serve ")]
    assert commands
    for line in commands:
        argv = line.split()
        name = argv[argv.index("--extra_llm_api_options") + 1]
        parse_serve(argv, {name: (out / name).read_text()})


def test_engines_show_trtllm() -> None:
    out = _run("engines", "show", "trtllm")
    assert out.returncode == 0, out.stderr
    assert "kernels_per_layer" in out.stdout and "attentionOp.cpp" in out.stdout
    assert "trtllm" in _run("engines", "list").stdout


# ------------------------------------------------------------------ validate


def test_trtllm_rows_are_predicted_from_sourced_terms() -> None:
    """The PR 12130 rows (gpt-oss-120b, 8 H200s) are predicted with no term fitted: 10%
    median (measured 7.8%), every row to batch 16 within 22%. At batch 64-128 plain decoding
    and the EAGLE-3 round come out too fast (measured +28% / +29% plain, +56% EAGLE-3 at 128):
    a large-batch term of TensorRT-LLM is missing (docs/limits.md), which the all-reduce had
    hidden while a message past the measured custom all-reduce kept its 22.9 us/MB slope.
    The blog's DeepSeek-R1 MTP rows publish no tau and stay listed."""
    import numpy as np

    from specsim.measurement.published import load_published
    from specsim.measurement.validate import NO_TAU, validate

    results = validate([r for r in load_published() if r.engine == "trtllm"])
    by_id = {v.row.id: v for v in results}
    predicted = [v for v in results if v.predicted is not None]
    assert {v.row.id for v in predicted} >= {
        f"trtllm12130-h200-tp8-gptoss120b-plain-b{b}" for b in (1, 16, 64, 128)} | {
        f"trtllm12130-h200-tp8-gptoss120b-eagle3-k3-b{b}" for b in (16, 64, 128)} | {
        "gpustack-h100-qwen3-8b-bf16-tp1-c4-trtllm"}
    assert all(v.held_out for v in predicted)
    assert all(abs(v.error) < 0.22 for v in predicted if v.row.batch <= 16), [
        (v.row.id, v.error) for v in predicted]
    assert all(0.0 < v.error < 0.6 for v in predicted if v.row.batch >= 64
               and v.row.id.endswith(("plain-b64", "plain-b128", "eagle3-k3-b128"))), [
        (v.row.id, v.error) for v in predicted]
    assert np.median([abs(v.error) for v in predicted]) < 0.10
    for row in ("trtllm-blog2-b200-dsr1-fp4-mtp3-b1",
                "trtllm-blog2-b200-dsr1-fp4-mtp3-relaxed-b1"):
        assert by_id[row].predicted is None and by_id[row].reason == NO_TAU


def test_expert_parallel_servers_get_ep_size() -> None:
    """gpt-oss-120b's 128 experts over 8 GPUs: `--tp_size 8 --ep_size 8` (serve.py
    --moe_expert_parallel_size / --ep_size), as parsed."""
    setup, profile = load_setup(drafter="eagle3-gpt-oss-120b", hardware="h200", tp=8, ep=8,
                                engine="trtllm")
    rec = recommend(setup, profile, [1, 16])
    (c, *_) = [c for c in engine_commands(rec, setup) if c.engine == "trtllm"]
    _, options, _ = parse_serve(list(c.argv), dict(c.files))
    assert (options["--tp_size"], options["--ep_size"]) == (8, 8)


def test_recommend_json_carries_the_files() -> None:
    import json

    out = _run("recommend", "--engine", "trtllm", "--drafter", "eagle3-llama-3.1-8b",
               "--batch", "1,8", "--json")
    assert out.returncode == 0, out.stderr
    (c,) = [c for c in json.loads(out.stdout)["commands"] if c["engine"] == "trtllm"]
    files = {f["name"]: f["text"] for f in c["files"]}
    parse_serve(c["argv"], files)
    assert c["argv"][c["argv"].index("--extra_llm_api_options") + 1] in files


# ------------------------------------------------------------------ kernel counts


@pytest.mark.parametrize(("model", "weights", "kernels"), [
    # 32 layers x (2 fused add+RMSNorm, QKV GEMM, QKV preprocessing, XQA, O GEMM; gate_up,
    # SwiGLU, down) + 6 per pass (embedding, final norm, gather, LM head, argmax, copy)
    ("llama-3.1-8b", "", 32 * (6 + 3) + 6),
    # Qwen3: + the fused q/k-norm-and-RoPE kernel per layer
    ("qwen3-8b", "", 36 * (6 + 3 + 1) + 6),
    # DeepSeek-V3 in bf16 (no fp8 quantization kernels): 61 MLA layers (+5 each), 3 dense MLPs,
    # 58 MoE layers with a router GEMM and a shared-expert GatedMLP (3)
    ("deepseek-v3", "bf16", 61 * (6 + 5) + 3 * 3 + 58 * (1 + 3) + 6),
    # gpt-oss-120b: 36 layers, each MoE with its router GEMM
    ("gpt-oss-120b", "", 36 * (6 + 1) + 6),
])
def test_kernels_per_pass_as_counted_in_the_trtllm_source(model: str, weights: str,
                                                          kernels: int) -> None:
    from specsim.specs.engines import load_engine
    from specsim.specs.models import load_model
    from specsim.speculation.engine_time import model_kernels

    assert model_kernels(load_engine("trtllm"), load_model(model), weights) == kernels


def test_recommend_writes_the_files_its_commands_read(tmp_path: Path) -> None:
    """`recommend --configs-out DIR` writes TensorRT-LLM's extra-options YAML, byte for byte
    the text it prints (and --json carries), into DIR, so `trtllm-serve ... --extra_llm_api_options
    NAME` runs as printed from there. The same file again is not an overwrite; a different
    one is refused without --force (one line, exit 2, the file kept), and a file given as the
    folder is refused."""
    import json

    from tests.test_cli import run

    args = ("recommend", "--hardware", "h100-sxm", "--drafter", "eagle3-llama-3.1-8b",
            "--alpha", "0.8", "--batch", "1,8", "--engine", "trtllm")
    out = tmp_path / "configs"
    first = run(*args, "--configs-out", str(out), "--json")
    assert first.returncode == 0, first.stderr
    files = [f for c in json.loads(first.stdout)["commands"] for f in c["files"]]
    assert files
    for f in files:
        assert (out / f["name"]).read_text() == f["text"]
    assert run(*args, "--configs-out", str(out)).returncode == 0  # the same bytes again
    path = out / files[0]["name"]
    path.write_text("changed: true\n")
    refused = run(*args, "--configs-out", str(out))
    assert refused.returncode == 2 and "exists; pass --force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert path.read_text() == "changed: true\n"
    assert run(*args, "--configs-out", str(out), "--force").returncode == 0
    assert path.read_text() == files[0]["text"]
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    bad = run(*args, "--configs-out", str(not_a_folder))
    assert bad.returncode == 2 and "is a file; give a folder" in bad.stderr


def test_on_an_amd_gpu_trtllm_has_no_command_and_refuses_to_time() -> None:
    """TensorRT-LLM serves on NVIDIA GPUs only (engines/trtllm.yaml speculative.vendors, from
    its README): on an MI300X vLLM's command comes with one line saying why there is none for
    it, the recommend table has no TensorRT-LLM column, and timing with its
    terms there is refused in one line (exit 2)."""
    from specsim.speculation.recommend import engine_cells

    assert adapter("trtllm").vendors == ("NVIDIA",)
    assert adapter("vllm").vendors == adapter("sglang").vendors == ("NVIDIA", "AMD")
    rows = [_choice(1, 3), _choice(8, 3)]
    rec = Recommendation(best=rows, best_chain=rows, objective="speedup", engine_trees=None,
                         schedule_chain=rows)
    setup, _ = load_setup(hardware="mi300x", drafter="eagle3-llama-3.1-8b", engine="vllm")
    by_engine = {c.engine: c for c in engine_commands(rec, setup)}
    assert by_engine["vllm"].argv and "runs on" not in by_engine["sglang"].reason
    assert by_engine["trtllm"].argv == ()
    assert by_engine["trtllm"].reason == (
        f"TensorRT-LLM {adapter('trtllm').version} runs on NVIDIA GPUs in specsim, not AMD's "
        "(engines/trtllm.yaml: speculative.vendors)")
    assert set(engine_cells(rec, setup.drafter, "AMD")) == {"vllm_k", "sglang"}
    assert set(engine_cells(rec, setup.drafter, "NVIDIA")) == {"vllm_k", "sglang", "trtllm_k"}
    out = _run("recommend", "--hardware", "mi300x", "--engine", "trtllm")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"specsim: error: engine trtllm: TensorRT-LLM {adapter('trtllm').version} runs on "
        "NVIDIA GPUs in specsim, and mi300x is AMD's (engines/trtllm.yaml: "
        "speculative.vendors); on it: --engine vllm or sglang"]


def test_an_amd_plan_names_and_writes_no_trtllm_command(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = _run("plan", "--model", "llama-3.1-8b", "--hardware", "mi300x", "--drafter",
                  "eagle3-llama-3.1-8b", "--engine", "vllm", "--workload", "chat",
                  "--out", str(out))
    assert result.returncode == 0, result.stderr
    report = (out / "report.md").read_text()
    assert "trtllm-serve" not in report and "runs on vLLM and SGLang and" not in report
    assert not list(out.glob("trtllm-*.yaml"))
    assert "vllm serve " in report and "sglang.launch_server" in report


def test_a_published_row_of_trtllm_on_an_amd_gpu_is_refused(tmp_path: Path) -> None:
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump({"rows": [{
        "id": "x", "source": "s", "model": "llama-3.1-8b", "hardware": "mi300x",
        "engine": "trtllm", "batch": 1, "benchmark": "batch", "dataset": "random",
        "method": "plain", "shape": "chain", "baseline_tokens_per_s": 100}]}))
    out = _run("validate", "--published", str(rows))
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"specsim: error: {rows}: row 'x': field 'engine': engine trtllm: "
                           "TensorRT-LLM ")
    assert "runs on NVIDIA GPUs in specsim, and mi300x is AMD's" in line


def test_engines_show_says_which_gpus_an_engine_serves_on() -> None:
    import json

    shown = json.loads(_run("engines", "show", "trtllm", "--json").stdout)
    assert shown["vendors"] == ["NVIDIA"]
    text = _run("engines", "show", "sglang").stdout.splitlines()
    assert text[-1].startswith("runs on NVIDIA and AMD GPUs in specsim: sglang-0.5.23 wheel")

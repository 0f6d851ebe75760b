"""Regression cases from the second to fourth adversarial campaigns, beyond tests/fuzz_cases.py.

Each case is one command line plus the files it needs; each must end in exit 2 with one line
on stderr that names the file, field or option (`needle`), leave every file as it was, and
raise nothing but SystemExit (the contract of tests/test_fuzz.py). Run in-process
(fuzz_cases.run_case), so the whole file takes seconds.
"""

from __future__ import annotations

import copy
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_cases import METRICS, Case, _profile_lines, check_case, lay_out, run_case

REPO = Path(__file__).resolve().parent.parent
HF_CONFIGS = REPO / "tests" / "fixtures" / "hf_configs"

LONG_NAME = "x" * 300  # one path component over the filesystem's 255 bytes
LONG_PATH = "/".join(["y" * 200] * 30)  # a path over PATH_MAX
REC = ("recommend", "--drafter", "eagle3-llama-3.1-8b", "--batch", "1", "--max-nodes", "8")


def _spec(folder: str, slug: str, **changes: object) -> bytes:
    """A built-in spec with top-level fields changed, as YAML bytes."""
    data = yaml.safe_load((REPO / folder / f"{slug}.yaml").read_text(encoding="utf-8"))
    data.update(changes)
    return yaml.safe_dump(data, sort_keys=False).encode()


def _config(fixture: str, *path: str | int, value: object) -> bytes:
    """A config.json fixture with the key at `path` set to `value`, as JSON bytes."""
    data = json.loads((HF_CONFIGS / f"{fixture}.json").read_text(encoding="utf-8"))
    node: Any = copy.deepcopy(data)
    inner = node
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return json.dumps(node).encode()


def _import(label: str, text: bytes, needle: str) -> Case:
    return Case(kind="adversarial", label=label,
                args=("models", "import", "c.json", "--out", "o.yaml"),
                files={"c.json": text}, needle=needle)


def _case(label: str, *args: str, needle: str, files: dict[str, bytes] | None = None) -> Case:
    return Case(kind="adversarial", label=label, args=args, files=files or {}, needle=needle)


CASES = [
    # a name the OS refuses (ENAMETOOLONG) is 'no such file', not an OSError traceback
    *[_case(f"models-import-{kind}", "models", "import", name, "--out", "o.yaml",
            needle=name[:20])
      for kind, name in (("long-name", LONG_NAME), ("long-path", LONG_PATH))],
    *[_case(f"drafters-import-{kind}", "drafters", "import", name, "--target", "llama-3.1-8b",
            "--out", "o.yaml", needle=name[:20])
      for kind, name in (("long-name", LONG_NAME), ("long-path", LONG_PATH))],
    *[_case(f"calibrate-{kind}", "calibrate", name, "--out", "o.yaml", needle=name[:20])
      for kind, name in (("long-name", LONG_NAME), ("long-path", LONG_PATH),
                         ("long-yaml-name", LONG_NAME + ".csv"))],
    _case("calibrate-vidur-long-name", "calibrate", LONG_NAME, "--format", "vidur", "--device",
          "a100", "--out", "o.yaml", needle=LONG_NAME[:20]),
    *[_case(f"configs-out-{kind}", *REC, "--engine", "trtllm", "--configs-out", name,
            needle=name[:20])
      for kind, name in (("long-name", LONG_NAME), ("long-path", LONG_PATH))],
    _case("configs-out-under-a-file", *REC, "--engine", "trtllm", "--configs-out", "afile/sub",
          files={"afile": b"x"}, needle="--configs-out"),
    _case("transferred-long-path", "roofline", "--hardware", f"transferred/{LONG_PATH}",
          "--tokens", "1", needle="hardware"),
    _case("transferred-long-name", "roofline", "--hardware", "transferred/" + "a" * 5000,
          "--tokens", "1", needle="hardware"),
    # the adaptive stop's head concentration where scipy's Beta breaks: a ValueError from
    # numpy (1e308: NaN atoms) or an OverflowError from boost (1e-308)
    *[_case(f"head-concentration-{value}", *REC, "--head-concentration", value,
            needle="--head-concentration") for value in ("1e308", "1e30", "1e-308", "-inf")],
    # two overlap modes: the last silently won (sglang:sync:overlap ran overlapped)
    *[_case(f"engine-{name}", "roofline", "--engine", name, "--tokens", "1", needle=name)
      for name in ("sglang:sync:sync", "vllm:sync:overlap", "sglang:overlap:sync")],
    # a layer count the spec's per-layer lists are built from: 10**9 held the loader for
    # minutes and gigabytes (roofline, memory, speedup); refused by name
    _case("model-num-layers-1e9", "roofline", "--model", "m.yaml", "--tokens", "1",
          files={"m.yaml": _spec("workloads/models", "llama-3.1-8b", num_layers=10**9)},
          needle="num_layers"),
    _case("model-num-layers-20000", "memory", "--model", "m.yaml",
          files={"m.yaml": _spec("workloads/models", "qwen3-30b-a3b", num_layers=20_000)},
          needle="num_layers"),
    _case("drafter-layers-1e9", "memory", "--model", "qwen3-8b", "--drafter", "d.yaml",
          files={"d.yaml": _spec("workloads/drafters", "qwen3-0.6b-for-qwen3-8b",
                                 layers=10**9)}, needle="layers"),
    # config.json: a layer count of 10**12 built a 10**12-entry list (hang), 10**30 overflowed;
    # a list inside a list of kinds, or a mapping as the quantization method, was a TypeError
    _import("gemma-2-layers-1e12", _config("gemma-2-9b", "num_hidden_layers", value=10**12),
            "num_hidden_layers"),
    _import("phi-3-layers-1e30", _config("phi-3-mini-4k-instruct", "num_hidden_layers",
                                         value=10**30), "num_hidden_layers"),
    _import("llama-4-layers-1e30", _config("llama-4-maverick-17b-128e-instruct", "text_config",
                                           "num_hidden_layers", value=10**30),
            "num_hidden_layers"),
    _import("hidden-size-1e12", _config("olmo-2-1124-7b", "hidden_size", value=10**12),
            "hidden_size"),
    _import("qwen3.5-layer-kind-list", _config("qwen3.5-397b-a17b", "text_config",
                                               "layer_types", 1, value=[1]), "layer_types"),
    _import("glm-5.2-mlp-kind-mapping", _config("glm-5.2", "mlp_layer_types", 0,
                                                value={"a": 1}), "mlp_layer_types"),
    _import("glm-5.2-indexer-kind-list", _config("glm-5.2", "indexer_types", 3, value=["full"]),
            "indexer_types"),
    _import("quant-method-mapping", _config("deepseek-r1", "quantization_config",
                                            "quant_method", value={}), "quant_method"),
    _import("q-lora-rank-string", _config("deepseek-r1", "q_lora_rank", value="1536"),
            "q_lora_rank"),
    # a profile is one GPU's: rows of another device, a device line given twice (which one
    # held was the last), or KV heads per GPU past any model were fitted as given
    *[_case(f"profile-{label}", "calibrate", "p.csv", "--hardware", "h100-sxm", "--out",
            "o.yaml", files={"p.csv": text}, needle=needle)
      for label, text, needle in (
          ("row-of-another-device",
           "\n".join(["# device: cpu", *_profile_lines()[:-1],
                       _profile_lines()[-1].replace("cpu,", "gpu1,", 1)]).encode(),
           "column 'device'"),
          ("rows-of-two-devices",
           "\n".join([*_profile_lines()[:-1],
                       _profile_lines()[-1].replace("cpu,", "gpu1,", 1)]).encode(),
           "column 'device'"),
          ("device-line-twice",
           "\n".join(["# device: cpu", "# device: gpu", *_profile_lines()]).encode(),
           "metadata 'device' given twice"),
          ("rows-past-the-cap",
           "\n".join([_profile_lines()[0], *[_profile_lines()[1]] * 100_001]).encode(),
           "100,001 data rows"),
          ("kv-heads-per-gpu-huge",
           "\n".join(["# kv_heads_per_gpu: 100000000000000000000000",
                       *_profile_lines()]).encode(), "kv_heads_per_gpu"))],
]


def _hardware(slug: str, key: str, value: object) -> bytes:
    """A built-in GPU profile with `interconnect.allreduce_us.<key>` set, as YAML bytes."""
    data = yaml.safe_load((REPO / "hardware" / f"{slug}.yaml").read_text(encoding="utf-8"))
    data["interconnect"].setdefault("allreduce_us", {"source": "a test"})[key] = value
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


ALLREDUCE = [[4096, 7.0], [65536, 8.0]]
CASES += [
    # an all-reduce table's TP key: 'tp²' passed str.isdigit() and raised int()'s ValueError;
    # 'tp02' silently replaced tp2's table; a degree past --tp's 64 was kept, never used
    _case(f"allreduce-key-{key}", "roofline", "--hardware", "h.yaml", "--tokens", "1", "--tp",
          "2", files={"h.yaml": _hardware("h100-sxm", key, ALLREDUCE)},
          needle=f"interconnect.allreduce_us.{key}")
    for key in ("tp\u00b2", "tp\u0663", "tp02", "tp999", "tp65", "tp1")]


def _mesh(slug: str, links: int) -> bytes:
    data = yaml.safe_load((REPO / "hardware" / f"{slug}.yaml").read_text(encoding="utf-8"))
    data["interconnect"]["mesh_links"] = {"value": links, "source": "a test"}
    return yaml.safe_dump(data, sort_keys=False).encode()


# more mesh links than a GPU has peers in its domain (one link per peer): 575 links on an
# 8-GPU board were accepted and left a TP 8 group 7/575 of the link bandwidth
CASES += [_case(f"mesh-links-{slug}-{links}", "roofline", "--hardware", "h.yaml", "--tokens",
                "1", files={"h.yaml": _mesh(slug, links)}, needle="interconnect.mesh_links")
          for slug, links in (("mi300x", 8), ("h100-sxm", 575), ("gb200", 72))]


def _engine_fitted(slug: str, *path: str, value: object) -> bytes:
    """A built-in engine with `fitted.<path>` set, as YAML bytes."""
    data = yaml.safe_load((REPO / "engines" / f"{slug}.yaml").read_text(encoding="utf-8"))
    node = data["fitted"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return yaml.safe_dump(data, sort_keys=False).encode()


CASES += [
    # fitted.rows: an integer raised "'int' object is not iterable"; a mapping or a string
    # was read key by key (or character by character) as row ids
    *[_case(f"engine-fitted-rows-{label}", "roofline", "--engine", "e.yaml", "--tokens", "1",
            files={"e.yaml": _engine_fitted("sglang", "rows", value=value)},
            needle="fitted.rows")
      for label, value in (("int", 5), ("mapping", {"a": 1}), ("string", "row-1"),
                           ("list-of-numbers", [1, 2]))],
    # a held-out refit outside the term's range was accepted (refits are bounded to it)
    _case("engine-held-out-outside-range", "roofline", "--engine", "e.yaml", "--tokens", "1",
          files={"e.yaml": _engine_fitted("sglang", "round_s", "held_out", value=[10.0, 20.0])},
          needle="fitted.round_s.held_out"),
]


def _published(slug: str, **changes: object) -> bytes:
    """A built-in published file with its first row's fields changed, as YAML bytes."""
    data = yaml.safe_load((REPO / "workloads" / "published" / f"{slug}.yaml").read_text(
        encoding="utf-8"))
    data["rows"][0].update(changes)
    return yaml.safe_dump(data, sort_keys=False).encode()


CASES += [
    _case(f"published-{label}", "validate", "--published", "p.yaml",
          files={"p.yaml": _published("eagle3-paper-sglang-h100", **{key: value})},
          needle=f"field '{key}'")
    for label, key, value in (
        # 'assumed: 5' raised "'int' object is not iterable"; a string was split into letters
        ("assumed-int", "assumed", 5), ("assumed-nan", "assumed", float("nan")),
        ("assumed-string", "assumed", "context"), ("assumed-mapping", "assumed", {"a": 1}),
        # a TP of 10**6 passed the row's check and was refused as the option --tp
        ("tp-1e6", "tp", 10**6), ("tp-65", "tp", 65),
        # counts past what the CLI accepts for the same quantity were predicted
        ("batch-1e9", "batch", 10**9), ("context-1e17", "context", 1e17),
        ("draft-tokens-1e9", "draft_tokens", 10**9),
        # text fields held a mapping or number, kept as its repr
        ("source-mapping", "source", {"a": 1}), ("dataset-int", "dataset", 5),
        ("id-list", "id", ["a"]), ("notes-mapping", "notes", {"a": 1}),
        # kept-as-published fields were never checked
        ("acceptance-rate-text", "acceptance_rate", "high"),
        ("acceptance-rate-2", "acceptance_rate", 2.0),
        ("temperature-nan", "temperature", float("nan")),
        ("temperature-negative", "temperature", -1), ("topk-list", "topk", [1]))]
CASES.append(_case("published-concurrency-input-tokens-1e9", "validate", "--published", "p.yaml",
                   files={"p.yaml": _published("plain-decode-dense", input_tokens=10**9)},
                   needle="field 'input_tokens'"))


DECILM = "llama-3.3-nemotron-super-49b-v1"
CASES += [
    # DeciLM block_configs: a NaN, infinite or 1e308 ffn_mult raised int()'s ValueError or
    # OverflowError; a list or mapping as n_heads_in_group broke a set (unhashable); a hidden
    # size of 10**400 overflowed the width's float; 'no_op: "false"' made the block a no-op
    *[_import(f"decilm-ffn-mult-{label}", _config(DECILM, "block_configs", 0, "ffn",
                                                  "ffn_mult", value=value), "ffn_mult")
      for label, value in (("nan", float("nan")), ("inf", float("inf")), ("1e308", 1e308))],
    *[_import(f"decilm-heads-in-group-{label}",
              _config(DECILM, "block_configs", 3, "attention", "n_heads_in_group", value=value),
              "n_heads_in_group") for label, value in (("list", [8]), ("mapping", {"a": 8}))],
    _import("decilm-hidden-1e400", _config(DECILM, "hidden_size", value=10**400), "hidden_size"),
    _import("decilm-no-op-string", _config(DECILM, "block_configs", 3, "attention", "no_op",
                                           value="false"), "no_op"),
]


# long-context --context "": an empty list ran the default sweep (every other command refuses it)
CASES.append(_case("long-context-context-empty", "long-context", "--drafter",
                   "eagle3-llama-3.1-8b", "--batch", "1", "--context", "", needle="--context"))


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_adversarial_input_is_one_line_and_exit_2(case: Case, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_case(case, tmp_path, usage_ok=False)


def test_bench_plan_names_the_drafter_not_an_internal_row(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A drafter made for another target: the line named 'bench-plan.yaml row k2-tau2-c1: field
    drafter_spec' and a YAML field to set, none of which the user wrote or can set."""
    monkeypatch.chdir(tmp_path)
    outcome = run_case(_case("bench-plan", "bench", "plan", "--drafter", "eagle3-llama-3.1-8b",
                             "--model", "qwen3-8b", needle=""))
    assert outcome.code == 2 and outcome.error is None
    line = outcome.stderr.strip()
    assert line == ("specsim: error: drafter eagle3-llama-3.1-8b (made for llama-3.1-8b) does "
                    "not fit target qwen3-8b: vocabulary 128256 vs 151936"), line
    assert not any(tmp_path.iterdir())


def _latency(group: dict[str, object] | None = None, row: dict[str, object] | None = None,
             length: dict[str, object] | None = None) -> bytes:
    """The built-in serving-latency file with its first group and first row changed."""
    data = yaml.safe_load((REPO / "workloads" / "latency" / "serving-latency.yaml").read_text(
        encoding="utf-8"))
    gid = next(iter(data["groups"]))
    data["groups"][gid].update(group or {})
    data["groups"][gid]["prompt_tokens"].update(length or {})
    data["rows"][0].update(row or {})
    return yaml.safe_dump(data, sort_keys=False).encode()


LATENCY_CASES = [
    # an integer too large for a float raised a numpy TypeError from np.isfinite
    ({"row": {"concurrency": 10**40}}, "concurrency"),
    ({"row": {"measured": 10**40}}, "measured"),
    # 1e308 ran: numpy RuntimeWarnings on stderr, then 'm: need finite values' naming no file
    ({"row": {"concurrency": 1e308}}, "concurrency"),
    ({"row": {"concurrency": 2.5}}, "concurrency"),
    ({"row": {"id": None}}, "'id'"),
    # the group's names were checked only when priced: 'unknown model 'inf'' naming no file
    ({"group": {"model": float("inf")}}, "model"),
    ({"group": {"hardware": "no-such-gpu"}}, "hardware"),
    ({"group": {"engine": [1, 2]}}, "engine"),
    ({"group": {"tp": 2.7}}, "tp"),
    ({"group": {"tp": 3}}, "tp"),
    ({"group": {"source": None}}, "source"),
    ({"length": {"median": 1e308}}, "median"),
    ({"length": {"p90": 1.0}}, "p90"),
    ({"length": {"source": 5}}, "source"),
]


@pytest.mark.parametrize(("change", "field"), LATENCY_CASES,
                         ids=[f"{next(iter(c))}-{f}-{i}" for i, (c, f) in
                              enumerate(LATENCY_CASES)])
def test_a_bad_latency_file_names_the_file_and_the_field(change: dict[str, dict[str, object]],
                                                         field: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    case = _case("latency", "validate", "--latency", "lat.yaml", needle="lat.yaml",
                 files={"lat.yaml": _latency(**change)})
    lay_out(case, tmp_path)
    monkeypatch.chdir(tmp_path)
    outcome = run_case(case)
    assert outcome.error is None, f"uncaught {type(outcome.error).__name__}: {outcome.error}"
    lines = outcome.stderr.strip().splitlines()
    assert outcome.code == 2 and len(lines) == 1, outcome.stderr[-600:]
    assert "lat.yaml" in lines[0] and field in lines[0], lines[0]


def test_validate_of_rows_none_predicted_prints_no_warning(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A published file none of whose rows is predicted (no tau): the summary took the median
    of no errors, and numpy's 'Mean of empty slice' RuntimeWarnings went to stderr."""
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        outcome = run_case(_case("validate-none-predicted", "validate", "--published",
                                 "sglang-docs-h100", needle=""))
    assert outcome.error is None, repr(outcome.error)
    assert outcome.code == 0 and outcome.stderr == "", outcome.stderr[-400:]


def test_plan_leaves_out_tp_degrees_a_small_node_cannot_form(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """A GPU profile whose node holds 3 GPUs: plan tried TP 4 and 8 anyway and stopped after its
    first progress line with 'option --tp: a layout of 4 GPUs ...', an option never given.
    Those degrees are left out with a note, as degrees the model cannot be split over are."""
    data = yaml.safe_load((REPO / "hardware" / "h100-sxm.yaml").read_text(encoding="utf-8"))
    data["node"].update(gpus=3, scale_up_gpus=3)
    case = Case(kind="adversarial", label="plan-node-of-3",
                args=("plan", "--hardware", "h.yaml", "--model", "llama-3.1-70b", "--out", "r"),
                files={"h.yaml": yaml.safe_dump(data, sort_keys=False).encode()},
                expect=frozenset({0}))
    monkeypatch.chdir(tmp_path)
    check_case(case, tmp_path)
    report = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "TP 4 left out on" in report and "TP 8 left out on" in report


def test_a_reference_names_a_row_of_the_same_file_not_of_its_namesake(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`versus` and `sweep_reference` name a row of the same file: a/p.yaml and b/p.yaml share
    the stem 'p', and a row of one was compared with a row of the other."""
    data = yaml.safe_load((REPO / "workloads" / "published" /
                           "vllm-blog-p-eagle-concurrency.yaml").read_text(encoding="utf-8"))
    row = next(r for r in data["rows"] if r.get("versus"))
    ref = next(r for r in data["rows"] if r["id"] == row["versus"])
    files = {f"{folder}/p.yaml": yaml.safe_dump(dict(data, rows=[r]), sort_keys=False).encode()
             for folder, r in (("a", row), ("b", ref))}
    monkeypatch.chdir(tmp_path)
    check_case(_case("versus-namesake", "validate", "--published", "a/p.yaml", "--published",
                     "b/p.yaml", files=files, needle="field 'versus'"), tmp_path, usage_ok=False)


# --------------------------------------------------------------------------- a fourth campaign


def _engine_text(slug: str, old: str = "", new: str = "", tail: str = "") -> bytes:
    """A built-in engine YAML's text with one substring replaced and lines appended."""
    text = (REPO / "engines" / f"{slug}.yaml").read_text(encoding="utf-8")
    assert old in text
    return (text.replace(old, new, 1) + tail).encode()


SGLANG_LAUNCH = "--model-path {model}"
CASES4 = [
    # a user engine file's `speculative:` block was never read: an edited launch command, round
    # structure or family list was silently ignored (commands come from the built-in file)
    _case("engine-speculative-edited-launch", "roofline", "--engine", "e.yaml", "--tokens", "1",
          files={"e.yaml": _engine_text("sglang", SGLANG_LAUNCH, "--model {model}",
                                        "engine: sglang\n")},
          needle="field 'speculative.launch' differs from the built-in engines/sglang.yaml"),
    _case("engine-speculative-edited-named-like-a-builtin", "engines", "show", "sglang.yaml",
          files={"sglang.yaml": _engine_text("sglang", "round_structures: [single]",
                                             "round_structures: [single, multistage]")},
          needle="field 'speculative.round_structures'"),
    _case("engine-speculative-of-no-builtin", "roofline", "--engine", "mine.yaml", "--tokens",
          "1", files={"mine.yaml": _engine_text("vllm", "tp_flag:", "tp_flag: --tp\n  x_flag:")},
          needle="mine.yaml: field 'speculative' is not read from a user engine file"),
]


@pytest.mark.parametrize("name, text", [
    ("copy.yaml", _engine_text("sglang")),  # a built-in file copied to edit its terms
    ("mine.yaml", _engine_text("vllm", tail="engine: vllm\n"))])  # what `bench fit` writes
def test_a_verbatim_speculative_block_in_a_user_engine_is_accepted(
        name: str, text: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_case(Case(kind="valid", label=name, args=("roofline", "--engine", name, "--tokens",
                                                    "1"), files={name: text},
                    expect=frozenset({0})), tmp_path)


SPEED = ("speedup", "--alpha", "0.7", "--draft-cost", "0.1", "--batch", "1", "--nodes", "0,2",
         "--shape", "chain")
CASES4 += [
    # an empty path became '.': '--plot ""' named '.' ("output must end in .png"), and
    # '--configs-out ""' wrote TensorRT-LLM's file into the current folder and exited 0
    *[_case(f"empty-path-{option}", *args, option, "", needle=f"'{option}': the path is empty")
      for option, args in (("--plot", SPEED), ("--configs-out", (*REC, "--engine", "trtllm")),
                           ("--tree-out", REC), ("--ranks", REC),
                           ("--out", ("bench", "plan", "--drafter", "eagle3-llama-3.1-8b")),
                           ("--out", ("plan",)), ("--predictions", ("calibrate", "p.csv")))],
    _case("empty-path-argument", "acceptance", "rounds", " ", needle="the path is empty"),
    # an empty name meant the default (--model '' ran the default target, --weight-dtype ''
    # the model's dtype, --backend '' the first installed), or was a KeyError (--kv-dtype ''),
    # or named the current folder (--hardware '': ': is a folder')
    *[_case(f"blank-value-{option}", *args, option, value,
            needle=f"'{option}'")
      for option, args, value in (
          ("--model", SPEED, ""), ("--hardware", ("roofline",), ""),
          ("--weight-dtype", ("roofline",), ""), ("--kv-dtype", ("memory",), ""),
          ("--compute-dtype", ("roofline",), " "), ("--engine", ("roofline",), "\t"),
          ("--workload", ("speedup", "--batch", "1"), ""),
          ("--backend", ("profile", "--model", "tiny"), ""),
          ("--results", ("bench", "plan", "--drafter", "eagle3-llama-3.1-8b"), " "))],
    _case("blank-value---name", "acceptance", "fit", "m.txt", "--out", "w.yaml", "--name", "",
          files={"m.txt": METRICS.encode()}, needle="'--name': the value is empty"),
    # Python's int() and float() read other digits and '_': '--tp １' was TP 1, '--draft-cost
    # 1_0' a cost of 10, '--max-gamma ٣' a chain of 3
    *[_case(f"number-text-{option}-{value}", *args, option, value, needle=f"'{option}'")
      for option, args, value in (
          ("--tp", ("roofline",), "\uff12"), ("--alpha", SPEED[:1] + SPEED[3:], "\u0660.5"),
          ("--draft-cost", SPEED[:3] + SPEED[5:], "1_0"),
          ("--max-gamma", ("long-context", "--drafter", "eagle3-llama-3.1-8b"), "\u0663"),
          ("--repeats", ("profile", "--model", "tiny"), "1_0"),
          ("--users", ("plan",), "\uff11\uff10"))],
]

# a sweep's value given twice was computed and printed twice (--batch 1,1: two equal rows);
# --context of speedup, roofline and memory is a mix of lengths, where a repeat weighs one
CASES4 += [_case(f"list-repeat-{option}-{value}", *args, option, value,
                 needle=f"option {option}: {twice} is given twice")
           for option, args, value, twice in (
               ("--batch", SPEED[:5] + SPEED[7:], "1,1", "1"),
               ("--nodes", SPEED[:7] + SPEED[9:], "2,0,2", "2"),
               ("--tokens", ("roofline",), "1-8,4", "4"),
               ("--requests", ("memory",), "4,4", "4"),
               ("--context", ("long-context", "--drafter", "eagle3-llama-3.1-8b", "--batch", "1"),
                "1024,1024", "1,024"),
               ("--concurrency", ("bench", "plan", "--drafter", "eagle3-llama-3.1-8b"),
                "1,8,8", "8"))]



def _nested(folder: str, slug: str, **changes: object) -> bytes:
    """A built-in spec with dotted fields changed (a {value, source} leaf keeps its source)."""
    data = yaml.safe_load((REPO / folder / f"{slug}.yaml").read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        node = data
        for key in path:
            node = node[key]
        if isinstance(node.get(last), dict) and "value" in node[last]:
            node[last]["value"] = value
        else:
            node[last] = value
    return yaml.safe_dump(data, sort_keys=False).encode()


MODELS, DRAFTERS = "workloads/models", "workloads/drafters"
# numbers each in range that no model has together were priced as given (a 32-wide query
# projection of a 4096-wide model, shared experts of no width, 10**9 MTP layers, ...)
CASES4 += [_case(f"model-{label}", "roofline", "--model", "m.yaml", "--tokens", "1",
                 files={"m.yaml": _nested(MODELS, slug, **changes)}, needle=needle)
           for label, slug, changes, needle in (
               ("head-dim-1", "llama-3.1-8b", {"head_dim": 1},
                "fields 'num_attention_heads' x 'head_dim' = 32 x 1"),
               ("hidden-size-1", "llama-3.1-8b", {"hidden_size": 1}, "'hidden_size' = 1 "),
               ("hidden-size-1e9", "qwen3-8b", {"hidden_size": 10**9}, "'hidden_size'"),
               ("shared-experts-without-width", "qwen3-30b-a3b",
                {"moe__num_shared_experts": 2}, "field 'moe.num_shared_experts' = 2 needs"),
               ("shared-width-without-experts", "qwen3-30b-a3b",
                {"moe__shared_expert_intermediate_size": 1024},
                "field 'moe.shared_expert_intermediate_size'"),
               ("linear-heads-ungrouped", "qwen3-next-80b-a3b",
                {"linear_attention__num_key_heads": 3},
                "field 'linear_attention.num_value_heads' = 32 is not a multiple"),
               ("mtp-layers-1e9", "llama-3.1-8b", {"mtp_layers": 10**9}, "field 'mtp_layers'"))]
CASES4 += [_case(f"drafter-{label}", "drafters", "show", "d.yaml",
                 files={"d.yaml": _nested(DRAFTERS, slug, **changes)}, needle=needle)
           for label, slug, changes, needle in (
               ("fused-past-the-target", "eagle3-llama-3.1-8b", {"fused_target_layers": 33},
                "field 'fused_target_layers' = 33 exceeds the 32 layers"),
               ("hidden-size-1", "eagle3-llama-3.1-8b", {"hidden_size": 1},
                "'hidden_size' = 1 "))]
CASES4 += [
    # an empty spec said 'expected a mapping of fields, got NoneType'
    _case("empty-spec-file", "hardware", "show", "h.yaml", files={"h.yaml": b"# nothing\n"},
          needle="h.yaml: is empty"),
    # memory priced a drafter on the default target whatever it was made for (an EAGLE-3 for
    # Llama-3.1-8B on Qwen3-8B); every other command refuses the pair
    _case("memory-drafter-of-another-target", "memory", "--model", "qwen3-8b", "--drafter",
          "eagle3-llama-3.1-8b", needle="does not fit target qwen3-8b"),
]

BENCH = ("bench", "plan", "--drafter", "eagle3-llama-3.1-8b")
# bench plan records its specs by slug and bench fit prices its points with the built-in ones:
# a spec given by path (or 'H100-SXM', 'transferred/h100-sxm') stopped on "bench-plan.json:
# row 'plain-c1': unknown hardware", a file never written and a row the user never saw
CASES4 += [
    *[_case(f"bench-plan-{option}-by-path",
            *(("bench", "plan", option, name) if option == "--drafter" else
              (*BENCH, option, name)), files={name: text},
            needle=f"option {option}: '{name}' is not a built-in")
      for option, name, text in (
          ("--hardware", "h.yaml", (REPO / "hardware" / "h100-sxm.yaml").read_bytes()),
          ("--model", "m.yaml", (REPO / MODELS / "llama-3.1-8b.yaml").read_bytes()),
          ("--drafter", "d.yaml", (REPO / DRAFTERS / "eagle3-llama-3.1-8b.yaml").read_bytes()),
          # a user's file named like the built-in one was recorded as, and priced by, the latter
          ("--hardware", "./h100-sxm.yaml", (REPO / "hardware" / "h100-sxm.yaml").read_bytes()
           .replace(b"hbm_capacity_GB: 80", b"hbm_capacity_GB: 96")))],
    _case("bench-plan-transferred", *BENCH, "--hardware", "transferred/h100-sxm",
          needle="option --hardware: 'transferred/h100-sxm' is not a built-in"),
    # 'engine: ...' and 'concurrencies: ...' named no option
    _case("bench-plan-engine", *BENCH, "--engine", "trtllm", needle="option --engine: 'trtllm'"),
    _case("bench-plan-one-concurrency", *BENCH, "--concurrency", "5",
          needle="option --concurrency: give at least two"),
]

# calibrate options that did nothing: --tp (any value, 0 and -5 too) without the --model whose
# shapes it checks, --device (a Vidur folder) with a specsim profile
PROFILE = "\n".join(_profile_lines()).encode()
CASES4 += [_case(f"calibrate-{label}", "calibrate", "p.csv", "--out", "o.yaml", *args,
                 files={"p.csv": PROFILE}, needle=needle)
           for label, args, needle in (
               ("tp-0", ("--tp", "0"), "option --tp: must be in 1..64"),
               ("tp-without-model", ("--tp", "2"), "option --tp: 2 is the TP degree --model"),
               ("device-of-a-specsim-profile", ("--device", "a100"),
                "option --device: 'a100' picks a Vidur device folder"))]

CASES4 += [
    # acceptance weights read --alpha through float(): '０.5' was 0.5
    _case("weights-alpha-fullwidth", "acceptance", "weights", "--alpha", "\uff10.5",
          needle="option --alpha: cannot read"),
    # a list with an item left out ('1,,8', '1,8,') ran the others
    *[_case(f"list-empty-item-{value}", "roofline", "--tokens", value,
            needle="option --tokens: an empty item") for value in ("1,,8", "1,8,")],
]

# engine terms past any engine were priced as given: a per-pass host time of 1e17 s gave a
# round of 1e20 ms and 1e-17 tokens/s, exit 0
CASES4 += [_case(f"engine-{label}", "roofline", "--engine", "e.yaml", "--tokens", "1",
                 files={"e.yaml": _nested("engines", slug, **changes)}, needle=needle)
           for label, slug, changes, needle in (
               ("per-pass-1e17-s", "vllm", {"priors__per_pass_s": 1e17},
                "field 'priors.per_pass_s' must be <= 1"),
               ("kernels-per-layer-1e17", "vllm", {"priors__kernels_per_layer": 1e17},
                "field 'priors.kernels_per_layer' must be <= 10000"),
               ("unused-prior-1e17", "hf-eager", {"priors__op_host_s": 1e17},
                "field 'priors.op_host_s'"),
               ("fitted-round-1e16-s", "sglang", {"fitted__round_s__range": [0, 1e17],
                                                  "fitted__round_s__value": 1e16},
                "field 'fitted.round_s.value' must be <= 1"),
               ("eager-ops-1e17", "hf-eager", {"drafter_ops__eagle__round": 1e17},
                "field 'drafter_ops.eagle.round'"),
               ("loop-2", "hf-eager", {"drafter_ops__eagle__loop": 2},
                "field 'drafter_ops.eagle.loop' must be <= 1"))]
# an acceptance measured over a chain of 10**9 drafted tokens was read as given
CASES4.append(_case("workload-gamma-1e9", "workloads", "show", "w.yaml",
                    files={"w.yaml": _nested("workloads/scenarios", "chat",
                                             acceptance__gamma=10**9)},
                    needle="field 'acceptance.gamma' must be in 1..4,096"))

# an option given twice ran with the last value (click keeps it): '--tp 2 ... --tp 1' ran TP 1,
# '-H a100-80g-sxm --hardware h100-sxm' the H100
CASES4 += [_case(f"option-twice-{args[-2]}", *args,
                 needle=f"option {name} is given more than once")
           for name, args in (
               ("--tp", ("roofline", "--tokens", "1", "--tp", "2", "--tp", "1")),
               ("--hardware", ("roofline", "--tokens", "1", "-H", "a100-80g-sxm", "--hardware",
                               "h100-sxm")),
               ("--alpha", (*SPEED, "--alpha", "0.2")),
               ("--force", ("acceptance", "weights", "--force", "--no-force")))]

# datasheet numbers in the wrong unit (bytes for GB, FLOPS for TFLOPS) or past any GPU by
# orders of magnitude were priced as given: 8e10 GB of HBM, 1e18 us per collective
CASES4 += [_case(f"hardware-{label}", "roofline", "--hardware", "h.yaml", "--tokens", "1",
                 files={"h.yaml": _nested("hardware", "h100-sxm", **changes)},
                 needle=f"field '{field}' must be")
           for label, changes, field in (
               ("capacity-in-bytes", {"memory__hbm_capacity_GB": 8e10}, "memory.hbm_capacity_GB"),
               ("bandwidth-in-bytes", {"memory__hbm_bandwidth_GB_per_s": 3.35e12},
                "memory.hbm_bandwidth_GB_per_s"),
               ("flops-in-flops", {"compute__dense_TFLOPS__bf16": 9.894e14},
                "compute.dense_TFLOPS.bf16"),
               ("latency-1e18-us", {"interconnect__latency_us": 1e18},
                "interconnect.latency_us"),
               ("sm-count-1e9", {"compute__sm_count": 10**9}, "compute.sm_count"))]
# left over from the fourth campaign: '--tree-out sub/' wrote a file named 'sub' (the slash is
# gone once the text is a path), 'bench fit --out' took any name, and a ranks file of one word
# was "ranks list is empty"
CASES4 += [
    _case("tree-out-folder-slash", *REC, "--tree-out", "sub/",
          needle="'--tree-out': 'sub/' ends in '/'"),
    _case("bench-fit-out-suffix", "bench", "fit", ".", "--results", ".", "--out", "engine",
          needle="must end in .yaml"),
    _case("ranks-one-word", *REC, "--ranks", "r.txt", files={"r.txt": b"hello\n"},
          needle="r.txt: no numbers, only 'hello'"),
]


@pytest.mark.parametrize("case", CASES4, ids=[c.label for c in CASES4])
def test_fourth_campaign_input_is_one_line_and_exit_2(case: Case, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_case(case, tmp_path, usage_ok=False)


FIFO_COMMANDS = [
    # opening a named pipe with no writer waited forever (ranks, config.json, metrics, .npz);
    # a spec path said 'no such hardware file' of a pipe that exists
    ("recommend", "--drafter", "eagle3-llama-3.1-8b", "--batch", "1", "--ranks", "F.json"),
    ("models", "import", "F.json", "--out", "o.yaml"),
    ("acceptance", "fit", "F.txt", "--out", "o.yaml"),
    ("acceptance", "rounds", "F.npz"),
    ("roofline", "--hardware", "F.yaml"),
]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("args", FIFO_COMMANDS, ids=[a[0] + "-" + a[-1] for a in FIFO_COMMANDS])
def test_a_named_pipe_is_not_a_file_and_is_never_waited_on(
        args: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = next(a for a in args if a.startswith("F."))
    os.mkfifo(tmp_path / name)
    monkeypatch.chdir(tmp_path)
    outcome = run_case(_case("fifo", *args, needle=""))
    assert outcome.error is None, repr(outcome.error)
    lines = outcome.stderr.strip().splitlines()
    assert outcome.code == 2 and len(lines) == 1, outcome.stderr[-400:]
    assert f"{name}: not a regular file" in lines[0], lines[0]
    assert not (tmp_path / "o.yaml").exists()


def test_an_empty_spec_name_is_refused_by_the_library_too() -> None:
    """A notebook's load_hardware('') read the current folder (': is a folder')."""
    from specsim.errors import SpecError
    from specsim.specs.dtypes import Precision
    from specsim.specs.hardware import load_hardware
    from specsim.specs.models import load_model

    with pytest.raises(SpecError, match="empty hardware name"):
        load_hardware("")
    with pytest.raises(SpecError, match="empty model name"):
        load_model("  ")
    with pytest.raises(SpecError, match="kv_dtype: '' is not one of"):
        Precision(kv_dtype="")


def test_negative_zero_options_read_as_zero(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """'--alpha -0.0 --draft-cost -0' printed 'option --alpha -0 ... draft cost -0'."""
    monkeypatch.chdir(tmp_path)
    outcome = run_case(_case("negative-zero", *SPEED[:1], "--alpha", "-0.0", "--draft-cost",
                             "-0", *SPEED[5:], needle=""))
    assert outcome.code == 0 and outcome.error is None, outcome.stderr[-400:]
    setup = outcome.stdout.splitlines()[0]
    assert "option --alpha 0 " in setup and "draft cost 0 per pass" in setup, setup


def test_a_context_mix_may_repeat_a_length(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """--context of roofline is a mix the batch spreads over evenly: 1024,1024 is allowed."""
    monkeypatch.chdir(tmp_path)
    check_case(Case(kind="valid", label="context-mix", args=("roofline", "--tokens", "1",
                                                             "--context", "1024,1024,4096"),
                    expect=frozenset({0})), tmp_path)


def test_negative_zero_in_a_spec_reads_as_zero(tmp_path: Path) -> None:
    """A YAML '-0.0' stayed -0.0 and printed as '-0' (engines show: per_pass_s -0)."""
    from specsim.specs.engines import load_engine

    path = tmp_path / "e.yaml"
    path.write_bytes(_nested("engines", "vllm", priors__per_pass_s=-0.0))
    assert math.copysign(1.0, load_engine(str(path)).priors["per_pass_s"]) == 1.0


def test_memory_defaults_the_target_to_the_drafters(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """memory --drafter D without --model: D's own target, as speedup and recommend do."""
    monkeypatch.chdir(tmp_path)
    outcome = run_case(_case("memory-default", "memory", "--drafter", "eagle3-llama-3.1-8b",
                             needle=""))
    assert outcome.code == 0 and outcome.error is None, outcome.stderr[-400:]
    assert outcome.stdout.startswith("setup: llama-3.1-8b on h100-sxm; drafter eagle3-llama")


def test_bench_plan_records_a_slug_given_in_any_case(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """'--hardware H100-SXM' was recorded as typed and refused by its own plan's rows."""
    monkeypatch.chdir(tmp_path)
    outcome = run_case(_case("bench-case", *BENCH, "--hardware", "H100-SXM", "--results",
                             "my results", needle=""))
    assert outcome.code == 0 and outcome.error is None, outcome.stderr[-400:]
    plan = json.loads((tmp_path / "bench-plan" / "bench-plan.json").read_text())
    assert plan["hardware"] == "h100-sxm"
    assert "mkdir -p 'my results'" in outcome.stdout  # a folder name quoted for the shell


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("kind", ["pipe", "symlink", "dangling-symlink"])
def test_force_never_renames_an_output_over_a_pipe_or_a_link(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An output is written to a temporary file and renamed over its name: with --force that
    replaced a named pipe, a device (as root, /dev/null became a regular file: not tested
    here for that reason) or a symbolic link itself by a regular file."""
    out = tmp_path / "w.yaml"
    real = tmp_path / "real.yaml"
    real.write_bytes(b"old: 1\n")
    if kind == "pipe":
        os.mkfifo(out)
    else:
        out.symlink_to(real if kind == "symlink" else tmp_path / "nowhere" / "x.yaml")
    (tmp_path / "m.txt").write_text(METRICS)
    monkeypatch.chdir(tmp_path)
    outcome = run_case(_case("output-node", "acceptance", "fit", "m.txt", "--out", "w.yaml",
                             "--force", needle=""))
    assert outcome.error is None, repr(outcome.error)
    lines = outcome.stderr.strip().splitlines()
    assert outcome.code == 2 and len(lines) == 1, outcome.stderr[-400:]
    assert "w.yaml: " in lines[0] and ("symbolic link" in lines[0]
                                      or "not a regular file" in lines[0]), lines[0]
    assert out.is_fifo() if kind == "pipe" else out.is_symlink()
    assert real.read_bytes() == b"old: 1\n"


# --------------------------------------------------------------------------- a fifth campaign


def _bench_plan(*, point: dict[str, object] | None = None, **changes: object) -> bytes:
    """What `bench plan` writes (vLLM, Llama-3.1-8B) with top-level fields and the second
    point's fields changed, as JSON bytes."""
    from specsim.measurement.bench import make_bench_plan

    data = make_bench_plan(engine="vllm", model="llama-3.1-8b", hardware="h100-sxm",
                           drafter="eagle3-llama-3.1-8b").to_json()
    data.update(changes)
    data["points"][1].update(point or {})
    return json.dumps(data).encode()


# a hand-edited bench-plan.json: engine_version 5 or servers as a list was an AttributeError,
# drafter null or a point without draft_tokens a KeyError, a list as a point's id a TypeError
# (unhashable); a string or -1 as a count was carried into the fit
CASES5 = [_case(f"bench-plan-json-{label}", "bench", "fit", "b", "--results", "b", "--out",
                "e.yaml", files={"b/bench-plan.json": _bench_plan(**changes)},
                needle=f"bench-plan.json: field '{field}'")
          for label, changes, field in (
              ("engine-version-int", {"engine_version": 5}, "engine_version"),
              ("servers-list", {"servers": [1]}, "servers"),
              ("drafter-null", {"drafter": None}, "drafter"),
              ("input-tokens-string", {"input_tokens": "x"}, "input_tokens"),
              ("point-draft-tokens-null", {"point": {"draft_tokens": None}},
               "points[1].draft_tokens"),
              ("point-id-list", {"point": {"id": ["a"]}}, "points[1].id"),
              ("point-server-unknown", {"point": {"server": "elsewhere"}}, "points[1].server"),
              ("point-concurrency-negative", {"point": {"concurrency": -1}},
               "points[1].concurrency"))]


# a file's path typed with a trailing '/' (which names a folder): pathlib drops the slash, and
# '--plot x.png/', '--out m.yaml/' or '--predictions p.csv/' wrote a file of that name, exit 0
CASES5 += [_case(f"file-path-slash-{args[0]}-{option}", *args, option, name, files=files,
                 needle=f"'{option}': '{name}' ends in '/', which names a folder")
           for args, option, name, files in (
               (SPEED, "--plot", "x.png/", {}),
               (("acceptance", "weights"), "--plot", "w.svg/", {}),
               (("models", "import", "c.json"), "--out", "m.yaml/",
                {"c.json": (HF_CONFIGS / "gemma-2-9b.json").read_bytes()}),
               (("acceptance", "fit", "m.txt"), "--out", "w.yaml/", {"m.txt": METRICS.encode()}),
               (("calibrate", "p.csv", "--out", "o.yaml"), "--predictions", "p.csv/",
                {"p.csv": PROFILE}),
               (REC, "--ranks", "r.json/", {"r.json": b"[0.5, 0.2]"}))]


def test_every_folder_path_is_a_path_parameter_of_its_command() -> None:
    """FOLDER_PATHS names the path parameters that take a trailing '/' (a folder): a renamed
    one would refuse 'bench-results/' as a file's path."""
    import typer

    from specsim.cli import app
    from specsim.cli.common import FOLDER_PATHS

    root = typer.main.get_command(app)
    for words, names in FOLDER_PATHS.items():
        command: Any = root
        for word in words.split():
            command = command.commands[word]  # type: ignore[attr-defined]
        kinds = {p.name: getattr(p.type, "name", "") for p in command.params}
        assert all(kinds.get(name) == "path" for name in names), (words, kinds)


def test_a_folder_path_may_end_in_a_slash(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    outcome = run_case(_case("bench-plan-slash", *BENCH, "--out", "bp/", "--results", "res/",
                             needle=""))
    assert outcome.code == 0 and outcome.error is None, outcome.stderr[-400:]
    assert (tmp_path / "bp" / "bench-plan.json").is_file()


# a number as close to 0 as a float gets (5e-324) where the model divides by it: HBM bandwidth,
# dense TFLOPS or a fitted efficiency priced a pass at inf ms, with numpy's overflow warnings
# on stderr, exit 0 (1e-300 was already finite; 0 and negatives were refused)
CASES5 += [_case(f"hardware-tiny-{label}", "roofline", "--hardware", "h.yaml", "--tokens", "1",
                 files={"h.yaml": _nested(folder, slug, **{field.replace(".", "__"): value})},
                 needle=f"h.yaml: field '{field}' = {value!r} is not 0 and under 1e-100")
           for label, folder, slug, field, value in (
               ("bandwidth", "hardware", "h100-sxm", "memory.hbm_bandwidth_GB_per_s", 5e-324),
               ("tflops", "hardware", "h100-sxm", "compute.dense_TFLOPS.bf16", 1e-305),
               ("gemm-efficiency", "hardware/calibrated", "a100-80g-sxm-vidur",
                "efficiency.gemm.bandwidth", 5e-324))]


# bench plan --results naming a file (or a path under one) wrote the plan, exit 0; the printed
# 'mkdir -p f' and every client writing into it failed only later, on the GPU machine
CASES5 += [_case(f"bench-plan-results-{label}", *BENCH, "--results", name,
                 files={"f": b"a file\n"}, needle=needle)
           for label, name, needle in (("file", "f", "f: --results is a file"),
                                       ("under-a-file", "f/sub", "--results is under the file f"))]


# an output named like the command's input: with --force, the config.json being imported, the
# metrics being fitted or the profile being calibrated was replaced by the output, exit 0
CASES5 += [_case(f"output-is-the-input-{args[0]}-{args[1]}", *args, "--force", files=files,
                 needle=f"{name}: is the input file")
           for args, name, files in (
               (("models", "import", "c.yaml", "--out", "c.yaml"), "c.yaml",
                {"c.yaml": (HF_CONFIGS / "gemma-2-9b.json").read_bytes()}),
               (("drafters", "import", "c.yaml", "--target", "llama-3.1-8b", "--out", "./c.yaml"),
                "c.yaml", {"c.yaml": (REPO / "tests" / "fixtures" / "drafter_configs" /
                                      "eagle3-llama3.1-8b.json").read_bytes()}),
               (("acceptance", "fit", "m.yaml", "--out", "m.yaml"), "m.yaml",
                {"m.yaml": METRICS.encode()}),
               (("calibrate", "p.yaml", "--out", "p.yaml"), "p.yaml", {"p.yaml": PROFILE}),
               (("calibrate", "p.csv", "--out", "o.yaml", "--predictions", "p.csv"), "p.csv",
                {"p.csv": PROFILE}))]


@pytest.mark.parametrize("case", CASES5, ids=[c.label for c in CASES5])
def test_fifth_campaign_input_is_one_line_and_exit_2(case: Case, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_case(case, tmp_path, usage_ok=False)

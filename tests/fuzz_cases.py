"""Seeded generator of malformed inputs for the CLI (issue 10), and an in-process runner.

Each `Case` is one command line plus the files it needs, with the exit codes a correct CLI may
give: {2} for input that is invalid by construction (NaN, infinity, 1e308, a string or a list
where a number goes, a negative count, binary bytes, an alias bomb, an existing output without
--force, ...), {0} for input that is valid by construction (a spec saved as UTF-16 with a BOM,
a small in-range option value), and {0, 2} only where validity depends on the field (deleting
or nulling a field that may be optional, zero where a count may be zero). The classes follow the
issue's campaign: spec YAML per kind, file-level corruption, config.json, profile CSVs, Vidur
folders, vLLM metrics, command-line values and output paths.

`run_case` calls `specsim.cli.main` in this process with sys.argv patched (no subprocess), so a
thousand cases take seconds; it returns the exit code, stdout, stderr and any uncaught
exception other than SystemExit.

Why this corpus is not rewritten as hypothesis strategies: it is a fixed regression set, each
case with the text its error line must contain (`needle`), kept stable across runs and
versions; hypothesis (tests/test_properties.py) searches around it with shrinking, against the
same contract. Turning the corpus into strategies would lose the per-case needles and make the
set of cases depend on the search; benchmarks/adversarial.py reuses these generators under
fresh seeds.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
SEED = 20_240_610

INVALID, VALID, EITHER = frozenset({2}), frozenset({0}), frozenset({0, 2})


@dataclass(frozen=True)
class Case:
    """One malformed (or valid) input: files to lay out, then `specsim ARGS`."""

    kind: str  # the class of input, for counting
    label: str  # what was done to it
    args: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)  # relative path -> contents
    folders: tuple[str, ...] = ()
    expect: frozenset[int] = INVALID
    needle: str = ""  # what the error line must name (file, field or option)


# --------------------------------------------------------------------------- spec YAML


def _builtin(kind_dir: str, slug: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / kind_dir / f"{slug}.yaml").read_text(encoding="utf-8"))


SPEC_KINDS: dict[str, tuple[str, list[str], Callable[[str], tuple[str, ...]]]] = {
    # kind: (folder, built-ins to mutate, command that loads the file F)
    "hardware": ("hardware", ["h100-sxm", "a100-80g-sxm", "mi300x", "l40s"],
                 lambda f: ("roofline", "--hardware", f, "--tokens", "1")),
    "model": ("workloads/models", ["llama-3.1-8b", "qwen3-8b", "mixtral-8x7b", "deepseek-v3",
                                   "qwen3-next-80b-a3b"],
              lambda f: ("roofline", "--model", f, "--tokens", "1")),
    "drafter": ("workloads/drafters", ["eagle3-llama-3.1-8b", "dflash-qwen3-8b",
                                       "medusa-vicuna-7b", "qwen3-0.6b-for-qwen3-8b"],
                lambda f: ("drafters", "show", f)),
    "workload": ("workloads/scenarios", ["chat-dflash-qwen3-8b", "math-dflash-qwen3-8b"],
                 lambda f: ("speedup", "--workload", f, "--draft-cost", "0.1", "--batch", "1",
                            "--nodes", "0,2", "--shape", "chain")),
}

# Replacements for a numeric leaf that no spec field accepts.
BAD_NUMBERS: list[tuple[str, object]] = [
    ("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf), ("1e308", 1e308),
    ("huge-int", 10**40), ("negative", -3), ("string", "many"), ("list", [1, 2]),
    ("mapping", {"x": 1}), ("bool", True),
]
# Replacements whose validity depends on the field.
MAYBE: list[tuple[str, object]] = [("zero", 0), ("null", None)]


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, value) of every leaf under mappings and lists (sources included)."""
    if isinstance(node, dict):
        if set(node) == {"value", "source"}:
            return [(path + ("value",), node["value"]), (path + ("source",), node["source"])]
        return [leaf for k, v in node.items() for leaf in _leaves(v, path + (k,))]
    if isinstance(node, list):
        return [leaf for i, v in enumerate(node) for leaf in _leaves(v, path + (i,))]
    return [(path, node)]


def set_at(data: Any, path: tuple[Any, ...], value: object, *, delete: bool = False) -> None:
    for key in path[:-1]:
        data = data[key]
    if delete:
        del data[path[-1]]
    else:
        data[path[-1]] = value


def _dump(data: Any) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def spec_cases(rng: random.Random, count: int) -> list[Case]:
    """Built-in specs with one leaf deleted, mistyped, non-finite, huge, negative, ..."""
    cases = []
    kinds = list(SPEC_KINDS)
    for i in range(count):
        kind = kinds[i % len(kinds)]
        folder, slugs, command = SPEC_KINDS[kind]
        data = _builtin(folder, rng.choice(slugs))
        path, value = rng.choice(_leaves(data))
        dotted = ".".join(str(p) for p in path)
        in_list = isinstance(path[-1], int)
        if path[-1] == "source" or (isinstance(value, str) and dotted.endswith("source")):
            label, new = rng.choice([("empty-source", ""), ("number-source", 5),
                                     ("list-source", ["a"]), ("blank-source", "   ")])
            expect = INVALID
        elif _is_number(value):
            pool = BAD_NUMBERS if in_list else BAD_NUMBERS + MAYBE + [("delete", None)]
            label, new = rng.choice(pool)
            expect = EITHER if label in ("zero", "null", "delete") else INVALID
            if label == "negative" and value == 0:
                label, new = "negative", -1
        elif isinstance(value, str):
            label, new = rng.choice([("number", 7), ("list", ["x"]), ("empty", ""),
                                     ("mapping", {"a": 1}), ("delete", None)])
            expect = EITHER if label == "delete" else INVALID
            if label == "delete" and in_list:
                label, new, expect = "number", 7, INVALID
        else:  # booleans and other scalars
            label, new = rng.choice([("string", "yes-ish"), ("number", 3), ("list", [True])])
            expect = INVALID
        mutated = copy.deepcopy(data)
        set_at(mutated, path, new, delete=label == "delete")
        name = f"{kind}-{i}.yaml"
        cases.append(Case(kind=f"spec:{kind}", label=f"{dotted}:{label}",
                          args=command(name), files={name: _dump(mutated)}, expect=expect,
                          needle=name))
    return cases


def misspelled_key_cases(rng: random.Random, count: int) -> list[Case]:
    """A misspelled optional key (an extra letter) must be named, not ignored."""
    cases = []
    extras = {"hardware": ["vendor"], "model": ["tie_word_embeddings", "qk_norm", "mtp_layers"],
              "drafter": ["own_lm_head", "block_size"], "workload": ["context"]}
    for i in range(count):
        kind = list(SPEC_KINDS)[i % len(SPEC_KINDS)]
        folder, slugs, command = SPEC_KINDS[kind]
        data = _builtin(folder, rng.choice(slugs))
        key = rng.choice(extras[kind])
        typo = key[:-1] + rng.choice("sxz") + key[-1]
        data[typo] = data.get(key, 1) if key in data else 1
        name = f"typo-{i}.yaml"
        cases.append(Case(kind="spec:misspelled-key", label=typo, args=command(name),
                          files={name: _dump(data)}, needle=typo))
    return cases


def file_cases(rng: random.Random, count: int) -> list[Case]:
    """Whole-file corruption of spec YAML: empty, binary, encodings, bombs, tags, nesting."""
    base = (REPO / "hardware" / "h100-sxm.yaml").read_text(encoding="utf-8")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    makers: list[tuple[str, Callable[[], bytes], frozenset[int]]] = [
        ("empty", lambda: b"", INVALID),
        ("whitespace", lambda: b"  \n\n", INVALID),
        ("binary", lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))),
         INVALID),
        ("nul-bytes", lambda: b"name: x\x00\x00\n", INVALID),
        ("latin-1", lambda: base.replace("NVIDIA", "NVIDIA\u00e9").encode("latin-1",
                                                                          "replace"), INVALID),
        ("utf-16-bom", lambda: base.encode("utf-16"), VALID),
        ("utf-8-bom", lambda: b"\xef\xbb\xbf" + base.encode("utf-8"), VALID),
        ("utf-16-no-bom", lambda: base.encode("utf-16-le"), INVALID),
        ("alias-bomb", lambda: bomb.encode(), INVALID),
        ("python-tag", lambda: b"name: !!python/object/apply:os.system ['echo hi']\n", INVALID),
        ("python-name", lambda: b"name: !!python/name:os.system\n", INVALID),
        ("duplicate-key", lambda: (base + "\nname: Other GPU\n").encode(), INVALID),
        ("deep-flow", lambda: ("name: " + "[" * rng.randrange(65, 5000)).encode(), INVALID),
        ("deep-closed", lambda: ("x: " + "[" * 3000 + "]" * 3000 + "\n").encode(), INVALID),
        ("deep-block", lambda: "".join(f"{'  ' * d}k{d}:\n" for d in range(200)).encode(),
         INVALID),
        ("top-list", lambda: b"- 1\n- 2\n", INVALID),
        ("top-scalar", lambda: b"42\n", INVALID),
        ("unclosed", lambda: b"name: [unclosed\n", INVALID),
        ("tab-indent", lambda: b"memory:\n\thbm: 1\n", INVALID),
        ("truncated", lambda: base[: rng.randrange(10, len(base) // 2)].encode(), INVALID),
        ("huge-file", lambda: b"# " + b"x" * (5 * 2**20) + b"\n", INVALID),
        ("non-string-key", lambda: (base + "\n? [a, b]\n: 1\n").encode(), INVALID),
    ]
    commands = [lambda f: ("roofline", "--hardware", f, "--tokens", "1"),
                lambda f: ("roofline", "--model", f, "--tokens", "1"),
                lambda f: ("drafters", "show", f),
                lambda f: ("hardware", "show", f),
                lambda f: ("models", "show", f),
                lambda f: ("recommend", "--workload", f, "--batch", "1")]
    cases = []
    for i in range(count):
        label, make, expect = makers[i % len(makers)]
        command = commands[(i // len(makers)) % len(commands)]
        is_hw = command("F")[1:3] == ("--hardware", "F") or command("F")[0] == "hardware"
        if expect == VALID and not is_hw:
            command = commands[0]  # the valid encodings are of a hardware file
        name = f"file-{i}.yaml"
        cases.append(Case(kind="file", label=label, args=command(name), files={name: make()},
                          expect=expect, needle=name))
    for i, (label, setup) in enumerate([("folder", "dir"), ("missing", "none")] * 8):
        name = f"path-{i}.yaml"
        command = commands[i % len(commands)]
        cases.append(Case(kind="file", label=label, args=command(name),
                          folders=(name,) if setup == "dir" else (), needle=name))
    return cases


# --------------------------------------------------------------------------- config.json

LLAMA_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
    "vocab_size": 128256, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}
CONFIG_REQUIRED = ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "vocab_size")


def config_cases(rng: random.Random, count: int) -> list[Case]:
    """A Llama config.json with one key broken, or the file corrupted; `models import`."""
    cases = []
    for i in range(count):
        config = copy.deepcopy(LLAMA_CONFIG)
        key = rng.choice(list(config))
        choice = rng.randrange(14)
        expect = INVALID
        if choice < 9 and key not in ("tie_word_embeddings", "torch_dtype", "architectures"):
            label, new = rng.choice([("zero", 0), ("negative", -8), ("nan", math.nan),
                                     ("inf", math.inf), ("huge", 10**30), ("string", "big"),
                                     ("list", [1]), ("null", None), ("float", 1e308)])
            config[key] = new
            if label == "null" and key == "num_key_value_heads":
                expect = EITHER  # absent KV heads means as many as the query heads
            text = json.dumps(config).encode()
        elif choice < 10:
            label = f"delete-{key}"
            del config[key]
            expect = INVALID if key in CONFIG_REQUIRED else EITHER
            text = json.dumps(config).encode()
        elif choice < 11:
            label = "deep-nesting"
            text = ('{"a": ' + "[" * rng.randrange(100, 20000) + "]" * 0).encode()
        elif choice < 12:
            label = rng.choice(["binary", "latin-1", "empty", "list"])
            text = {"binary": bytes(rng.randrange(256) for _ in range(64)),
                    "latin-1": '{"architectures": ["Llama\u00e9"]}'.encode("latin-1"),
                    "empty": b"", "list": b"[1, 2]"}[label]
        elif choice < 13:
            label = "huge-int-literal"
            config["hidden_size"] = 0
            text = json.dumps(config).replace('"hidden_size": 0',
                                              '"hidden_size": ' + "9" * 5000).encode()
        else:
            label = "valid-utf-16"
            text = json.dumps(config).encode("utf-16")
            expect = VALID
        name = f"config-{i}.json"
        cases.append(Case(kind="config.json", label=label,
                          args=("models", "import", name, "--out", f"out-{i}.yaml"),
                          files={name: text}, expect=expect, needle=name))
    return cases


# --------------------------------------------------------------------------- profiles

PROFILE_HEADER = ("device,backend,model,tp,op,op_class,dtype,m,k,n,count,batch,context,"
                  "queries,mask,time_median_s,time_p10_s,time_p90_s,repeats")
PROFILE_ROW = "cpu,numpy,tiny,1,qkv_proj,gemm,fp32,{m},256,512,1,0,0,0,none,{t},{lo},{hi},5"
TIME_COLUMNS = (15, 16, 17, 18)


def _profile_lines() -> list[str]:
    rows = [PROFILE_ROW.format(m=m, t=f"{2e-5 * m:.3g}", lo=f"{1.8e-5 * m:.3g}",
                               hi=f"{2.2e-5 * m:.3g}") for m in (1, 2, 4, 8, 16, 32)]
    return [PROFILE_HEADER, *rows]


def profile_cases(rng: random.Random, count: int) -> list[Case]:
    """Profile CSVs with a bad time cell, a missing column, or corrupt bytes; `calibrate`."""
    cases = []
    for i in range(count):
        lines = _profile_lines()
        choice = rng.randrange(6)
        if choice < 3:
            row = rng.randrange(1, len(lines))
            cells = lines[row].split(",")
            column = rng.choice(TIME_COLUMNS)
            label, new = rng.choice([("nan", "nan"), ("inf", "inf"), ("negative", "-1e-5"),
                                     ("text", "fast"), ("huge", "1e308"), ("empty", ""),
                                     ("huge-int", "9" * 400)])
            cells[column] = new
            lines[row] = ",".join(cells)
            label = f"{PROFILE_HEADER.split(',')[column]}:{label}"
            text = "\n".join(lines).encode()
        elif choice < 4:
            column = rng.randrange(len(PROFILE_HEADER.split(",")))
            label = f"drop-column-{column}"
            text = "\n".join(",".join(c for j, c in enumerate(line.split(",")) if j != column)
                             for line in lines).encode()
        elif choice < 5:
            label = rng.choice(["binary", "latin-1", "empty", "header-only", "utf-16-no-bom"])
            text = {"binary": bytes(rng.randrange(1, 256) for _ in range(300)),
                    "latin-1": "\n".join(lines).replace("cpu", "cp\u00e9").encode("latin-1"),
                    "empty": b"", "header-only": PROFILE_HEADER.encode(),
                    "utf-16-no-bom": "\n".join(lines).encode("utf-16-le")}[label]
        else:
            label = rng.choice(["folder-empty", "folder-bad-csv"])
            name = f"vidur-{i}"
            files = {} if label == "folder-empty" else {
                f"{name}/compute/a100/mlp.csv": bytes(rng.randrange(256) for _ in range(200)),
                f"{name}/compute/a100/attention.csv": b"x,y\n1,2\n"}
            cases.append(Case(kind="vidur-folder", label=label,
                              args=("calibrate", name, "--format", "vidur", "--out",
                                    f"o-{i}.yaml"),
                              files=files, folders=(f"{name}/compute",), needle=name))
            continue
        name = f"profile-{i}.csv"
        cases.append(Case(kind="profile-csv", label=label,
                          args=("calibrate", name, "--hardware", "h100-sxm", "--out",
                                f"o-{i}.yaml"),
                          files={name: text}, needle=name))
    return cases


METRICS = """\
vllm:spec_decode_num_drafts_total{engine="0"} 200
vllm:spec_decode_num_draft_tokens_total{engine="0"} 600
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 300
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 160
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 100
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="2"} 40
"""


def metrics_cases(rng: random.Random, count: int) -> list[Case]:
    """vLLM /metrics pages with a bad value, label or encoding; `acceptance fit`."""
    cases = []
    lines = METRICS.splitlines()
    for i in range(count):
        text_lines = list(lines)
        row = rng.randrange(len(text_lines))
        choice = rng.randrange(4)
        if choice < 2:
            label, new = rng.choice([("huge", "1e308"), ("negative", "-5"), ("nan", "NaN"),
                                     ("inf", "+Inf"), ("text", "many"), ("huge-int", "9" * 400),
                                     ("above-drafts", "100000")])
            head = text_lines[row].rsplit(" ", 1)[0]
            text_lines[row] = f"{head} {new}"
            if label == "above-drafts" and row in (1, 2):
                label = "above-drafts-total"
            text = "\n".join(text_lines).encode()
        elif choice < 3:
            label = rng.choice(["unterminated-quote", "missing-position", "bad-position"])
            fix = {"unterminated-quote": ('position="0"}', 'position="0}'),
                   "missing-position": (',position="0"', ""),
                   "bad-position": ('position="0"', 'position="-1"')}[label]
            text = METRICS.replace(*fix).encode()
        else:
            label = rng.choice(["binary", "latin-1", "empty", "drop-drafts", "no-positions"])
            text = {"binary": bytes(rng.randrange(256) for _ in range(300)),
                    "latin-1": (METRICS + "# caf\u00e9\n").encode("latin-1"), "empty": b"",
                    "drop-drafts": "\n".join(lines[1:]).encode(),
                    "no-positions": "\n".join(lines[:3]).encode()}[label]
        name = f"metrics-{i}.txt"
        cases.append(Case(kind="vllm-metrics", label=label,
                          args=("acceptance", "fit", name, "--out", f"w-{i}.yaml"),
                          files={name: text}, needle=name))
    return cases


# --------------------------------------------------------------------------- options

LIST_OPTIONS = {
    "--tokens": ("roofline",), "--context": ("roofline", "--tokens", "1"),
    "--requests": ("memory",),
    "--batch": ("speedup", "--alpha", "0.7", "--draft-cost", "0.1", "--nodes", "0,2"),
    "--nodes": ("speedup", "--alpha", "0.7", "--draft-cost", "0.1", "--batch", "1"),
}
BAD_LISTS = ["1-100000000", "0-99999999999999999999", "1,,x", "nan", "-1", "1e999", "5-1",
             "0-10:0", "0-10:-2", "1;2", "", ",", "1-", "-", "x-y", "1-2-3", "0x10", "1.5",
             "99999999999999999999999", "1," * 70000, "0-65536,0-65536", "inf", "１"]
SCALAR_OPTIONS = {
    "--tp": (("roofline", "--tokens", "1"), ["0", "-2", "3", "1000", "nan", "x", "1e9",
                                             "99999999999999999999"]),
    "--alpha": (("speedup", "--draft-cost", "0.1", "--batch", "1", "--nodes", "0,2"),
                ["nan", "inf", "-0.1", "1.5", "x", "-inf", "1e308"]),
    "--draft-cost": (("speedup", "--alpha", "0.7", "--batch", "1", "--nodes", "0,2"),
                     ["nan", "inf", "-1", "-0.0001", "1e308", "x", "1000"]),
    "--max-nodes": (("recommend", "--batch", "1"), ["-1", "100000", "nan", "1e9", "x"]),
    "--queries": (("roofline", "--tokens", "1"), ["0", "-1", "1000000", "x", "nan"]),
    "--memory-fraction": (("memory",), ["0", "-0.5", "1.5", "nan", "inf", "x"]),
    "--min-tokens-per-s-per-user": (("recommend", "--batch", "1"), ["nan", "-1", "inf", "x"]),
    "--hardware": (("roofline", "--tokens", "1"), ["h100", "h900", "", "../hardware",
                                                   "x" * 5000, "H100-SXM5"]),
    "--model": (("roofline", "--tokens", "1"), ["lama-3.1-8b", "qwen3-8", "gpt-5", "",
                                                "llama-3.1-70B-instruct"]),
    "--weight-dtype": (("roofline", "--tokens", "1"), ["fp12", "BF16x", "nan"]),
    "--kv-dtype": (("roofline", "--tokens", "1"), ["fp12", "int3"]),
    "--shape": (("speedup", "--alpha", "0.7", "--draft-cost", "0.1", "--batch", "1"),
                ["ring", "", "CHAINS"]),
    "--repeats": (("profile", "--model", "tiny", "--out", "p.csv"), ["0", "-5", "1e9",
                                                                     "99999999"]),
}
VALID_OPTIONS = [
    ("roofline", "--tokens", "1,8", "--context", "0,1024"),
    ("roofline", "--hardware", "H100-SXM", "--model", "Llama-3.1-8B", "--tokens", "1"),
    ("memory", "--requests", "1-4", "--tp", "2", "--model", "llama-3.1-8b"),
    ("speedup", "--alpha", "0.7", "--draft-cost", "0", "--batch", "1", "--nodes", "0-4",
     "--shape", "chain"),
    ("speedup", "--alpha", "1", "--draft-cost", "0.05", "--batch", "4096", "--nodes", "0,1",
     "--shape", "chain"),
    ("roofline", "--tokens", "0-1024:512"),
]


def option_cases(rng: random.Random, count: int) -> list[Case]:
    """Bad list and scalar option values, and a few valid ones (exit 0)."""
    cases: list[Case] = []
    for i in range(count):
        if i % 40 == 0:
            args = VALID_OPTIONS[(i // 40) % len(VALID_OPTIONS)]
            cases.append(Case(kind="options", label="valid", args=args, expect=VALID))
            continue
        if rng.random() < 0.5:
            option = rng.choice(list(LIST_OPTIONS))
            value = rng.choice(BAD_LISTS)
            args = (*LIST_OPTIONS[option], option, value)
        else:
            option = rng.choice(list(SCALAR_OPTIONS))
            base, values = SCALAR_OPTIONS[option]
            value = rng.choice(values)
            args = (*base, option, value)
        needle = "" if option in ("--hardware", "--model") else option
        cases.append(Case(kind="options", label=f"{option}={value[:20]!r}", args=args,
                          needle=needle))
    return cases


def output_cases(rng: random.Random, count: int) -> list[Case]:
    """Output paths: existing files without --force, folders, paths under a file, suffixes."""
    existing = {"taken.png": b"old plot", "taken.yaml": b"old: yaml\n", "taken.csv": b"old\n",
                "afile": b"a file\n", "name": b"no suffix\n"}
    speed = ("speedup", "--alpha", "0.7", "--draft-cost", "0.1", "--batch", "1", "--nodes",
             "0,2", "--shape", "chain", "--plot")
    imp = ("models", "import", "cfg.json", "--out")
    fit = ("acceptance", "fit", "m.txt", "--out")
    prof = ("profile", "--model", "tiny", "--repeats", "1", "--warmup", "0", "--out")
    bad = [
        (speed, "taken.png"), (speed, "name"), (speed, "plot"), (speed, "plot.jpg2"),
        (speed, "folder"), (speed, "afile/plot.png"), (speed, "folder/"),
        (imp, "taken.yaml"), (imp, "folder"), (imp, "afile/x.yaml"), (imp, "out.json"),
        (fit, "taken.yaml"), (fit, "afile/w.yaml"), (fit, "folder"),
        (prof, "taken.csv"), (prof, "afile/p.csv"), (prof, "folder"), (prof, "p.txt"),
    ]
    cfg = json.dumps(LLAMA_CONFIG).encode()
    cases = []
    for i in range(count):
        base, out = bad[i % len(bad)]
        files = dict(existing, **{"cfg.json": cfg, "m.txt": METRICS.encode()})
        cases.append(Case(kind="output-path", label=f"{base[0]}:{out}", args=(*base, out),
                          files=files, folders=("folder",), needle=out.rstrip("/")))
    return cases


# --------------------------------------------------------------------------- newer commands

def _npz(**arrays: Any) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    return buffer.getvalue()


def _probs(rng: random.Random, rollouts: int = 2, positions: int = 3, vocab: int = 4) -> Any:
    import numpy as np

    gen = np.random.default_rng(rng.randrange(2**32))
    p = gen.random((rollouts, positions, vocab)) + 0.05
    return p / p.sum(axis=-1, keepdims=True)


def _bad_probs(rng: random.Random) -> tuple[str, bytes]:
    """A target-or-draft .npz that is wrong in one way (value, shape, dtype or bytes)."""
    import numpy as np

    p = _probs(rng)
    choice = rng.randrange(12)
    if choice == 0:
        p[0, 0, 0] = np.nan
        return "nan", _npz(probs=p)
    if choice == 1:
        p[1, 2, 1] = -0.2
        return "negative", _npz(probs=p)
    if choice == 2:
        return "sum-2", _npz(probs=p * 2)
    if choice == 3:
        return "2-d", _npz(probs=p[0])
    if choice == 4:
        return "4-d", _npz(probs=p[None])
    if choice == 5:
        return "strings", _npz(probs=np.array([["a", "b"]]))
    if choice == 6:
        return "no-probs", _npz(other=p)
    if choice == 7:
        return "empty-npz", _npz()
    if choice == 8:
        return "binary", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    if choice == 9:
        return "object-array", _object_npz()
    if choice == 10:
        p[0, 1, 2] = np.inf
        return "inf", _npz(probs=p)
    ids = np.tile(np.arange(2), (2, 3, 1))
    return "topk-no-rest", _npz(topk_ids=ids, topk_probs=p[..., :2])


def _object_npz() -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, probs=np.array([{"a": 1}], dtype=object))
    return buffer.getvalue()


def _bad_acceptance(rng: random.Random) -> tuple[str, bytes]:
    """An `acceptance rounds` array wrong in one way."""
    import numpy as np

    a = np.triu(np.full((4, 4), 0.7))
    choice = rng.randrange(8)
    if choice == 0:
        a[0, 1] = 1.5
        return "above-1", _npz(acceptance=a)
    if choice == 1:
        a[0, 0] = np.nan
        return "nan", _npz(acceptance=a)
    if choice == 2:
        return "not-square", _npz(acceptance=np.full((3, 4), 0.5))
    if choice == 3:
        return "1-d", _npz(acceptance=np.full(4, 0.5))
    if choice == 4:
        a[1, 2] = -0.1
        return "negative", _npz(acceptance=a)
    if choice == 5:
        return "missing", _npz(other=a)
    if choice == 6:
        return "binary", bytes(rng.randrange(256) for _ in range(200))
    return "strings", _npz(acceptance=np.array([["x"]]))


URLS = ["http://", "http://127.0.0.1:1/metrics", "http://127.0.0.1:0/metrics",
        "http://127.0.0.1:99999/metrics", "http://[::1/metrics", "ftp://127.0.0.1/metrics",
        "http://127.0.0.1:abc/metrics", "https://127.0.0.1:1/metrics", "http:///metrics",
        "http://127.0.0.1:1/" + "x" * 3000, "file:///etc/passwd", "http://user@127.0.0.1:1/"]
RANK_FILES = {
    "nan.json": (b"[0.5, NaN]", INVALID), "negative.json": (b"[0.5, -0.1]", INVALID),
    "above-1.json": (b"[1.2]", INVALID), "sum-above-1.json": (b"[0.7, 0.6]", INVALID),
    "empty.json": (b"[]", INVALID), "mapping.json": (b'{"a": 1}', INVALID),
    "strings.csv": (b"x,y\n", INVALID), "binary.json": (bytes(range(256)), INVALID),
    "deep.json": (b"[" * 5000, INVALID), "huge.json": (b"[" + b"0.001," * 100000 + b"0]",
                                                      INVALID),
    "utf16.yaml": ("[0.5, 0.2]".encode("utf-16-le"), INVALID),
    "ok.json": (b"[0.6, 0.2, 0.1]", VALID),
}
REC = ("recommend", "--drafter", "eagle3-llama-3.1-8b", "--alpha", "0.8", "--batch", "1",
       "--max-nodes", "8")
PLAN = ("plan", "--hardware", "h100-sxm", "--model", "llama-3.1-8b")


def newer_command_cases(rng: random.Random, count: int) -> list[Case]:
    """engines, validate, drafters import, acceptance from-probs|rounds|objectives|weights,
    acceptance fit with URLs (127.0.0.1 only, nothing listens), plan, recommend's options."""
    makers = [_engines_case, _validate_case, _drafter_import_case, _from_probs_case,
              _rounds_case, _objectives_case, _weights_case, _url_case, _plan_case,
              _recommend_case]
    return [makers[i % len(makers)](rng, i) for i in range(count)]


def _engines_case(rng: random.Random, i: int) -> Case:
    choice = rng.randrange(6)
    if choice == 0:
        return Case(kind="cmd:engines", label="list", args=("engines", "list"), expect=VALID)
    if choice == 1:
        name = rng.choice(["SGLang", "vllm", "hf-eager"])
        return Case(kind="cmd:engines", label=f"show-{name}", args=("engines", "show", name),
                    expect=VALID)
    if choice == 2:
        name = rng.choice(["sglan", "vlm", "", "x" * 3000, "../engines", "trt-llm"])
        return Case(kind="cmd:engines", label=f"show-unknown-{name[:10]}",
                    args=("engines", "show", name), needle="")
    data = yaml.safe_load((REPO / "engines" / rng.choice(["sglang.yaml", "vllm.yaml",
                                                          "hf-eager.yaml"])).read_text())
    key = rng.choice([k for k in data if k not in ("speculative",)])
    label, new = rng.choice([("typo", None), ("nan", math.nan), ("negative", -1.0),
                             ("string", "fast"), ("launch", "turbo"), ("huge", 1e308)])
    if label == "typo":
        data[key + "x"] = data.pop(key)
    elif label == "launch":
        data["launch"] = new
    elif isinstance(data[key], dict) and "value" in data[key]:
        data[key]["value"] = new
    else:
        data[key] = new
        if key in ("name", "version") and label == "string":
            label, data[key] = "list", [1]
    name = f"engine-{i}.yaml"
    return Case(kind="cmd:engines", label=f"{key}:{label}",
                args=("roofline", "--engine", name, "--tokens", "1"),
                files={name: _dump(data)}, needle=name)


def _validate_case(rng: random.Random, i: int) -> Case:
    source = rng.choice(sorted((REPO / "workloads" / "published").glob("*.yaml")))
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    row = rng.choice(data["rows"])
    choice = rng.randrange(7)
    name = f"published-{i}.yaml"
    if choice == 0:
        key = rng.choice(list(row))
        row[key + "s"] = row.pop(key)
        label = f"typo-{key}"
    elif choice == 1:
        key = rng.choice(["batch", "tp", "draft_tokens", "depth"])
        label, row[key] = rng.choice([("zero", 0), ("negative", -2), ("string", "one"),
                                      ("float", 1.5)])
        label = f"{key}:{label}"
    elif choice == 2:
        key = rng.choice(["tau", "speedup", "baseline_tokens_per_s"])
        label, row[key] = rng.choice([("nan", math.nan), ("inf", math.inf),
                                      ("negative", -1.0), ("string", "fast")])
        label = f"{key}:{label}"
    elif choice == 3:
        key = rng.choice(["model", "hardware", "engine", "drafter_spec"])
        row[key] = "no-such-thing"
        label = f"{key}:unknown"
    elif choice == 4:
        label = "rows-not-list"
        data["rows"] = {"a": 1}
    elif choice == 5:
        taken = rng.choice(["taken.png", "plot.jpg2", "folder", "afile/v.png"])
        return Case(kind="cmd:validate", label=f"plot:{taken}",
                    args=("validate", "--published", source.stem, "--plot", taken),
                    files={"taken.png": b"old", "afile": b"x"}, folders=("folder",),
                    needle=taken)
    else:
        label = "unknown-file"
        return Case(kind="cmd:validate", label=label,
                    args=("validate", "--published", rng.choice(["ddtree-h20", "nothing"])),
                    needle="")
    return Case(kind="cmd:validate", label=label, args=("validate", "--published", name),
                files={name: _dump(data)}, needle=name)


DRAFTER_CONFIG = json.loads((REPO / "tests" / "fixtures" / "drafter_configs" /
                             "eagle3-llama3.1-8b.json").read_text(encoding="utf-8"))


def _drafter_import_case(rng: random.Random, i: int) -> Case:
    config = copy.deepcopy(DRAFTER_CONFIG)
    choice = rng.randrange(6)
    name, out = f"dcfg-{i}.json", f"d-{i}.yaml"
    args: tuple[str, ...] = ("drafters", "import", name, "--target", "llama-3.1-8b", "--out",
                             out)
    needle = name
    if choice < 3:
        key = rng.choice([k for k, v in config.items() if isinstance(v, int | float)
                          and not isinstance(v, bool)] or ["hidden_size"])
        label, config[key] = rng.choice([("zero", 0), ("negative", -4), ("nan", math.nan),
                                         ("huge", 10**30), ("string", "big"), ("null", None)])
        label = f"{key}:{label}"
        text = json.dumps(config).encode()
        expect = EITHER if label.endswith(":null") or label.endswith(":zero") else INVALID
        return Case(kind="cmd:drafters-import", label=label, args=args, files={name: text},
                    expect=expect, needle=needle)
    if choice == 3:
        label = rng.choice(["binary", "empty", "list", "deep"])
        text = {"binary": bytes(range(200)), "empty": b"", "list": b"[1]",
                "deep": b"[" * 9000}[label]
        return Case(kind="cmd:drafters-import", label=label, args=args, files={name: text},
                    needle=needle)
    text = json.dumps(config).encode()
    if choice == 4:
        bad = rng.choice(["lama-3.1-8b", "", "qwen3-8b-x"])
        args = ("drafters", "import", name, "--target", bad, "--out", out)
        return Case(kind="cmd:drafters-import", label=f"target:{bad}", args=args,
                    files={name: text}, needle="")
    bad = rng.choice(["medusa2", "EAGLE9", ""])
    args = (*args, "--family", bad)
    return Case(kind="cmd:drafters-import", label=f"family:{bad}", args=args,
                files={name: text}, needle="--family")


def _from_probs_case(rng: random.Random, i: int) -> Case:
    good = _npz(probs=_probs(rng))
    label, bad = _bad_probs(rng)
    which = rng.randrange(4)
    files = {"t.npz": good, "d.npz": good, "old.yaml": b"old: 1\n"}
    if which == 0:
        files["t.npz"] = bad
        return Case(kind="cmd:from-probs", label=f"target:{label}",
                    args=("acceptance", "from-probs", "t.npz", "d.npz", "--out", "w.yaml"),
                    files=files, needle="t.npz")
    if which == 1:
        files["d.npz"] = bad
        return Case(kind="cmd:from-probs", label=f"draft:{label}",
                    args=("acceptance", "from-probs", "t.npz", "d.npz", "--out", "w.yaml"),
                    files=files, needle="d.npz")
    if which == 2:
        files["d.npz"] = _npz(probs=_probs(rng, positions=4))
        return Case(kind="cmd:from-probs", label="shape-mismatch",
                    args=("acceptance", "from-probs", "t.npz", "d.npz", "--out", "w.yaml"),
                    files=files, needle="")
    option, value = rng.choice([("--out", "old.yaml"), ("--out", "w.txt"),
                                ("--max-draft", "0"), ("--max-draft", "-1"),
                                ("--verification", "blocky"), ("--verification", "block"),
                                ("--context", "-5"), ("--out", "t.npz")])
    # an --out value in place of the default one: an option given twice is refused as such
    out = () if option == "--out" else ("--out", "w.yaml")
    args = ("acceptance", "from-probs", "t.npz", "d.npz", *out, option, value)
    needle = value if option == "--out" else option
    if option == "--verification" and value == "block":
        needle = "tokens"  # block verification needs the target's tokens
    return Case(kind="cmd:from-probs", label=f"{option}={value}", args=args, files=files,
                needle=needle)


def _rounds_case(rng: random.Random, i: int) -> Case:
    label, bad = _bad_acceptance(rng)
    import numpy as np

    good = _npz(acceptance=np.triu(np.full((4, 4), 0.7)))
    if rng.random() < 0.3:
        other = _npz(acceptance=np.triu(np.full((5, 5), 0.7)))
        return Case(kind="cmd:rounds", label="mismatched-pair",
                    args=("acceptance", "rounds", "a.npz", "b.npz"),
                    files={"a.npz": good, "b.npz": other}, needle="")
    return Case(kind="cmd:rounds", label=label, args=("acceptance", "rounds", "a.npz"),
                files={"a.npz": bad}, needle="a.npz")


def _objectives_case(rng: random.Random, i: int) -> Case:
    import numpy as np

    choice = rng.randrange(4)
    if choice == 0:
        target = rng.choice([("negative", np.array([0.5, -0.1, 0.6])),
                             ("nan", np.array([0.5, np.nan])), ("2-d", np.ones((2, 2)) / 4),
                             ("zeros", np.zeros(5)), ("strings", np.array(["a"])),
                             ("sum-2", np.array([1.0, 1.0]))])
        return Case(kind="cmd:objectives", label=f"target:{target[0]}",
                    args=("acceptance", "objectives", "--target", "t.npz"),
                    files={"t.npz": _npz(target=target[1])}, needle="t.npz")
    if choice == 1:
        label, data = rng.choice([("binary", bytes(range(100))), ("no-target", _npz(x=[1]))])
        return Case(kind="cmd:objectives", label=label,
                    args=("acceptance", "objectives", "--target", "t.npz"),
                    files={"t.npz": data}, needle="t.npz")
    if choice == 2:
        value = rng.choice(["nan", "-1", "inf", "1e308", "x"])
        return Case(kind="cmd:objectives", label=f"eta={value}",
                    args=("acceptance", "objectives", "--eta", value), needle="--eta")
    out = rng.choice(["taken.png", "f.jpg2", "folder", "afile/f.png"])
    return Case(kind="cmd:objectives", label=f"plot:{out}",
                args=("acceptance", "objectives", "--plot", out),
                files={"taken.png": b"old", "afile": b"x"}, folders=("folder",), needle=out)


def _weights_case(rng: random.Random, i: int) -> Case:
    option, value = rng.choice([
        ("--alpha", "nan"), ("--alpha", "1.5"), ("--alpha", "-0.1"), ("--alpha", ""),
        ("--alpha", "0.9,x"), ("--alpha", "0.9,,0.8"), ("--alpha", "0," * 70000),
        ("--alpha", "inf"), ("--block", "0"), ("--block", "-1"), ("--block", "1000000000"),
        ("--kappa", "0"), ("--kappa", "nan"), ("--kappa", "-1"), ("--kappa", "inf"),
        ("--plot", "taken.png"), ("--plot", "w.jpg2"), ("--plot", "afile/w.png")])
    needle = value if option == "--plot" else option
    return Case(kind="cmd:weights", label=f"{option}={value[:12]}",
                args=("acceptance", "weights", option, value),
                files={"taken.png": b"old", "afile": b"x"}, needle=needle)


def _url_case(rng: random.Random, i: int) -> Case:
    url = rng.choice(URLS)
    return Case(kind="cmd:fit-url", label=url[:30],
                args=("acceptance", "fit", url, "--out", f"w-{i}.yaml"), needle=url[:20])


def _plan_case(rng: random.Random, i: int) -> Case:
    choice = rng.randrange(5)
    if choice == 0:
        value = rng.choice(["chatt", "", "x" * 2000, "../workloads"])
        return Case(kind="cmd:plan", label=f"workload:{value[:10]}",
                    args=(*PLAN, "--workload", value, "--out", "r"), needle="")
    if choice == 1:
        option = rng.choice(["--min-tokens-per-s-per-user", "--target-throughput"])
        value = rng.choice(["nan", "-1", "inf", "1e308", "x"])
        return Case(kind="cmd:plan", label=f"{option}={value}",
                    args=(*PLAN, option, value, "--out", "r"), needle=option)
    if choice == 2:
        out = rng.choice(["existing", "afile", "afile/r"])
        return Case(kind="cmd:plan", label=f"out:{out}", args=(*PLAN, "--out", out),
                    files={"existing/report.md": b"old\n", "afile": b"x"}, needle=out)
    if choice == 3:
        name = f"wl-{i}.yaml"
        return Case(kind="cmd:plan", label="workload-file-binary",
                    args=(*PLAN, "--workload", name, "--out", "r"),
                    files={name: bytes(range(256))}, needle=name)
    value = rng.choice(["tensorrt", "", "SGLANGX"])
    return Case(kind="cmd:plan", label=f"engine:{value}",
                args=(*PLAN, "--engine", value, "--out", "r"), needle="")


def _recommend_case(rng: random.Random, i: int) -> Case:
    choice = rng.randrange(3)
    if choice == 0:
        name = rng.choice(list(RANK_FILES))
        data, expect = RANK_FILES[name]
        return Case(kind="cmd:recommend", label=f"ranks:{name}",
                    args=(*REC, "--ranks", name), files={name: data}, expect=expect,
                    needle=name)
    if choice == 1:
        out = rng.choice(["taken.json", "folder", "afile/t.json", "t.png", "t.json", "sub/"])
        return Case(kind="cmd:recommend", label=f"tree-out:{out}",
                    args=(*REC, "--tree-out", out),
                    files={"taken.json": b"{}", "afile": b"x"}, folders=("folder",),
                    expect=VALID if out == "t.json" else INVALID, needle=out.rstrip("/"))
    value = rng.choice(["0", "-1", "1000000", "x", "nan"])
    return Case(kind="cmd:recommend", label=f"max-depth={value}",
                args=(*REC, "--max-depth", value), needle="--max-depth")


def all_cases(seed: int = SEED) -> list[Case]:
    """The whole campaign: 1,000+ cases, the same ones for the same seed."""
    rng = random.Random(seed)
    return (spec_cases(rng, 400) + misspelled_key_cases(rng, 40) + file_cases(rng, 150)
            + config_cases(rng, 120) + profile_cases(rng, 90) + metrics_cases(rng, 80)
            + option_cases(rng, 160) + output_cases(rng, 36)
            + newer_command_cases(rng, 300))


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    error: BaseException | None  # an uncaught exception other than SystemExit


def lay_out(case: Case, root: Path) -> None:
    for folder in case.folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
    for name, data in case.files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def run_case(case: Case) -> Outcome:
    """`specsim ARGS` in this process (the caller sets the working folder)."""
    from specsim.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["specsim", *case.args]
    code, error = 0, None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException as exc:  # noqa: BLE001  (what the test is looking for)
        error = exc
    finally:
        sys.argv = argv
    return Outcome(code=code, stdout=out.getvalue(), stderr=err.getvalue(), error=error)


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under root: modification time and contents."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def check_case(case: Case, root: Path, *, usage_ok: bool = True) -> None:
    """The contract of every malformed input: laid out under `root` (the working folder) and
    run, it raises nothing but SystemExit and ends in one of `case.expect`; unless that is
    exit 0, in one line of stderr under 400 characters that names `case.needle`, with every
    file under `root` as it was. `usage_ok`: click's own 'Usage' line counts as the one line."""
    lay_out(case, root)
    before = snapshot(root)
    outcome = run_case(case)
    assert outcome.error is None, f"uncaught {type(outcome.error).__name__}: {outcome.error}"
    assert outcome.code in case.expect, (outcome.code, outcome.stderr[-400:])
    if outcome.code == 0:
        return
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, outcome.stderr[:600]
    assert lines[0].startswith("specsim: error:") or (
        usage_ok and lines[0].startswith("Usage")), lines[0]
    assert case.needle in lines[0], (case.needle, lines[0])
    assert snapshot(root) == before, "a file was written or changed"

"""Issue 23's acceptance check: a fresh seeded campaign of malformed inputs plus a fixed set of
adversarial cases (injection, planted symlinks, concurrent and killed `plan` runs, YAML/NPZ bombs,
hostile metrics and URLs, unit mistakes), each run in a fresh temporary folder and classified.

Usage:

    python benchmarks/adversarial.py                  # full: campaign (>= 1,000) + adversarial
    python benchmarks/adversarial.py --seed 7         # the same cases as an earlier run
    python benchmarks/adversarial.py --quick          # 200 campaign cases, fewer kill points
    python benchmarks/adversarial.py --only adversarial   # or --only campaign
    python benchmarks/adversarial.py --seed 7 --case 123 --keep   # replay one case, keep its
                                                                  # folder, print its output

Without --seed a random seed is drawn and printed first. The campaign reuses the generators of
tests/fuzz_cases.py under the new seed and adds mutation kinds of its own (YAML number spellings,
control characters and Markdown in names, duplicate keys, ranks files, metrics positions and
labels, profiles in the wrong unit or encoding, list options, shell injection in engine ids).

Each CLI case runs in a forked child of this process (the CLI already imported, so a case costs
milliseconds) with its working folder root/case/work, stdout and stderr in files, a wall-clock
limit (--hang-s, default 60 s: "hang") and an address-space limit of this process's size plus
--memory-gb (default 2 GiB, RLIMIT_AS: "memory"). Cases that need real processes (concurrent
plans, SIGKILL at a few points, a symlink planted while plan runs, pasting a printed command
into bash with stub `vllm`/`python`) use subprocesses with the same limits.

Outcomes:
  clean-error      exit 2, one `specsim: error:` line under 400 chars naming the file/option,
                   nothing written (good)
  ok               exit 0 where the input is valid, only the asked-for outputs written, no raw
                   control characters in the output, the case's own check passed (good)
  traceback        an uncaught exception other than SystemExit (MemoryError: "memory")
  hang             over the wall-clock limit
  memory           MemoryError, or killed near the address-space limit
  damaged          a file outside the case's allowed outputs changed, a link's target changed,
                   something written on an error, or a report folder left neither old nor new
  accepted-invalid exit 0 on input that must be refused
  rejected-valid   exit 2 on input that is valid by construction
  bad-message      exit 2 but not one line naming the file or option
  bad-output       exit 0 but its output breaks the case's check (raw escape sequences,
                   Markdown forged from a name, a value read wrongly)
  injection        a pasted engine command ran something or passed other arguments
  exit-N           any other exit status

It prints counts per class and per outcome, then every case that is not clean with a one-line
reproduction (`--seed S --case ID`), and exits 1 if any case is bad.
"""

from __future__ import annotations

import argparse
import collections
import copy
import functools
import http.server
import io
import json
import math
import os
import random
import resource
import shlex
import shutil
import signal
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import fuzz_cases  # noqa: E402
from property_strategies import (  # noqa: E402
    LLAMA_CONFIG,
    Raw,
    builtin,
    changed,
    command_problems,
    dump_yaml,
    inside,
    leaves,
    metrics_text,
    paste_into_bash,
    set_at,
    snapshot,
    synthetic_profile,
    unsafe_text,
)

INVALID, VALID, EITHER = frozenset({2}), frozenset({0}), frozenset({0, 2})
GOOD = {"clean-error", "ok"}
OUTPUT_OPTIONS = ("--out", "--plot", "--tree-out", "--predictions")


@dataclass
class Result:
    outcome: str
    detail: str = ""


@dataclass
class Run:
    status: str  # "exit", "hang", "memory", "traceback", "crash"
    code: int
    stdout: str
    stderr: str
    detail: str = ""


Check = Callable[[Path, Path, Run], str | None]  # (root, work, run) -> problem or None


@dataclass
class CliCase:
    """One command line with the files it needs, what it may write and what it must give."""

    kind: str
    label: str
    args: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)  # relative to work (may use ../)
    folders: tuple[str, ...] = ()
    links: dict[str, str] = field(default_factory=dict)  # work-relative link -> root-relative
    expect: frozenset[int] = INVALID
    needles: tuple[str, ...] = ()
    allowed: tuple[str, ...] | None = None  # work-relative outputs; None: from OUTPUT_OPTIONS
    check: Check | None = None
    progress: bool = False  # stderr may hold progress lines before the error (plan)


@dataclass
class CustomCase:
    """A case that needs more than one command (processes, kills, a shell)."""

    kind: str
    label: str
    run: Callable[[Path, Path, argparse.Namespace], Result]
    args: tuple[str, ...] = ()  # for the reproduction line


Case = CliCase | CustomCase


# --------------------------------------------------------------------------- running


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def run_forked(args: tuple[str, ...], cwd: Path, opts: argparse.Namespace) -> Run:
    """`specsim ARGS` in a forked child of this process, under the time and memory limits."""
    from specsim.cli import main

    ctrl = Path(tempfile.mkdtemp(prefix="specsim-adv-ctrl-"))
    out_path, err_path, exc_path = ctrl / "out", ctrl / "err", ctrl / "exc"
    limit = opts.vm_base + int(opts.memory_gb * 2**30)
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 96
        try:
            os.chdir(cwd)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            sys.stdout = open(out_path, "w", encoding="utf-8", errors="backslashreplace")
            sys.stderr = open(err_path, "w", encoding="utf-8", errors="backslashreplace")
            sys.argv = ["specsim", *args]
            try:
                main()
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            except MemoryError:
                exc_path.write_text("MemoryError")
                code = 97
            except BaseException:  # noqa: BLE001  (what the campaign looks for)
                exc_path.write_text(traceback.format_exc())
                code = 98
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    start = time.monotonic()
    status = 0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > opts.hang_s:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            shutil.rmtree(ctrl, ignore_errors=True)
            return Run("hang", -9, "", "", f"over {opts.hang_s} s")
        time.sleep(0.003)
    stdout = out_path.read_text(encoding="utf-8", errors="replace") if out_path.exists() else ""
    stderr = err_path.read_text(encoding="utf-8", errors="replace") if err_path.exists() else ""
    exc = exc_path.read_text() if exc_path.exists() else ""
    shutil.rmtree(ctrl, ignore_errors=True)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        kind = "memory" if sig in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS) else "crash"
        return Run(kind, -sig, stdout, stderr, f"killed by signal {sig}")
    code = os.WEXITSTATUS(status)
    if code == 97:
        return Run("memory", code, stdout, stderr, "MemoryError")
    if code == 98:
        last = exc.strip().splitlines()[-1] if exc.strip() else "?"
        kind = "memory" if "MemoryError" in last else "traceback"
        return Run(kind, code, stdout, stderr, last[:300])
    return Run("exit", code, stdout, stderr)


def _lay_out(case: CliCase, root: Path, work: Path) -> None:
    for folder in case.folders:
        (work / folder).mkdir(parents=True, exist_ok=True)
    for name, data in case.files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for link, target in case.links.items():
        (work / link).parent.mkdir(parents=True, exist_ok=True)
        (work / link).symlink_to(root / target)


def _outputs(case: CliCase) -> tuple[str, ...]:
    if case.allowed is not None:
        return case.allowed
    return tuple(case.args[i + 1] for i, a in enumerate(case.args[:-1]) if a in OUTPUT_OPTIONS)


def _rel(root: Path, work: Path, given: str) -> str:
    return os.path.relpath(os.path.normpath(work / given), root)


def message_problem(stderr: str, needles: tuple[str, ...], *, progress: bool = False) -> str | None:
    lines = stderr.strip().splitlines()
    if progress and lines and not any(line.startswith("specsim:") for line in lines[:-1]):
        lines = lines[-1:]
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr: {stderr.strip()[-300:]!r}"
    line = lines[0]
    if not line.startswith("specsim: error:") or len(line) >= 400:
        return f"not a one-line error: {line[:300]!r}"
    if needles and not any(n in line for n in needles if n):
        return f"names none of {[n[:40] for n in needles]}: {line[:300]!r}"
    return None


def classify_run(case: CliCase, root: Path, work: Path, before: dict[str, Any],
                 run: Run) -> Result:
    if run.status != "exit":
        return Result(run.status, run.detail or run.stderr[-200:])
    after = snapshot(root)
    touched = changed(before, after)
    if run.code == 0:
        allowed = [_rel(root, work, o) for o in _outputs(case)]
        parents = {str(p) for a in allowed for p in Path(a).parents}
        stray = sorted(p for p in touched if not inside(p, allowed)
                       and not (p in parents and after.get(p) == ("dir", "")))
        if stray:
            return Result("damaged", f"wrote outside its outputs: {stray[:4]}")
        if 0 not in case.expect:
            return Result("accepted-invalid", run.stdout.strip()[-160:] or "exit 0")
        raw = unsafe_text(run.stdout) or unsafe_text(run.stderr)
        if raw:
            return Result("bad-output", f"raw control character: {raw}")
        problem = case.check(root, work, run) if case.check else None
        return Result("bad-output", problem) if problem else Result("ok")
    if touched:
        return Result("damaged", f"exit {run.code} but changed {sorted(touched)[:4]}")
    if run.code != 2:
        return Result(f"exit-{run.code}", run.stderr.strip()[-200:])
    if 2 not in case.expect:
        return Result("rejected-valid", run.stderr.strip()[-200:])
    problem = message_problem(run.stderr, case.needles, progress=case.progress)
    return Result("bad-message", problem) if problem else Result("clean-error")


def run_case(case: Case, opts: argparse.Namespace, keep: bool = False) -> Result:
    folder = Path(tempfile.mkdtemp(prefix="specsim-adv-"))
    root, work = folder, folder / "case" / "work"
    work.mkdir(parents=True)
    (root / "outside").mkdir()
    try:
        if isinstance(case, CustomCase):
            return case.run(root, work, opts)
        _lay_out(case, root, work)
        before = snapshot(root)
        run = run_forked(case.args, work, opts)
        if keep:
            print(f"--- stdout\n{run.stdout}--- stderr\n{run.stderr}--- status {run.status} "
                  f"{run.code} {run.detail}")
        return classify_run(case, root, work, before, run)
    except Exception as err:  # noqa: BLE001  (a broken probe is reported, not fatal)
        return Result("probe-error", f"{type(err).__name__}: {err}"[:300])
    finally:
        if keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------- campaign kinds


def from_fuzz(case: fuzz_cases.Case) -> CliCase:
    return CliCase(kind=case.kind, label=case.label, args=case.args, files=dict(case.files),
                   folders=case.folders, expect=case.expect,
                   needles=(case.needle,) if case.needle else ())


NUMBER_SPELLINGS: list[tuple[str, Callable[[int], str], frozenset[int]]] = [
    ("octal-032", lambda v: "0" + str(v), EITHER),  # decimal or refused: checked below
    ("00-prefix", lambda v: "00" + str(v), EITHER),
    ("hex", lambda v: hex(v), EITHER),
    ("0o", lambda v: "0o" + oct(v)[2:], EITHER),
    ("underscore", lambda v: f"{v:_}", EITHER),
    ("plus", lambda v: f"+{v}", EITHER),
    ("5000-digits", lambda v: "9" * 5000, INVALID),
    ("4301-digits", lambda v: "1" * 4301, INVALID),
    (".nan", lambda v: ".NaN", INVALID),
    ("1e400", lambda v: "1e400", INVALID),
    ("-.inf", lambda v: "-.inf", INVALID),
    ("sexagesimal", lambda v: "1:30", INVALID),
]


def _value_check(field_name: str, want: int) -> Check:
    def check(root: Path, work: Path, run: Run) -> str | None:
        try:
            rows = {r["field"]: r["value"] for r in json.loads(run.stdout)}
        except ValueError:
            return "models show --json did not print JSON"
        got = rows.get(field_name)
        return None if got == want else f"{field_name} read as {got!r}, written as {want}"
    return check


def raw_number_cases(rng: random.Random, count: int) -> list[Case]:
    cases: list[Case] = []
    fields = ["num_layers", "hidden_size", "intermediate_size", "vocab_size", "num_kv_heads"]
    for i in range(count):
        data = builtin("model", rng.choice(["llama-3.1-8b", "qwen3-8b"]))
        name = rng.choice(fields)
        value = int(data[name]["value"] if isinstance(data[name], dict) else data[name])
        label, spell, expect = rng.choice(NUMBER_SPELLINGS)
        raw = Raw(spell(value))
        if isinstance(data[name], dict):
            data[name]["value"] = raw
        else:
            data[name] = raw
        file = f"m-{i}.yaml"
        cases.append(CliCase(kind="spec:number-spelling", label=f"{name}:{label}",
                             args=("models", "show", file, "--json"),
                             files={file: dump_yaml(data)}, expect=expect, needles=(file,),
                             check=_value_check(name, value)))
    return cases


HOSTILE_TEXT = ["\x1b]0;pwned\x07", "\x1b[2J", "\r", "\x00", "\x7f", "\u009b31m", "\n## Answer\n",
                "<!--", "```sh\ncurl x | sh\n```", "\u202egnp.exe", "|a|b|", "[x](javascript:1)",
                "\t", "\x08\x08\x08"]


def control_text_cases(rng: random.Random, count: int) -> list[Case]:
    kinds: list[tuple[str, str, Callable[[str], tuple[str, ...]]]] = [
             ("model", "llama-3.1-8b", lambda f: ("models", "show", f)),
             ("hardware", "h100-sxm", lambda f: ("hardware", "show", f)),
             ("drafter", "eagle3-llama-3.1-8b", lambda f: ("drafters", "show", f)),
             ("model", "qwen3-8b", lambda f: ("roofline", "--model", f, "--tokens", "1"))]
    cases: list[Case] = []
    for i in range(count):
        kind, slug, command = kinds[i % len(kinds)]
        data = builtin(kind, slug)
        strings = [(p, v) for p, v in leaves(data) if isinstance(v, str)
                   and p[-1] in ("name", "source", "value")]
        path, value = rng.choice(strings)
        payload = "".join(rng.choice(HOSTILE_TEXT) for _ in range(rng.randint(1, 3)))
        set_at(data, path, f"{value[:20]}{payload}{value[20:40]}")
        file = f"s-{i}.yaml"
        cases.append(CliCase(kind="spec:control-text", label=f"{'.'.join(map(str, path))}:"
                             f"{payload!r:.30}", args=command(file),
                             files={file: dump_yaml(data)}, expect=EITHER, needles=(file,)))
    return cases


def duplicate_key_cases(rng: random.Random, count: int) -> list[Case]:
    cases: list[Case] = []
    args: tuple[str, ...]
    for i in range(count):
        choice = rng.randrange(4)
        if choice == 0:
            text = dump_yaml(builtin("model", "llama-3.1-8b")).decode() + "num_layers: 31\n"
            file, args = f"m-{i}.yaml", ("models", "show", f"m-{i}.yaml")
        elif choice == 1:
            text = dump_yaml(builtin("hardware", "h100-sxm")).decode().replace(
                "memory:\n", "memory:\n  hbm_capacity_GB: 1\n", 1)
            file, args = f"h-{i}.yaml", ("hardware", "show", f"h-{i}.yaml")
        else:
            first, second = rng.choice([("ranks", "ranks"), ("acceptance", "acceptance"),
                                        ("ranks", "acceptance")])
            text = f"{first}: [0.6, 0.2]\n{second}: [0.1]\n"
            file = f"r-{i}.yaml"
            args = ("recommend", "--drafter", "eagle3-llama-3.1-8b", "--batch", "1",
                    "--max-nodes", "8", "--ranks", file)
        expect = INVALID if choice < 2 or "\nranks:" in "\n" + text.split("\n", 1)[1] or (
            text.count("acceptance:") > 1) else EITHER
        cases.append(CliCase(kind="dup-key", label=f"{file}:{text.splitlines()[-1][:30]}",
                             args=args, files={file: text.encode()}, expect=expect,
                             needles=(file,)))
    return cases


def ranks_cases(rng: random.Random, count: int) -> list[Case]:
    cases: list[Case] = []
    pool = [0.5, 0.2, 0.1, 0.0, 1.0, -0.1, 1.5, math.nan, math.inf, 1e-300, 0.3333333333]
    for i in range(count):
        values = [rng.choice(pool) for _ in range(rng.randrange(0, 6))]
        form = rng.choice(["json", "yaml", "csv", "tensor", "json-map"])
        listed = ", ".join(json.dumps(v) for v in values)
        if form == "yaml":
            listed = listed.replace("NaN", ".nan").replace("Infinity", ".inf")
        text = {"json": f"[{listed}]", "yaml": f"- {listed.replace(', ', chr(10) + '- ')}"
                if values else "[]", "csv": listed.replace(" ", ""),
                "tensor": f"tensor([{listed}])", "json-map": f'{{"ranks": [{listed}]}}'}[form]
        good = bool(values) and all(0 <= v <= 1 for v in values) and sum(values) <= 1
        file = f"ranks-{i}.{ {'yaml': 'yaml', 'csv': 'csv', 'tensor': 'txt'}.get(form, 'json')}"
        cases.append(CliCase(kind="ranks-file", label=f"{form}:{values!r:.40}",
                             args=("recommend", "--drafter", "eagle3-llama-3.1-8b", "--batch",
                                   "1", "--max-nodes", "8", "--ranks", file),
                             files={file: text.encode()}, expect=EITHER if good else INVALID,
                             needles=(file, "--ranks")))
    return cases


def _alpha_check(accepted: list[int], drafts: int) -> Check:
    def check(root: Path, work: Path, run: Run) -> str | None:
        import yaml

        written = yaml.safe_load((work / "w.yaml").read_text())["acceptance"]["alpha"]
        want = [a / p for a, p in zip(accepted, [drafts, *accepted], strict=False)]
        if len(written) != len(want) or any(abs(w - x) > 5.1e-7  # written to 6 decimals
                                            for w, x in zip(written, want, strict=True)):
            return f"alpha {written} for counts {drafts} {accepted}, want {want}"
        return None
    return check


def metrics_cases(rng: random.Random, count: int) -> list[Case]:
    cases: list[Case] = []
    for i in range(count):
        drafts = rng.randint(1, 10**6)
        accepted, last = [], drafts
        for _ in range(rng.randint(1, 6)):
            last = rng.randint(1, last)
            accepted.append(last)
        choice = rng.randrange(5)
        file = f"metrics-{i}.txt"
        args = ("acceptance", "fit", file, "--out", "w.yaml")
        if choice == 0:
            text = metrics_text(accepted, drafts, total=rng.random() < 0.5)
            cases.append(CliCase(kind="metrics", label="consistent", args=args,
                                 files={file: text.encode()}, expect=VALID, needles=(file,),
                                 check=_alpha_check(accepted, drafts)))
            continue
        if choice == 1:
            position = rng.choice(["200000000", "²", "٣", "-1", "1e3", "0x1", "", "1.0",
                                   "9" * 40, "١٢"])
            text = metrics_text(accepted, drafts).replace('position="0"',
                                                          f'position="{position}"')
            label = f"position={position[:12]}"
        elif choice == 2:
            width = rng.choice([10_000, 40_000, 100_000])
            labels = 'engine="0",' + ",".join(f'l{j}="{"x" * 30}"' for j in range(width // 36))
            text = metrics_text(accepted, drafts, labels=labels)
            cases.append(CliCase(kind="metrics", label=f"label-block-{width}", args=args,
                                 files={file: text.encode()}, expect=EITHER, needles=(file,)))
            continue
        elif choice == 3:
            value = rng.choice(["NaN", "+Inf", "-5", "1e308", "many", "9" * 400, "0x10"])
            lines = metrics_text(accepted, drafts).splitlines()
            row = rng.randrange(len(lines))
            lines[row] = lines[row].rsplit(" ", 1)[0] + " " + value
            text = "\n".join(lines)
            label = f"value-{row}={value[:10]}"
        else:
            text = metrics_text(accepted, drafts)
            label = rng.choice(["quote", "bytes", "utf16"])
            text_bytes = {"quote": text.replace('engine="0"', 'engine="0\\"', 1).encode(),
                          "bytes": text.encode() + b"\xff\xfe\x00junk",
                          "utf16": text.encode("utf-16-le")}[label]
            cases.append(CliCase(kind="metrics", label=label, args=args,
                                 files={file: text_bytes}, expect=INVALID, needles=(file,)))
            continue
        cases.append(CliCase(kind="metrics", label=label, args=args, files={file: text.encode()},
                             expect=INVALID, needles=(file,)))
    return cases


def profile_cases(rng: random.Random, count: int) -> list[Case]:
    cases: list[Case] = []
    for i in range(count):
        scale = rng.choice([1.0, 1e3, 1e6, 1e-3, 1e-6, 1e9])
        text = synthetic_profile(scale)
        label = f"scale-{scale:g}"
        expect = VALID if scale == 1.0 else INVALID
        if rng.random() < 0.3:
            label += "+latin-1"
            text = text.replace(b"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 \u00e9".encode(
                "latin-1"), 1 + rng.randrange(3))
            expect = INVALID
        file = f"profile-{i}.csv"
        cases.append(CliCase(kind="profile:units-encoding", label=label,
                             args=("calibrate", file, "--hardware", "h100-sxm", "--out",
                                   f"o-{i}.yaml"), files={file: text}, expect=expect,
                             needles=(file,)))
    return cases


LIST_ATOMS = ["1", "8", "64", "0", "-1", "nan", "inf", "1e999", "0x10", "１", "²", "1.5",
              "9" * 25, "", " ", "1_000", "+2", "1e3"]


def list_option_cases(rng: random.Random, count: int) -> list[Case]:
    commands = {"--tokens": ("roofline", "--tokens"),
                "--context": ("roofline", "--tokens", "1", "--context"),
                "--batch": ("speedup", "--alpha", "0.7", "--draft-cost", "0.1", "--nodes",
                            "0,2", "--shape", "chain", "--batch"),
                "--requests": ("memory", "--requests")}
    cases: list[Case] = []
    for _ in range(count):
        option = rng.choice(list(commands))
        atoms = [rng.choice(LIST_ATOMS) for _ in range(rng.randint(1, 4))]
        seps = [rng.choice([",", "-", ":", ",,", ";"]) for _ in atoms]
        text = "".join(a + s for a, s in zip(atoms, seps, strict=True))[:-1]
        # an empty or blank item between others ("8,,1", "8, ") may be skipped; a list with
        # no number at all may not
        bad = any(a in ("-1", "nan", "inf", "1e999", "１", "²") or len(a) > 20
                  for a in atoms) or ";" in text or not any(a.strip() for a in atoms)
        cases.append(CliCase(kind="list-option", label=f"{option}={text[:30]!r}",
                             args=(*commands[option], text), expect=INVALID if bad else EITHER,
                             needles=(option,)))
    return cases


PAYLOADS = ["'$(touch X1)'", "$(touch X2)", "`touch X3`", "; touch X4", '"; touch X5; "',
            "\ntouch X6", "' ; touch X7 #", "\\'$(touch X8)", " || touch X9", "&touch X10&",
            "'\"$(touch X11)\"'", "$(touch${IFS}X12)", "\"}';touch X13;'", "%0atouch X14"]


def _paste_probe(drafter: dict[str, Any], model: dict[str, Any] | None, owner: str,
                 target: str, checkpoint: str) -> Callable[[Path, Path, argparse.Namespace],
                                                           Result]:
    def probe(root: Path, work: Path, opts: argparse.Namespace) -> Result:
        (work / "d.yaml").write_bytes(dump_yaml(drafter))
        args: tuple[str, ...] = ("recommend", "--drafter", "d.yaml", "--batch", "1",
                                 "--max-nodes", "8", "--json")
        if model is not None:
            (work / "m.yaml").write_bytes(dump_yaml(model))
            args += ("--model", "m.yaml")
        case = CliCase(kind="", label="", args=args, expect=EITHER, needles=(owner,))
        before = snapshot(root)
        run = run_forked(args, work, opts)
        result = classify_run(case, root, work, before, run)
        if result.outcome != "ok":
            return result
        commands = [c["command"] for c in json.loads(run.stdout)["commands"] if c["command"]]
        for i, command in enumerate(commands):
            vectors, appeared, _ = paste_into_bash(command, root / f"paste-{i}")
            if appeared:
                return Result("injection", f"pasting {command[:120]!r} created {appeared}")
            if len(vectors) != 1:
                return Result("injection", f"pasting {command[:120]!r} ran {len(vectors)} "
                                           "engine calls")
            problems = command_problems(command, vectors[0], target=target,
                                        checkpoint=checkpoint)
            if problems:
                return Result("injection", problems[0][:300])
        return Result("ok")
    return probe


def injection_case(kind: str, field_name: str, payload: str, where: str) -> CustomCase:
    drafter = builtin("drafter", "eagle3-llama-3.1-8b")
    checkpoint = str(drafter["checkpoint"]["value"])
    target = str(drafter["trained_for"]["value"])
    model: dict[str, Any] | None = None
    owner = "d.yaml"

    def put(old: str) -> str:
        return f"{old}{payload}" if where == "end" else f"{old[:6]}{payload}{old[6:]}"

    if field_name == "hf_id":
        model = builtin("model", "llama-3.1-8b")
        target = put(str(model["hf_id"]["value"]))
        model["hf_id"]["value"] = target
        drafter["target"] = "m.yaml"
        del drafter["trained_for"]
        owner = "m.yaml"
    elif field_name == "local-checkpoint":  # a local path passes the Hub-id rules
        checkpoint = f"./my ckpt/{payload}/eagle3"
        drafter["checkpoint"]["value"] = checkpoint
    elif field_name == "checkpoint":
        checkpoint = put(checkpoint)
        drafter["checkpoint"]["value"] = checkpoint
    else:
        target = put(target)
        drafter["trained_for"]["value"] = target
    return CustomCase(kind=kind, label=f"{field_name}:{where}:{payload!r:.30}",
                      run=_paste_probe(drafter, model, owner, target, checkpoint),
                      args=("recommend", "--drafter", "d.yaml", "--batch", "1", "--json"))


def injection_cases(rng: random.Random, count: int) -> list[Case]:
    return [injection_case("injection", rng.choice(["checkpoint", "trained_for", "hf_id",
                                                    "local-checkpoint"]),
                           rng.choice(PAYLOADS) if rng.random() < 0.7 else "".join(
                               rng.choice("'\"$`;|&() \\{}*?~#!<>\n") for _ in range(6)),
                           rng.choice(["end", "middle"])) for _ in range(count)]


def campaign(seed: int, quick: bool) -> list[Case]:
    rng = random.Random(seed)
    cases: list[Case] = [from_fuzz(c) for c in fuzz_cases.all_cases(seed)]
    cases += (raw_number_cases(rng, 60) + control_text_cases(rng, 60)
              + duplicate_key_cases(rng, 30) + ranks_cases(rng, 80) + metrics_cases(rng, 80)
              + profile_cases(rng, 24) + list_option_cases(rng, 80) + injection_cases(rng, 60))
    if quick:
        rng.shuffle(cases)
        cases = cases[:200]
    return cases


# --------------------------------------------------------------------------- fixed adversarial

PLAN_A = ("plan", "--model", "llama-3.1-8b")
PLAN_B = ("plan", "--model", "qwen3-8b")


def alias_bomb(levels: int, width: int = 9) -> bytes:
    names = [f"l{i}" for i in range(levels + 1)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    for prev, cur in zip(names, names[1:], strict=False):
        lines.append(f"{cur}: &{cur} [{', '.join([f'*{prev}'] * width)}]")
    return ("\n".join(lines) + "\n").encode()


@functools.cache
def npz_bomb(name: str, shape: tuple[int, ...]) -> bytes:
    """An .npz whose one float64 array of `shape` (all zeros) deflates to about 1/1000."""
    header_dict = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"
    header = header_dict + " " * ((64 - (len(header_dict) + 11) % 64) % 64) + "\n"
    npy_head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
    total = 8 * math.prod(shape)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive, \
            archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        member.write(npy_head)
        chunk = bytes(2**24)
        for _ in range(total // len(chunk)):
            member.write(chunk)
        member.write(bytes(total % len(chunk)))
    return buffer.getvalue()


def _report_ok(folder: Path) -> str | None:
    for name in ("report.md", "report.html"):
        if not (folder / name).is_file() or (folder / name).stat().st_size == 0:
            return f"{folder.name}/{name} missing or empty"
    return None


def _check_report(root: Path, work: Path, run: Run) -> str | None:
    out = work / "out"
    problem = _report_ok(out)
    if problem:
        return problem
    report = (out / "report.md").read_text(errors="replace")
    lines = report.splitlines()
    if lines.count("## Answer") > 1 or "curl x | sh" in lines:
        return "a name forged Markdown structure in report.md"
    if report.count("<!--") != report.count("-->"):
        return "an unclosed <!-- in report.md hides the report"
    if unsafe_text(report):
        return f"raw control character in report.md: {unsafe_text(report)}"
    return None


def _plan_files(opts: argparse.Namespace, plan: tuple[str, ...]) -> dict[str, bytes]:
    """The report a plan writes alone (cached per command)."""
    key = " ".join(plan)
    if key not in opts.references:
        folder = Path(tempfile.mkdtemp(prefix="specsim-adv-ref-"))
        try:
            proc = _spawn((*plan, "--out", "ref"), folder, opts)
            _, err = proc.communicate(timeout=opts.hang_s * 3)
            if proc.returncode != 0:
                raise RuntimeError(f"the reference `specsim {' '.join(plan)}` failed: "
                                   f"{err.decode(errors='replace')[-200:]}")
            opts.references[key] = {p.name: p.read_bytes() for p in (folder / "ref").iterdir()}
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    reference: dict[str, bytes] = opts.references[key]
    return reference


def _spawn(args: tuple[str, ...], cwd: Path, opts: argparse.Namespace) -> subprocess.Popen[bytes]:
    limit = opts.vm_base + int(opts.memory_gb * 2**30)

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.Popen([sys.executable, "-m", "specsim", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limits)


def _same_report(folder: Path, reference: dict[str, bytes]) -> bool:
    """The folder holds exactly the reference's files, and its CSV tables byte for byte."""
    if not folder.is_dir() or folder.is_symlink():
        return False
    files = {p.name: p for p in folder.iterdir()}
    if set(files) != set(reference):
        return False
    return all(files[n].read_bytes() == data for n, data in reference.items()
               if n.endswith(".csv")) and _report_ok(folder) is None


def concurrent_plans(root: Path, work: Path, opts: argparse.Namespace) -> Result:
    refs = {"A": _plan_files(opts, PLAN_A), "B": _plan_files(opts, PLAN_B)}
    procs = {"A": _spawn((*PLAN_A, "--out", "out"), work, opts),
             "B": _spawn((*PLAN_B, "--out", "out"), work, opts)}
    outs = {k: p.communicate(timeout=opts.hang_s * 3) for k, p in procs.items()}
    codes = {k: p.returncode for k, p in procs.items()}
    winners = [k for k, c in codes.items() if c == 0]
    if sorted(codes.values()) not in ([0, 0], [0, 2]):
        return Result("damaged", f"exit codes {codes}")
    for k, code in codes.items():
        if code == 2:
            problem = message_problem(outs[k][1].decode(errors="replace"), ("out",),
                                      progress=True)
            if problem:
                return Result("bad-message", problem)
    if not any(_same_report(work / "out", refs[k]) for k in winners):
        present = sorted(p.name for p in (work / "out").iterdir()) if (work / "out").is_dir() \
            else []
        return Result("damaged", f"two plans ({codes}) left a mixed folder: {present[:8]}")
    return Result("ok", f"codes {codes}")


def killed_plan(delay_s: float, force_over_old: bool) -> Callable[[Path, Path, argparse.Namespace],
                                                                 Result]:
    def probe(root: Path, work: Path, opts: argparse.Namespace) -> Result:
        new, old = _plan_files(opts, PLAN_A), _plan_files(opts, PLAN_B)
        args: tuple[str, ...] = (*PLAN_A, "--out", "out")
        if force_over_old:
            (work / "out").mkdir()
            for name, data in old.items():
                (work / "out" / name).write_bytes(data)
            args += ("--force",)
        proc = _spawn(args, work, opts)
        time.sleep(delay_s)
        proc.kill()
        proc.wait()
        out = work / "out"
        state = ("absent" if not out.exists() and not out.is_symlink() else
                 "new" if _same_report(out, new) else
                 "old" if force_over_old and _same_report(out, old) and all(
                     (out / n).read_bytes() == d for n, d in old.items()) else "mixed")
        if state == "mixed" or (state == "absent" and force_over_old):
            present = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
            return Result("damaged", f"killed at {delay_s} s: {state} folder {present[:8]}")
        again = _spawn((*PLAN_A, "--out", "out") + (("--force",) if state != "absent" else ()),
                       work, opts)
        _, err = again.communicate(timeout=opts.hang_s * 3)
        if again.returncode != 0 or not _same_report(out, new):
            return Result("damaged", f"after a kill at {delay_s} s ({state}) the next plan "
                                     f"exits {again.returncode}: {err.decode()[-200:]!r}")
        litter = sorted(p.name for p in work.iterdir() if p.name != "out")
        return Result("ok", f"state {state}" + (f"; litter beside out: {litter}" if litter
                                                 else ""))
    return probe


def planted_link_race(root: Path, work: Path, opts: argparse.Namespace) -> Result:
    """While plan runs into an empty --out, keep planting links to a file outside at the
    names it writes."""
    target = root / "outside" / "precious"
    target.write_text("precious\n")
    (work / "out").mkdir()
    proc = _spawn((*PLAN_A, "--out", "out"), work, opts)
    names = ["report.html", "report.md", "tn.png", "tn.csv", "memory.csv", "pareto.png"]
    while proc.poll() is None:
        for name in names:
            with_link = work / "out" / name
            if not with_link.exists() and not with_link.is_symlink() and (work / "out").is_dir():
                try:
                    with_link.symlink_to(target)
                except OSError:
                    pass
        time.sleep(0.01)
    proc.communicate()
    if target.read_text() != "precious\n":
        return Result("damaged", "plan followed a link planted in --out and overwrote its "
                                 "target")
    return Result("ok", f"exit {proc.returncode}")


def memory_context_zero(root: Path, work: Path, opts: argparse.Namespace) -> Result:
    text = run_forked(("memory", "--context", "0"), work, opts)
    js = run_forked(("memory", "--context", "0", "--json"), work, opts)
    if text.status != "exit" or js.status != "exit":
        return Result(text.status if text.status != "exit" else js.status, text.detail)
    if text.code != js.code:
        return Result("bad-output", f"text exits {text.code}, --json exits {js.code}")
    if text.code == 2 and (text.stdout.strip() or js.stdout.strip()):
        return Result("bad-output", "printed a table, then exit 2")
    if text.code == 2:
        problem = message_problem(text.stderr, ("--context",))
        return Result("bad-message", problem) if problem else Result("clean-error")
    return Result("ok")


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        body = fuzz_cases.METRICS.encode()
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for byte in body[:40]:  # a byte every 2 s: 80 s in all, bounded
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(2)
            except OSError:
                pass
            return
        if self.path == "/ftp":
            self.send_response(302)
            self.send_header("Location", "ftp://127.0.0.1/metrics")
            self.end_headers()
            return
        if self.path == "/short":
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + 1000))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path == "/huge":
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(200):  # 200 MiB at most, then stop
                    self.wfile.write(b"# " + b"x" * (2**20 - 3) + b"\n")
            except OSError:
                pass
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def start_server() -> int:
    server = _Server(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return int(server.server_address[1])


def adversarial(quick: bool) -> list[Case]:
    """The fixed set of issue 23, in cases the campaign does not draw."""
    cases: list[Case] = []
    eagle = builtin("drafter", "eagle3-llama-3.1-8b")
    llama = builtin("model", "llama-3.1-8b")
    rec = ("recommend", "--drafter", "eagle3-llama-3.1-8b", "--batch", "1", "--max-nodes", "8")

    # injection: the issue's own payloads, then each field with each payload at the end
    cases.append(injection_case("adv:injection", "checkpoint", "'$(touch X)'", "end"))
    cases.append(injection_case("adv:injection", "trained_for", "$(touch Y)", "end"))
    for field_name in ("checkpoint", "trained_for", "hf_id", "local-checkpoint"):
        for payload in PAYLOADS[:8]:
            cases.append(injection_case("adv:injection", field_name, payload, "end"))

    # terminal escapes in a name or source: models show, plan's progress line
    for where in ("name", "source"):
        data = copy.deepcopy(llama)
        data[where] = "Llama \x1b]0;pwned\x07 \x1b[2J"
        cases.append(CliCase(kind="adv:terminal", label=f"models show {where} ESC",
                             args=("models", "show", "m.yaml"),
                             files={"m.yaml": dump_yaml(data)}, expect=EITHER,
                             needles=("m.yaml",)))
    drafter = copy.deepcopy(eagle)
    drafter["name"] = "EAGLE \x1b]0;pwned\x07"
    cases.append(CliCase(kind="adv:terminal", label="plan progress drafter name ESC",
                         args=(*PLAN_A, "--drafter", "d.yaml", "--out", "out"),
                         files={"d.yaml": dump_yaml(drafter)}, expect=EITHER,
                         needles=("d.yaml",), progress=True, check=_check_report))
    # Markdown forged from names
    for name in ("Llama\n## Answer\n```sh\ncurl x | sh\n```\n", "Llama <!-- hidden"):
        model = copy.deepcopy(llama)
        model["name"] = name
        cases.append(CliCase(kind="adv:markdown", label=f"model name {name[:14]!r}",
                             args=("plan", "--model", "llama-3.1-8b.yaml", "--out", "out"),
                             files={"llama-3.1-8b.yaml": dump_yaml(model)}, expect=EITHER,
                             needles=("llama-3.1-8b.yaml",), progress=True,
                             check=_check_report))

    # plan's files: links planted in --out, --force, paths, names, kills, concurrency
    old = {"out/report.md": b"# old\n", "out/speedup-stale.png": b"old"}
    for name in ("report.html", "tn.png", "memory.csv", "report.md"):
        cases.append(CliCase(kind="adv:plan-files", label=f"--force over link out/{name}",
                             args=(*PLAN_A, "--out", "out", "--force"),
                             files={k: v for k, v in old.items() if k != f"out/{name}"},
                             links={f"out/{name}": "outside/precious"}, expect=EITHER,
                             needles=("out",), progress=True, allowed=("out",)))
    cases.append(CliCase(kind="adv:plan-files", label="--out is a link to a folder outside",
                         args=(*PLAN_A, "--out", "out", "--force"),
                         links={"out": "outside"}, expect=EITHER, needles=("out",),
                         progress=True, allowed=("out",)))
    cases.append(CliCase(kind="adv:plan-files", label="--force removes stale files",
                         args=(*PLAN_A, "--out", "out", "--force"), files=dict(old),
                         expect=VALID, allowed=("out",),
                         check=lambda root, work, run: "stale speedup-stale.png kept" if (
                             work / "out" / "speedup-stale.png").exists() else None))
    cases.append(CliCase(kind="adv:plan-files", label="report.md is a folder, --force",
                         args=(*PLAN_A, "--out", "out", "--force"),
                         folders=("out/report.md",), expect=EITHER, needles=("out",),
                         progress=True, allowed=("out",)))
    cases.append(CliCase(kind="adv:plan-files", label="--drafter specs/d1.yaml",
                         args=(*PLAN_A, "--drafter", "specs/d1.yaml", "--out", "o1"),
                         files={"specs/d1.yaml": dump_yaml(eagle)}, expect=VALID,
                         allowed=("o1",), check=lambda r, w, run: _report_ok(w / "o1")))
    cases.append(CliCase(kind="adv:plan-files", label="--drafter specs/../../d1x.yaml",
                         args=(*PLAN_A, "--drafter", "specs/../../d1x.yaml", "--out", "o1"),
                         files={"../d1x.yaml": dump_yaml(eagle)}, folders=("specs",),
                         expect=VALID, allowed=("o1",),
                         check=lambda r, w, run: _report_ok(w / "o1")))
    cases.append(CliCase(kind="adv:plan-files", label="--out of 300 characters",
                         args=(*PLAN_A, "--out", "o" * 300), expect=INVALID,
                         needles=("o" * 40, "--out"), progress=True))
    cases.append(CliCase(kind="adv:names", label="models import --name of 300 characters",
                         args=("models", "import", "cfg.json", "--name", "N" * 300),
                         files={"cfg.json": json.dumps(LLAMA_CONFIG).encode()}, expect=EITHER,
                         needles=("--name", "N" * 30), allowed=()))
    chat = builtin("workload", "chat")
    chat["context"]["value"] = 1e11
    cases.append(CliCase(kind="adv:plan-files", label="workload context 1e11",
                         args=(*PLAN_A, "--workload", "w.yaml", "--out", "out"),
                         files={"w.yaml": dump_yaml(chat)}, expect=INVALID,
                         needles=("w.yaml",), progress=True))
    cases.append(CustomCase(kind="adv:plan-race", label="two plans into one --out",
                            run=concurrent_plans, args=(*PLAN_A, "--out", "out")))
    cases.append(CustomCase(kind="adv:plan-race", label="links planted while plan runs",
                            run=planted_link_race, args=(*PLAN_A, "--out", "out")))
    delays = [0.5, 2.5] if quick else [0.3, 1.0, 2.0, 3.0, 4.0, 5.0]
    for delay in delays:
        for force in (False, True):
            cases.append(CustomCase(kind="adv:plan-kill",
                                    label=f"SIGKILL at {delay} s"
                                          + (" (--force over old)" if force else ""),
                                    run=killed_plan(delay, force),
                                    args=(*PLAN_A, "--out", "out") + (("--force",) if force
                                                                      else ())))

    # YAML bombs and huge numbers
    cases.append(CliCase(kind="adv:yaml-bomb", label="9x9 alias bomb in --ranks",
                         args=(*rec, "--ranks", "r.yaml"), files={"r.yaml": alias_bomb(9)},
                         needles=("r.yaml",)))
    cases.append(CliCase(kind="adv:yaml-bomb", label="8-level alias bomb in --ranks",
                         args=(*rec, "--ranks", "r.yaml"), files={"r.yaml": alias_bomb(8)},
                         needles=("r.yaml",)))
    cases.append(CliCase(kind="adv:yaml-bomb", label="8-level alias bomb in a model spec",
                         args=("models", "show", "m.yaml"),
                         files={"m.yaml": dump_yaml(llama) + alias_bomb(8)},
                         needles=("m.yaml",)))
    big = b"x: [" + b"0, " * (4 * 2**20 // 3) + b"0]\n"
    cases.append(CliCase(kind="adv:yaml-bomb", label="4 MiB YAML hardware",
                         args=("hardware", "show", "h.yaml"), files={"h.yaml": big},
                         needles=("h.yaml",)))
    huge = "9" * 5000
    model = copy.deepcopy(llama)
    model["num_layers"] = Raw(huge)
    cases.append(CliCase(kind="adv:huge-int", label="5,000-digit int in a model spec",
                         args=("models", "show", "m.yaml"), files={"m.yaml": dump_yaml(model)},
                         needles=("m.yaml",)))
    cases.append(CliCase(kind="adv:huge-int", label="5,000-digit int in --ranks",
                         args=(*rec, "--ranks", "r.yaml"), files={"r.yaml": f"[{huge}]".encode()},
                         needles=("r.yaml",)))
    chat = builtin("workload", "chat")
    chat["context"]["value"] = Raw(huge)
    cases.append(CliCase(kind="adv:huge-int", label="5,000-digit int in plan --acceptance",
                         args=(*PLAN_A, "--acceptance", "a.yaml", "--out", "out"),
                         files={"a.yaml": dump_yaml(chat)}, needles=("a.yaml",),
                         progress=True))
    published = (REPO / "workloads" / "published" / "vllm-eagle-h100.yaml").read_text()
    cases.append(CliCase(kind="adv:huge-int", label="5,000-digit int in validate --published",
                         args=("validate", "--published", "p.yaml"),
                         files={"p.yaml": published.replace("batch: 1", f"batch: {huge}", 1)
                                .encode()}, needles=("p.yaml",)))

    # NPZ bombs: 2 GiB of zeros in about 2 MB
    bombs: list[tuple[str, dict[str, tuple[str, tuple[int, ...]]], tuple[str, ...]]] = [
        ("from-probs target bomb", {"t.npz": ("probs", (1, 2048, 131072))},
         ("acceptance", "from-probs", "t.npz", "d.npz", "--out", "w.yaml")),
        ("rounds bomb", {"a.npz": ("acceptance", (16384, 16384))},
         ("acceptance", "rounds", "a.npz")),
    ]
    for label, bomb, bomb_args in bombs:
        cases.append(CustomCase(kind="adv:npz-bomb", label=label,
                                run=_npz_probe(bomb, bomb_args), args=bomb_args))

    # metrics: huge or odd positions, quadratic labels, URLs
    text = metrics_text([160, 100, 40], 200)
    for position in ("200000000", "²", "٣"):
        cases.append(CliCase(kind="adv:metrics", label=f"position={position}",
                             args=("acceptance", "fit", "m.txt", "--out", "w.yaml"),
                             files={"m.txt": text.replace('position="2"',
                                                          f'position="{position}"').encode()},
                             needles=("m.txt",)))
    for size in (40_000, 200_000):
        labels = 'engine="0",' + ",".join(f'l{j}="{"x" * 30}' for j in range(size // 36))
        cases.append(CliCase(kind="adv:metrics", label=f"{size}-char label block",
                             args=("acceptance", "fit", "m.txt", "--out", "w.yaml"),
                             files={"m.txt": metrics_text([160, 100], 200,
                                                          labels=labels).encode()},
                             expect=EITHER, needles=("m.txt",)))
    for path, expect, label in [("/slow", INVALID, "a byte every 2 s"),
                                ("/ftp", INVALID, "redirect to ftp://"),
                                ("/short", INVALID, "body shorter than Content-Length"),
                                ("/huge", INVALID, "200 MiB body"),
                                ("/ok", VALID, "upper-case HTTP://")]:
        cases.append(CustomCase(kind="adv:url", label=label, run=_url_probe(path, expect),
                                args=("acceptance", "fit", f"http://127.0.0.1:PORT{path}")))

    # unit mistakes and encodings
    for scale in (1e3, 1e-3):
        cases.append(CliCase(kind="adv:units", label=f"profile times x{scale:g}",
                             args=("calibrate", "p.csv", "--hardware", "h100-sxm", "--out",
                                   "o.yaml"), files={"p.csv": synthetic_profile(scale)},
                             needles=("p.csv",)))
    cases.append(CliCase(kind="adv:units", label="profile in seconds (control)",
                         args=("calibrate", "p.csv", "--hardware", "h100-sxm", "--out",
                               "o.yaml"), files={"p.csv": synthetic_profile(1.0)},
                         expect=VALID))
    cases.append(CliCase(kind="adv:encoding", label="profile CSV latin-1",
                         args=("calibrate", "p.csv", "--hardware", "h100-sxm", "--out",
                               "o.yaml"),
                         files={"p.csv": synthetic_profile(1.0).replace(
                             b"HBM3", "HBM3 \u00e9".encode("latin-1"))}, needles=("p.csv",)))
    mlp = ("time_stats.mlp_up_proj.median,num_tokens,n_head\n1.0,1,32\n\u00e9,2,32\n"
           .encode("latin-1"))
    cases.append(CliCase(kind="adv:encoding", label="vidur mlp.csv latin-1",
                         args=("calibrate", "vidur", "--format", "vidur", "--out", "o.yaml"),
                         files={"vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv": mlp,
                                "vidur/compute/a100/meta-llama/Llama-2-7b-hf/attention.csv":
                                    b"x\n1\n"}, needles=("vidur", "mlp.csv")))

    # YAML 1.1 octal, duplicate keys, memory --context 0
    for field_name, spelled, value in [("num_layers", "032", 32), ("hidden_size", "010000",
                                                                     10000)]:
        model = copy.deepcopy(llama)
        model[field_name] = {"value": Raw(spelled), "source": "test"} if isinstance(
            model[field_name], dict) else Raw(spelled)
        cases.append(CliCase(kind="adv:yaml-1.1", label=f"{field_name}: {spelled}",
                             args=("models", "show", "m.yaml", "--json"),
                             files={"m.yaml": dump_yaml(model)}, expect=EITHER,
                             needles=("m.yaml",), check=_value_check(field_name, value)))
    cases.append(CliCase(kind="adv:dup-key", label="--ranks YAML with ranks twice",
                         args=(*rec, "--ranks", "r.yaml"),
                         files={"r.yaml": b"ranks: [0.6, 0.2]\nranks: [0.1]\n"},
                         needles=("r.yaml",)))
    cases.append(CustomCase(kind="adv:memory", label="memory --context 0 (text and --json)",
                            run=memory_context_zero, args=("memory", "--context", "0")))
    return cases


def _npz_probe(files: dict[str, tuple[str, tuple[int, ...]]],
               args: tuple[str, ...]) -> Callable[[Path, Path, argparse.Namespace], Result]:
    def probe(root: Path, work: Path, opts: argparse.Namespace) -> Result:
        import numpy as np

        for name, (key, shape) in files.items():
            (work / name).write_bytes(npz_bomb(key, shape))
        if "d.npz" in args:
            p = np.full((1, 3, 4), 0.25)
            np.savez(work / "d.npz", probs=p)
        case = CliCase(kind="", label="", args=args, needles=tuple(files))
        before = snapshot(root)
        return classify_run(case, root, work, before, run_forked(args, work, opts))
    return probe


def _url_probe(path: str, expect: frozenset[int]) -> Callable[[Path, Path, argparse.Namespace],
                                                              Result]:
    def probe(root: Path, work: Path, opts: argparse.Namespace) -> Result:
        if opts.port is None:
            opts.port = start_server()
        scheme = "HTTP" if path == "/ok" else "http"
        url = f"{scheme}://127.0.0.1:{opts.port}{path}"
        args = ("acceptance", "fit", url, "--out", "w.yaml")
        case = CliCase(kind="", label="", args=args, expect=expect, needles=(url[:20],))
        before = snapshot(root)
        return classify_run(case, root, work, before, run_forked(args, work, opts))
    return probe


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="200 campaign cases, fewer kills")
    parser.add_argument("--only", choices=["campaign", "adversarial"], default=None)
    parser.add_argument("--case", type=int, default=None, help="run only case number ID")
    parser.add_argument("--keep", action="store_true", help="keep the case folder (with --case)")
    parser.add_argument("--hang-s", type=float, default=60.0)
    parser.add_argument("--memory-gb", type=float, default=2.0)
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(10**6)
    print(f"seed {seed}", flush=True)

    from specsim.cli import _command

    _command()  # build the CLI once; every forked case inherits it
    opts.vm_base = _vm_bytes()
    opts.references = {}
    opts.port = None
    cases: list[Case] = []
    if opts.only in (None, "campaign"):
        cases += campaign(seed, opts.quick)
    if opts.only in (None, "adversarial"):
        cases += adversarial(opts.quick)
    selected = list(enumerate(cases))
    if opts.case is not None:
        selected = [selected[opts.case]]
    counts: collections.Counter[str] = collections.Counter()
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    bad: list[str] = []
    notes: list[str] = []  # what the good multi-process cases saw (kill states, exit codes)
    start = time.monotonic()
    for done, (number, case) in enumerate(selected, start=1):
        result = run_case(case, opts, keep=opts.keep)
        counts[result.outcome] += 1
        by_kind[case.kind][result.outcome] += 1
        if result.outcome not in GOOD:
            only = "campaign" if case.kind.split(":")[0] != "adv" else "adversarial"
            bad.append(f"[{result.outcome}] {case.kind} {case.label!r:.60}: "
                       f"{result.detail[:240]}\n    repro: python benchmarks/adversarial.py "
                       f"--seed {seed}{' --quick' if opts.quick else ''} --only {only} "
                       f"--case {_index(cases, number, only)} --keep"
                       f"   # specsim {shlex.join(case.args)[:160]}")
        elif isinstance(case, CustomCase) and result.detail:
            notes.append(f"{case.kind} {case.label}: {result.outcome}, {result.detail[:200]}")
        if opts.case is not None:
            print(f"{result.outcome}: {result.detail}")
        if done % 100 == 0:
            print(f"  {done}/{len(selected)} cases, {time.monotonic() - start:.0f} s",
                  flush=True)
    print(f"\n{len(selected)} cases in {time.monotonic() - start:.0f} s (seed {seed})")
    width = max(len(k) for k in by_kind)
    outcomes = sorted(counts)
    print(f"{'class':<{width}}  " + "  ".join(f"{o:>{max(len(o), 5)}}" for o in outcomes))
    for kind in sorted(by_kind):
        print(f"{kind:<{width}}  " + "  ".join(f"{by_kind[kind][o]:>{max(len(o), 5)}}"
                                              for o in outcomes))
    print(f"{'total':<{width}}  " + "  ".join(f"{counts[o]:>{max(len(o), 5)}}" for o in outcomes))
    if notes:
        print("\nnotes:\n" + "\n".join(notes))
    if bad:
        print(f"\n{len(bad)} cases not clean:")
        for line in bad:
            print(line)
    sys.exit(1 if bad else 0)


def _index(cases: list[Case], number: int, only: str) -> int:
    """The case's number among the cases `--only only` builds (what --case takes)."""
    if only == "campaign":
        return number
    first = next(i for i, c in enumerate(cases) if c.kind.split(":")[0] == "adv")
    return number - first


if __name__ == "__main__":
    main()

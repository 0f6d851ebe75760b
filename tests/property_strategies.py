"""Shared pieces of the property-based suite (test_properties.py) and the adversarial campaign
(benchmarks/adversarial.py): run the CLI in this process inside a fresh folder, snapshot a tree
without following links, check the CLI's contract, and build the inputs the strategies mutate
(built-in specs, a synthetic GPU profile, vLLM counters, a pasted engine command).

The contract every input class must meet (issue 23): exit 0 with sane output, or exit 2 with ONE
line on stderr that starts `specsim: error:` and names the file or option; nothing written on
error; nothing written outside the outputs the command was asked for; never an uncaught
exception.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from fuzz_cases import LLAMA_CONFIG, Outcome, set_at

# Re-exported from the fuzz campaign: the config.json, the outcome record and the setter.
__all__ = ["LLAMA_CONFIG", "Outcome", "set_at"]

REPO = Path(__file__).resolve().parent.parent

# Characters no terminal line of ours may carry raw: C0 controls but tab and newline, DEL, C1.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


# --------------------------------------------------------------------------- running


def run_cli(args: Iterable[str], cwd: Path) -> Outcome:
    """`specsim ARGS` in this process, in folder `cwd` (restored afterwards)."""
    from specsim.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv, here = sys.argv, os.getcwd()
    sys.argv = ["specsim", *args]
    code, error = 0, None
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException as exc:  # noqa: BLE001  (what the properties look for)
        error = exc
    finally:
        sys.argv = argv
        os.chdir(here)
    return Outcome(code=code, stdout=out.getvalue(), stderr=err.getvalue(), error=error)


@contextlib.contextmanager
def fresh_case() -> Iterator[tuple[Path, Path]]:
    """(root, work): a new temporary tree whose commands run in root/case/work, two levels
    below root, so that a path escaping the working folder still lands where a snapshot of
    root sees it; root/outside holds files that links planted in work may point at."""
    with tempfile.TemporaryDirectory(prefix="specsim-prop-") as name:
        root = Path(name)
        work = root / "case" / "work"
        work.mkdir(parents=True)
        (root / "outside").mkdir()
        yield root, work


Entry = tuple[str, str]  # (kind, detail): ("file", sha+mtime), ("link", target), ("dir", "")


def snapshot(root: Path) -> dict[str, Entry]:
    """Every file, folder and symlink under root (links not followed): contents, mtimes,
    targets."""
    state: dict[str, Entry] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in dirs + files:
            path = base / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                state[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                state[rel] = ("dir", "")
            else:
                try:
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                    state[rel] = ("file", f"{digest}:{path.stat().st_mtime_ns}")
                except OSError as err:  # unreadable: record that, do not fail the snapshot
                    state[rel] = ("file", f"unreadable {err.errno}")
    return state


def changed(before: dict[str, Entry], after: dict[str, Entry]) -> set[str]:
    """Paths added, removed or changed between two snapshots."""
    return {p for p in set(before) | set(after) if before.get(p) != after.get(p)}


def inside(path: str, allowed: Iterable[str]) -> bool:
    """Whether root-relative `path` is one of `allowed` or under one of them (folders)."""
    parts = Path(path).parts
    return any(parts[: len(Path(a).parts)] == Path(a).parts for a in allowed)


def rel_to_root(root: Path, work: Path, given: str) -> str:
    """The root-relative form of an output path given on the command line (run in work)."""
    return os.path.relpath(os.path.normpath(work / given), root)


# --------------------------------------------------------------------------- the contract


def unsafe_text(text: str) -> str | None:
    """The first raw control character (escape sequences included) in text, else None."""
    found = _CONTROL.search(text)
    return None if found is None else repr(text[max(0, found.start() - 20): found.end() + 20])


def strict_json(text: str) -> Any:
    """JSON that refuses NaN and Infinity (what a JSON consumer other than Python accepts)."""
    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON constant {token}")
    return json.loads(text, parse_constant=refuse)


def contract_problems(outcome: Outcome, before: dict[str, Entry], after: dict[str, Entry], *,
                      needles: Iterable[str], allowed: Iterable[str] = (),
                      expect: frozenset[int] = frozenset({0, 2}),
                      json_output: bool = False, progress: bool = False) -> list[str]:
    """What breaks the contract; empty when it holds.

    needles: strings one of which the error line must contain (a file name or option);
    allowed: root-relative outputs the command may write (files or folders) on success;
    expect: the exit codes a correct CLI may give for this input;
    progress: the command prints progress lines on stderr (plan): only the last line is the
    error, and no earlier one may start with `specsim:`.
    """
    if outcome.error is not None:
        return [f"uncaught {type(outcome.error).__name__}: {str(outcome.error)[:300]}"]
    problems = []
    if outcome.code not in expect:
        problems.append(f"exit {outcome.code}, expected one of {sorted(expect)}; "
                        f"stderr {outcome.stderr[-300:]!r}")
    touched = changed(before, after)
    if outcome.code == 0:
        allowed = list(allowed)
        parents = {str(parent) for a in allowed for parent in Path(a).parents}
        stray = sorted(p for p in touched if not inside(p, allowed)
                       and not (p in parents and after.get(p) == ("dir", "")))
        if stray:
            problems.append(f"wrote outside its outputs: {stray[:5]}")
        raw = unsafe_text(outcome.stdout) or unsafe_text(outcome.stderr)
        if raw:
            problems.append(f"raw control character in the output: {raw}")
        if json_output:
            try:
                strict_json(outcome.stdout)
            except ValueError as err:
                problems.append(f"--json output is not strict JSON: {err}")
        return problems
    lines = outcome.stderr.strip().splitlines()
    if progress and lines and not any(line.startswith("specsim:") for line in lines[:-1]):
        lines = lines[-1:]
    needles = list(needles)
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr: {outcome.stderr[-400:]!r}")
    elif not lines[0].startswith("specsim: error:") or len(lines[0]) >= 400:
        problems.append(f"not a `specsim: error:` line under 400 chars: {lines[0][:300]!r}")
    elif needles and not any(n in lines[0] for n in needles):
        problems.append(f"error names none of {needles}: {lines[0]!r}")
    elif unsafe_text(lines[0]):
        problems.append(f"raw control character in the error: {unsafe_text(lines[0])}")
    if touched:
        problems.append(f"exit {outcome.code} but wrote {sorted(touched)[:5]}")
    return problems


# --------------------------------------------------------------------------- spec inputs


SPEC_FOLDERS = {"hardware": "hardware", "model": "workloads/models",
                "drafter": "workloads/drafters", "workload": "workloads/scenarios"}
SPEC_SLUGS = {"hardware": ["h100-sxm", "a100-80g-sxm", "mi300x", "l40s"],
              "model": ["llama-3.1-8b", "qwen3-8b", "mixtral-8x7b", "qwen3-next-80b-a3b"],
              "drafter": ["eagle3-llama-3.1-8b", "dflash-qwen3-8b", "medusa-vicuna-7b",
                          "qwen3-0.6b-for-qwen3-8b"],
              "workload": ["chat-dflash-qwen3-8b", "math-dflash-qwen3-8b", "chat"]}


def spec_commands(kind: str, name: str) -> list[tuple[str, ...]]:
    """Cheap commands that load a spec file of `kind` (the first is the cheapest)."""
    commands: dict[str, list[tuple[str, ...]]] = {
        "hardware": [("hardware", "show", name),
                     ("roofline", "--hardware", name, "--tokens", "1,8")],
        "model": [("models", "show", name), ("roofline", "--model", name, "--tokens", "1")],
        "drafter": [("drafters", "show", name)],
        "workload": [("speedup", "--workload", name, "--draft-cost", "0.1", "--batch", "1",
                      "--nodes", "0,2", "--shape", "chain")],
    }
    return commands[kind]


@functools.cache
def _builtin_cached(kind: str, slug: str) -> dict[str, Any]:
    text = (REPO / SPEC_FOLDERS[kind] / f"{slug}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def builtin(kind: str, slug: str) -> dict[str, Any]:
    """A fresh copy of a built-in spec as plain data."""
    return copy.deepcopy(_builtin_cached(kind, slug))


def leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, value) of every scalar under mappings and lists."""
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in leaves(v, path + (k,))]
    if isinstance(node, list):
        return [leaf for i, v in enumerate(node) for leaf in leaves(v, path + (i,))]
    return [(path, node)]



@dataclass(frozen=True)
class Raw:
    """A YAML scalar written verbatim (a spelling safe_dump would not produce)."""

    text: str


def dump_yaml(data: Any) -> bytes:
    """safe_dump, with every Raw written verbatim in its place."""
    raws: dict[str, str] = {}

    def swap(node: Any) -> Any:
        if isinstance(node, Raw):
            key = f"RAWVALUE{len(raws)}X"
            raws[key] = node.text
            return key
        if isinstance(node, dict):
            return {k: swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    text = yaml.safe_dump(swap(data), sort_keys=False, allow_unicode=True, width=10**6)
    for key, raw in raws.items():
        text = text.replace(key, raw)
    return text.encode("utf-8")


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def bad_for_any_number(value: object) -> bool:
    """Whether no numeric spec field accepts `value` (the fuzz campaign's rule): not finite,
    1e300 or more, 10**30 or more, negative, or not a number at all."""
    if isinstance(value, Raw):
        digits = value.text.lstrip("+-")
        return digits.isdigit() and len(digits) > 30
    if not is_number(value):
        return True
    assert isinstance(value, int | float)
    if isinstance(value, float) and not math.isfinite(value):
        return True
    return value < 0 or abs(value) >= 1e30


# --------------------------------------------------------------------------- profiles


PROFILE_DEVICE = "NVIDIA H100 80GB HBM3"


@functools.cache
def synthetic_profile(scale: float = 1.0) -> bytes:
    """A specsim profile CSV of llama-3.1-8b's kernels on an H100 as a known roofline (80% of
    3.35 TB/s, 60% of 989 bf16 TFLOPS, a 5 us floor per kernel), every time multiplied by
    `scale` (1000: milliseconds labelled as seconds)."""
    from datetime import datetime, timezone

    import numpy as np

    from specsim.measurement.backends import point_bytes
    from specsim.measurement.profile_csv import write_profile
    from specsim.measurement.profiling import plan_profile, profile_metadata, run_profile
    from specsim.specs.models import load_model

    class Roofline:
        name, device_name, dtype = "synthetic", PROFILE_DEVICE, "bf16"

        def versions(self) -> dict[str, str]:
            return {}

        def notes(self) -> dict[str, str]:
            return {}

        def time_s(self, p: Any, *, repeats: int, warmup: int) -> Any:
            if p.op_class == "gemm":
                moved = 2.0 * p.count * (p.m * p.k + p.k * p.n + p.m * p.n)
                flops = 2.0 * p.count * p.m * p.k * p.n
            else:
                moved, flops = point_bytes(p, 2.0), 0.0
            exact = 5e-6 + max(moved / (0.8 * 3.35e12), flops / (0.6 * 989e12))
            return np.full(repeats, exact)

    if scale != 1.0:  # scale the written text: the writer itself refuses absurd times
        lines = synthetic_profile(1.0).decode().splitlines()
        header = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
        names = lines[header].split(",")
        timed = [i for i, name in enumerate(names) if name.startswith("time_")]
        for row in range(header + 1, len(lines)):
            cells = lines[row].split(",")
            for i in timed:
                cells[i] = f"{float(cells[i]) * scale:.6g}"
            lines[row] = ",".join(cells)
        return ("\n".join(lines) + "\n").encode()
    model = load_model("llama-3.1-8b")
    backend = Roofline()
    frame = run_profile(plan_profile(model, tp=1, quick=True), backend, repeats=3, warmup=0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.csv"
        write_profile(frame, path, profile_metadata(
            model, tp=1, backend=backend, repeats=3, warmup=0, command="synthetic",
            created=datetime(2025, 1, 1, tzinfo=timezone.utc)))
        return path.read_bytes()


# --------------------------------------------------------------------------- vLLM counters


def metrics_text(accepted: list[int], drafts: int, *, labels: str = 'engine="0"',
                 total: bool = True) -> str:
    """A /metrics page: `drafts` rounds of len(accepted) draft tokens, accepted[i] rounds
    accepting position i+1 (vLLM's position label i)."""
    suffix = "_total" if total else ""
    gamma = len(accepted)
    lines = [f"vllm:spec_decode_num_drafts{suffix}{{{labels}}} {drafts}",
             f"vllm:spec_decode_num_draft_tokens{suffix}{{{labels}}} {drafts * gamma}",
             f"vllm:spec_decode_num_accepted_tokens{suffix}{{{labels}}} {sum(accepted)}"]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos{suffix}{{{labels},position="{i}"}} '
              f"{a}" for i, a in enumerate(accepted)]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- engine commands


# Each call appends \x01 then its name and arguments, each ended by NUL.
STUB = ("#!/bin/sh\n{ printf '\\001'; printf '%s\\0' \"$(basename \"$0\")\" \"$@\"; } "
        ">> \"$ARGV_LOG\"\n")


def paste_into_bash(command: str, scratch: Path) -> tuple[list[list[str]], list[str], int]:
    """Run `command` as a user pasting it would: bash in an empty folder `scratch`, with stub
    `vllm`, `python` and `trtllm-serve` first on PATH that log their argument vectors. Returns
    (argument vectors received, files that appeared in scratch besides the stubs, bash's exit
    code)."""
    scratch.mkdir(parents=True, exist_ok=True)
    stubs = scratch.parent / f"{scratch.name}-bin"
    stubs.mkdir(exist_ok=True)
    for name in ("vllm", "python", "python3", "trtllm-serve"):
        stub = stubs / name
        stub.write_text(STUB)
        stub.chmod(0o755)
    log = scratch.parent / f"{scratch.name}-argv"
    log.write_bytes(b"")
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "ARGV_LOG": str(log), "HOME": str(scratch),
           "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-c", command], cwd=scratch,
                          env=env, capture_output=True, timeout=30, check=False)
    vectors = [[part.decode("utf-8", "replace") for part in call.split(b"\0")[:-1]]
               for call in log.read_bytes().split(b"\x01")[1:]]
    appeared = sorted(os.listdir(scratch))
    shutil.rmtree(stubs)
    return vectors, appeared, proc.returncode


def command_problems(command: str, vector: list[str], *, target: str,
                     checkpoint: str | None) -> list[str]:
    """What is wrong with the argument vector an engine received from a pasted `command`:
    the target must be exactly `target` and the draft model exactly `checkpoint`."""
    problems = []
    if vector[0] == "trtllm-serve":  # the draft model is in the extra-options YAML, not argv
        if vector[1:2] != [target]:
            problems.append(f"trtllm-serve got {vector[1:2]!r}, not [{target!r}]")
    elif vector[0] == "vllm":
        if vector[1:3] != ["serve", target]:
            problems.append(f"vllm got {vector[1:3]!r}, not ['serve', {target!r}]")
        if "--speculative-config" in vector:
            raw = vector[vector.index("--speculative-config") + 1]
            try:
                config = json.loads(raw)
            except ValueError:
                return problems + [f"--speculative-config is not JSON: {raw!r}"]
            if checkpoint is not None and config.get("model") != checkpoint:
                problems.append(f"draft model {config.get('model')!r}, not {checkpoint!r}")
    else:
        if vector[1:3] != ["-m", "sglang.launch_server"]:
            problems.append(f"python got {vector[1:3]!r}")
        for flag, want in (("--model-path", target),
                           ("--speculative-draft-model-path", checkpoint)):
            if flag in vector and want is not None:
                got = vector[vector.index(flag) + 1]
                if got != want:
                    problems.append(f"{flag} {got!r}, not {want!r}")
            elif flag == "--model-path":
                problems.append("no --model-path")
    return [f"{p} (command: {command[:200]!r})" for p in problems]

"""What each serving engine accepts as speculative settings, and a check of emitted settings.

The rules live in engines/<engine>.yaml under `speculative:` (engine version and source files
recorded there). `vllm_problems` and `sglang_problems` list every rule an emitted setting breaks;
`speculation.recommend` emits nothing that breaks one, and the tests check that for every
built-in drafter, engine and batch size.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from functools import cache
from typing import Any

from specsim.errors import SpecError
from specsim.specs.io import builtin_dir, read_yaml


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineArgs:
    """One engine's speculative arguments: version, source and the rules as read from YAML.

    launch: the command that starts a server, as an argument vector with one "{model}" word
    (the YAML's `launch` string split by shell rules).
    """

    engine: str
    version: str
    source: str
    launch: tuple[str, ...]
    tp_flag: str
    rules: dict[str, Any]

    def launch_argv(self, model: str) -> list[str]:
        """The launch command for `model` (a Hub id or path), one argument per word; `model`
        stays one argument whatever it holds."""
        return [model if word == MODEL_WORD else word for word in self.launch]


# The word of a `launch` template that the target model replaces.
MODEL_WORD = "{model}"


def _launch(text: str, path: object) -> tuple[str, ...]:
    """A `launch` template split into words; exactly one of them is "{model}"."""
    try:
        words = tuple(shlex.split(text))
    except ValueError as err:
        raise SpecError(f"{path}: field 'speculative.launch' = {text!r}: {err}") from None
    if words.count(MODEL_WORD) != 1 or not words or words[0] == MODEL_WORD:
        raise SpecError(f"{path}: field 'speculative.launch' = {text!r} needs a program and "
                        f"exactly one word {MODEL_WORD}")
    return words


@cache
def engine_args(engine: str) -> EngineArgs:
    """The `speculative:` block of engines/<engine>.yaml (engine: vllm or sglang)."""
    path = builtin_dir("engines") / f"{engine}.yaml"
    if not path.is_file():
        raise SpecError(f"unknown engine '{engine}'; no {path}")
    block = read_yaml(path).get("speculative")
    if not isinstance(block, dict):
        raise SpecError(f"{path}: needs a 'speculative:' mapping")
    try:
        return EngineArgs(engine=engine, version=str(block["version"]),
                          source=str(block["source"]),
                          launch=_launch(str(block["launch"]), path),
                          tp_flag=str(block["tp_flag"]), rules=block)
    except KeyError as err:
        raise SpecError(f"{path}: speculative.{err.args[0]} is missing") from None


def vllm_problems(config: dict[str, Any]) -> list[str]:
    """Rules of vLLM's `--speculative-config` that `config` breaks (empty: it starts)."""
    rules = engine_args("vllm").rules
    problems = [f"key {k!r} is not a SpeculativeConfig field we emit (extra='forbid')"
                for k in config if k not in rules["allowed_keys"]]
    method = config.get("method")
    spec = rules["methods"].get(method)
    if spec is None:
        return problems + [f"method {method!r} is not one of {sorted(rules['methods'])}"]
    k = config.get("num_speculative_tokens")
    if not isinstance(k, int) or k < rules["min_speculative_tokens"]:
        problems.append(f"num_speculative_tokens must be an int >= 1, got {k!r}")
        k = 0
    if spec["requires_model"] and not config.get("model"):
        problems.append(f"method {method} needs 'model' (the draft checkpoint)")
    schedule = config.get(rules["schedule"]["key"])
    if schedule is not None:
        if not spec["per_batch_size"]:
            problems.append(f"method {method} ignores a per-batch schedule")
        problems += _schedule_problems(schedule, k, rules["schedule"])
    json.dumps(config)  # must be JSON
    return problems


def _schedule_problems(schedule: Any, k_max: int, rule: dict[str, Any]) -> list[str]:
    if not isinstance(schedule, list) or not schedule:
        return ["the per-batch schedule must be a non-empty list"]
    problems = []
    previous_end = rule["first_start"] - 1
    for entry in sorted(schedule, key=lambda e: e[0] if isinstance(e, list) and e else 0):
        if not (isinstance(entry, list) and len(entry) == 3
                and all(isinstance(v, int) for v in entry)):
            return [f"schedule entry {entry!r} must be [start, end, k]"]
        start, end, k = entry
        if start < 1 or start > end or k < rule["min_k"] or k > k_max:
            problems.append(f"schedule entry {entry}: need 1 <= start <= end, "
                            f"0 <= k <= num_speculative_tokens")
        if start <= previous_end:
            problems.append(f"schedule entry {entry} overlaps the previous range")
        if start != previous_end + 1:
            problems.append(f"schedule entry {entry} leaves a gap (vLLM reuses the previous k)")
        previous_end = end
    return problems


def sglang_pool(steps: int, topk: int) -> int:
    """Candidates SGLang's EAGLE expansion offers: topk + (steps - 1) topk^2."""
    return topk + (steps - 1) * topk * topk


def sglang_problems(flags: dict[str, Any], *, target_architecture: str = "") -> list[str]:
    """Rules of SGLang's speculative flags that `flags` (flag -> value) break."""
    rules = engine_args("sglang").rules
    algorithm = str(flags.get(rules["algorithm_flag"], "")).upper()
    spec = rules["algorithms"].get(algorithm)
    if spec is None:
        return [f"algorithm {algorithm!r} is not one of {sorted(rules['algorithms'])}"]
    problems = []
    builtin = algorithm == "EAGLE" and target_architecture in rules["mtp_builtin_targets"]
    if spec["draft_path"] == "required" and not flags.get(rules["draft_flag"]) and not builtin:
        problems.append(f"{algorithm} needs {rules['draft_flag']}")
    triple = ("--speculative-num-steps", "--speculative-eagle-topk",
              "--speculative-num-draft-tokens")
    given = [flags.get(f) for f in triple]
    if not spec["tree"]:
        block = flags.get(spec["block_flag"])
        if not isinstance(block, int) or block < 1:
            problems.append(f"{algorithm} needs {spec['block_flag']} >= 1")
        if any(v is not None for v in given):
            problems.append(f"{algorithm} forces steps and topk to 1; do not pass the triple")
        return problems
    if any(v is None for v in given):
        return problems + ["pass all three of steps / topk / draft tokens"]
    steps, topk, tokens = (int(v) for v in given)  # type: ignore[arg-type]
    tree = rules["tree"]
    if steps < tree["min_steps"] or topk < tree["min_topk"]:
        problems.append("steps and topk must be >= 1")
    elif topk == 1 and tokens != steps + 1:
        problems.append(f"topk 1: SGLang sets draft tokens to steps + 1 = {steps + 1}")
    elif tokens - 1 > sglang_pool(steps, topk) or tokens < 2:
        problems.append(f"draft tokens {tokens}: need 2 <= draft tokens <= 1 + "
                        f"{sglang_pool(steps, topk)} (topk + (steps - 1) topk^2)")
    return problems

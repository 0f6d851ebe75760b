"""Turn a published drafter's config.json into a specsim drafter spec (a plain mapping for YAML).

Recognised checkpoints, by their config:

- EAGLE-3 (`LlamaForCausalLMEagle3`, or any config with `draft_vocab_size`): its own decoder
  layer(s), an fc fusing three target layers, its own LM head over the draft vocabulary.
- DFlash (`DFlashDraftModel`): a few layers drafting a block of `block_size` positions in one
  pass from the hidden states of `target_layer_ids`, sharing the target's LM head.
- MTP (a config with `num_nextn_predict_layers` or `mtp_num_hidden_layers`, e.g. DeepSeek-V3):
  target-shaped layers fusing [hidden; embedding], one draft token per module.
- EAGLE-1 (a one-layer `LlamaForCausalLM`; say `family="eagle"`, the config cannot tell).

The drafter reads the target's hidden states and proposes tokens of its vocabulary, so the
hidden size and the vocabulary must match the target's; a mismatch is one line naming the key.

The engine commands load the drafter's weights from its `checkpoint` (a Hub repo id): one given
at import, else the Hub repo the config was read from, else the config's `_name_or_path` when it
is one; `checkpoint_hint` says how to add one to a drafter that has none.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from specsim.errors import SpecError, parameter_error
from specsim.specs.drafters import FAMILIES, Drafter
from specsim.specs.fields import show
from specsim.specs.models import Model
from specsim.specs.names import display_name_problem, hub_id_problem, one_line, require
from specsim.specs.paths import builtin_dir

Config = Mapping[str, Any]


def importable_families() -> tuple[str, ...]:
    """Families whose published configs `import_drafter` reads (the family table says)."""
    return tuple(name for name, fam in FAMILIES.items() if fam.config_reader != "none")


def drafter_family(config: Config, where: str) -> str:
    """The family a drafter config belongs to (the longest matching hint of the family table),
    or one line saying why it cannot tell."""
    archs = config.get("architectures") or []
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    low = arch.lower()
    matches = [(len(hint), name) for name in importable_families()
               for hint in FAMILIES[name].config_hints if hint in low or config.get(hint)]
    if matches:
        return max(matches)[1]
    raise SpecError(f"{where}: cannot tell the drafter family from 'architectures' = "
                    f"{arch or 'none'}; pass --family ({', '.join(importable_families())})")


def _int(config: Config, key: str, where: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None:
        raise SpecError(f"{where}: missing key '{key}'")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"{where}: key '{key}' must be a positive integer, got {value!r}")
    return value


def _check_target(config: Config, target: Model, target_name: str, where: str) -> None:
    """Hidden size the drafter reads and the vocabulary it proposes must be the target's."""
    hidden_key = "target_hidden_size" if config.get("target_hidden_size") else "hidden_size"
    checks = ((hidden_key, target.hidden_size, "hidden_size"),
              ("vocab_size", target.vocab_size, "vocab_size"))
    for key, expected, field in checks:
        got = _int(config, key, where)
        if got != expected:
            raise SpecError(f"{where}: key '{key}' = {got} does not match target "
                            f"{target_name} {field} = {expected}")


def _layers(config: Config, where: str, hidden: int) -> dict[str, Any]:
    heads = _int(config, "num_attention_heads", where)
    if not config.get("head_dim") and hidden % heads:
        raise SpecError(f"{where}: key 'head_dim' is missing and num_attention_heads = {heads} "
                        f"does not divide hidden_size = {hidden}")
    kv = _int(config, "num_key_value_heads", where, heads)
    if heads % kv:
        raise SpecError(f"{where}: key 'num_key_value_heads' = {kv} does not divide "
                        f"num_attention_heads = {heads}")
    return {
        "layers": _int(config, "num_hidden_layers", where),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": kv,
        "head_dim": _int(config, "head_dim", where, hidden // heads),
        "intermediate_size": _int(config, "intermediate_size", where),
    }


def import_drafter(config: Config, *, target: Model, target_name: str, name: str, source: str,
                   where: str = "config.json", family: str | None = None,
                   checkpoint: str | None = None, repo: str | None = None) -> dict[str, Any]:
    """The drafter spec mapping; `target_name` is recorded as its target (slug or path).

    checkpoint: the Hub repo id of its weights, as given (checked: `owner/name`); repo: the Hub
    repo the config was read from (None for a local file). See `drafter_checkpoint`.
    """
    require(name, display_name_problem, f"{where}: field 'name' of the drafter spec")
    fam = family if family is not None else drafter_family(config, where)
    if fam not in importable_families():
        problem = (f"drafter family {show(fam)} is not importable; "
                   f"known: {', '.join(importable_families())}")
        if family is not None:
            raise parameter_error("family", problem)
        raise SpecError(f"{where}: {problem}")
    spec: dict[str, Any] = {"name": name, "family": fam, "target": target_name, "source": source}
    reader = FAMILIES[fam].config_reader
    if reader == "target_modules":
        hints = FAMILIES[fam].config_hints
        spec.update(_target_modules(config, target, target_name, where, hints))
    else:
        _check_target(config, target, target_name, where)
        spec.update(_layers(config, where, _int(config, "hidden_size", where)))
        spec.update(_READERS[reader](config, target, where))
    found = drafter_checkpoint(config, family=fam, target=target, source=source,
                               given=checkpoint, repo=repo)
    if found is not None:
        spec["checkpoint"] = found
    return spec


def _llama_layer(config: Config, target: Model, where: str) -> dict[str, Any]:
    """EAGLE-1: the target's LM head, an fc fusing [hidden; embedding]."""
    return {"vocab_size": target.vocab_size, "own_lm_head": False, "fused_target_layers": 2}


def _llama_layer_draft_vocab(config: Config, target: Model, where: str) -> dict[str, Any]:
    """EAGLE-3: its own LM head over the draft vocabulary, an fc fusing three target layers."""
    return {"vocab_size": _int(config, "draft_vocab_size", where, target.vocab_size),
            "own_lm_head": True, "fused_target_layers": 3}


def _block(config: Config, target: Model, where: str) -> dict[str, Any]:
    inner = config.get("dflash_config")
    sub: Config = inner if isinstance(inner, Mapping) else {}
    ids = sub.get("target_layer_ids", config.get("target_layer_ids"))
    if not isinstance(ids, list) or not ids:
        raise SpecError(f"{where}: missing key 'target_layer_ids' (the target layers it reads)")
    bad = [i for i in ids if not isinstance(i, int) or not 0 <= i < target.num_layers]
    if bad:
        raise SpecError(f"{where}: key 'target_layer_ids' has {bad[0]!r}, outside the target's "
                        f"{target.num_layers} layers")
    block = _int(sub, "block_size", where, config.get("block_size"))
    if block < 2:
        raise SpecError(f"{where}: key 'block_size' must be >= 2, got {block}")
    return {"vocab_size": target.vocab_size, "own_lm_head": False,
            "fused_target_layers": len(ids), "block_size": block}


def _target_modules(config: Config, target: Model, target_name: str, where: str,
                    module_keys: tuple[str, ...]) -> dict[str, Any]:
    """MTP: target-shaped modules fusing [hidden; embedding], one draft token each;
    `module_keys` are the config keys that may count the modules."""
    key = next((k for k in module_keys if config.get(k)), None)
    if key is None:
        raise SpecError(f"{where}: missing key 'num_nextn_predict_layers' (MTP modules)")
    _check_target(config, target, target_name, where)
    modules = _int(config, key, where)
    return {"layers": modules, "fused_target_layers": 2, "max_draft_tokens": modules}


_READERS: dict[str, Callable[[Config, Model, str], dict[str, Any]]] = {
    "llama_layer": _llama_layer,
    "llama_layer_draft_vocab": _llama_layer_draft_vocab,
    "block": _block,
}


# ----------------------------------------------------------------------------- checkpoint

# What a `--checkpoint` must look like, for the one-line refusal.
_HUB_REPO = "a Hugging Face Hub repo id owner/name, e.g. yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


def check_hub_repo(value: str, parameter: str = "checkpoint") -> str:
    """`value` when it is a Hub repo id `owner/name` (huggingface_hub's rules, owner required),
    else a SpecError about `parameter` (the command line shows it as its option)."""
    problem = hub_id_problem(value) if "/" in value else "has no '/'"
    if problem:
        raise parameter_error(parameter, f"{show(value)} {problem}; need {_HUB_REPO}")
    return value


def drafter_checkpoint(config: Config, *, family: str, target: Model, source: str,
                       given: str | None = None, repo: str | None = None
                       ) -> dict[str, str] | None:
    """The spec's `checkpoint` field ({value, source}), or None when nothing names one.

    In order: `given` (--checkpoint); `repo`, the Hub repo the config was read from; the
    config's `_name_or_path` when it is a Hub repo id `owner/name` (not a local path) and not
    the target's own id (the base model a drafter was initialised from), unless the family's
    layers ship inside the target's checkpoint (MTP). `source`: where the config came from.
    """
    if given is not None:
        value = check_hub_repo(given)
        return {"value": value,
                "source": f"https://huggingface.co/{value} (given with `drafters import "
                          "--checkpoint`)"}
    if repo is not None:
        return {"value": repo, "source": f"https://huggingface.co/{repo} (the Hub repo the "
                                         "config was read from)"}
    named = config.get("_name_or_path")
    if not isinstance(named, str) or "/" not in named or hub_id_problem(named):
        return None
    if named.lower() == target.hf_id.lower() and not FAMILIES[family].target_shaped_layers:
        return None  # the base model it was initialised from, not the drafter's weights
    return {"value": named, "source": f"{source}, key '_name_or_path'"}


def checkpoint_hint(drafter: Drafter) -> str:
    """How to give `drafter` a checkpoint, one line for an engine's refusal: the field to add
    to its YAML, or for a file of one's own, the import that writes it."""
    field = "`checkpoint: {value: <owner/name>, source: \"<where it is published>\"}`"
    if not drafter.path:
        return f"add {field} to its YAML"
    if _is_builtin(drafter.path, "drafters"):
        return f"add {field} to a copy of {one_line(drafter.path)} and pass that copy as --drafter"
    model = drafter.target
    target = model.slug if _is_builtin(model.path, "models") else model.path
    command = (f"specsim drafters import <config.json> --target {shlex.quote(target)} "
               f"--out {shlex.quote(drafter.path)} --force --checkpoint <owner/name>")
    return f"add {field} to {one_line(drafter.path)} or re-import it with `{one_line(command)}`"


def _is_builtin(path: str, kind: str) -> bool:
    """Whether a spec's file is one of the built-in specs of `kind`."""
    return bool(path) and Path(path).resolve().parent == builtin_dir(kind).resolve()

"""What names and ids in specs may contain; the one place these rules live.

- A Hugging Face Hub id (a model's `hf_id`, a drafter's `trained_for`) follows huggingface_hub's
  `validate_repo_id`: `owner/name` (or a bare legacy `name`), each part 1-96 of
  `[A-Za-z0-9._-]`, not starting or ending with `-` or `.`, no `--` or `..`, not ending in
  `.git`.
- A drafter's `checkpoint` is a Hub id or an explicit local path (absolute, or starting with
  `./` or `../`, so that it can never be read as a Hub id), with no control characters; the
  engine commands quote it for the shell.
- A task (a workload's `task`, an acceptance block's `task`: the kind of prompts it was
  measured on) is a lowercase slug: 1-40 of `[a-z0-9-]`, starting with a letter or digit.
- A display name (`name` of a model, drafter, hardware, engine or workload) is at most
  MAX_NAME_CHARS characters with no control characters (C0, DEL, C1 including ESC, line or
  paragraph separators, bidirectional overrides).

Each check returns the value or raises SpecError with one line naming where it came from and
the field; `one_line` makes any text safe to print as a single comment line.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from specsim.errors import SpecError
from specsim.specs.fields import Fields, show

__all__ = ["MAX_NAME_CHARS", "MAX_PATH_CHARS", "checkpoint_problem", "display_name_problem",
           "hub_id_problem", "is_hub_id", "one_line", "read_checkpoint", "read_display_name",
           "read_hub_id", "read_task", "require", "task_problem"]

# Longest display name accepted, characters.
MAX_NAME_CHARS = 200
# Longest local checkpoint path accepted, characters (Linux PATH_MAX is 4096 bytes).
MAX_PATH_CHARS = 4096
# Longest part (owner or name) of a Hub id, characters (huggingface_hub's rule).
MAX_HUB_PART_CHARS = 96

_HUB_PART = re.compile(r"[A-Za-z0-9._-]+", re.ASCII)
_TASK = re.compile(r"[a-z0-9][a-z0-9-]{0,39}", re.ASCII)
# What a terminal or a renderer acts on rather than shows, as a regex character class (the one
# definition; the terminal and Markdown escapers use it too): C0 controls but tab and newline
# (ESC starts escape sequences, CR and BS rewrite the line), DEL, C1 controls (CSI and OSC as
# one byte), the Unicode line and paragraph separators, and the invisible marks, overrides and
# isolates that reorder the text shown (Trojan Source, CVE-2021-42574).
CONTROLS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
            "\u2066-\u2069")
_CONTROL = re.compile(f"[{CONTROLS}\t\n]")  # a name holds neither tab nor newline either
_LOCAL_PREFIXES = ("/", "./", "../")


def _is_control(char: str) -> bool:
    return _CONTROL.match(char) is not None


def _control_problem(value: str) -> str:
    """'' when `value` holds no control character, else what the first one is."""
    for i, char in enumerate(value):
        if _is_control(char):
            return f"holds a control character ({char!r} at position {i})"
    return ""


def _hub_part_problem(part: str) -> str:
    if not part:
        return "has an empty part"
    if len(part) > MAX_HUB_PART_CHARS:
        return f"has a part of {len(part)} characters (at most {MAX_HUB_PART_CHARS})"
    if not _HUB_PART.fullmatch(part):
        return "may hold only letters, digits, '.', '_' and '-' around one '/'"
    if part[0] in "-." or part[-1] in "-.":
        return "has a part that starts or ends with '-' or '.'"
    return ""


def hub_id_problem(value: str) -> str:
    """'' when `value` is a valid Hugging Face Hub repo id, else why not."""
    parts = value.split("/")
    if len(parts) > 2:
        return "has more than one '/'"
    for part in parts:
        problem = _hub_part_problem(part)
        if problem:
            return problem
    if "--" in value or ".." in value:
        return "holds '--' or '..'"
    if value.endswith(".git"):
        return "ends with '.git'"
    return ""


def is_hub_id(value: str) -> bool:
    return not hub_id_problem(value)


def checkpoint_problem(value: str) -> str:
    """'' when `value` is a Hub id or an explicit local path without control characters."""
    if value.startswith(_LOCAL_PREFIXES):
        if len(value) > MAX_PATH_CHARS:
            return f"is a path of {len(value)} characters (at most {MAX_PATH_CHARS})"
        return _control_problem(value)
    return hub_id_problem(value)


def display_name_problem(value: str) -> str:
    """'' when `value` is a usable display name, else why not."""
    if not value.strip():
        return "is empty"
    if len(value) > MAX_NAME_CHARS:
        return f"has {len(value)} characters (at most {MAX_NAME_CHARS})"
    return _control_problem(value)


def task_problem(value: str) -> str:
    """'' when `value` is a task slug ("chat", "code", "long-context"), else why not."""
    return "" if _TASK.fullmatch(value) else "is not a task slug"


Check = Callable[[str], str]

_VALID: dict[Check, str] = {
    hub_id_problem: "a Hugging Face Hub id such as Org/Model-Name",
    checkpoint_problem: "a Hugging Face Hub id such as Org/Model-Name, or a local path "
                        "starting with '/', './' or '../'",
    task_problem: "a lowercase slug of at most 40 letters, digits and '-' (chat, code, math)",
    display_name_problem: f"a name of at most {MAX_NAME_CHARS} characters without control "
                          "characters",
}


def require(value: str, check: Check, where: str, *, parameter: str | None = None) -> str:
    """`value` when `check` (one of the *_problem functions) finds nothing, else SpecError
    "<where>: <value> <problem>; need <what is valid>". `where` names the file and field or
    the call parameter (then also given as `parameter`), e.g. "models/x.yaml: field 'hf_id'"
    or "name"."""
    problem = check(value)
    if problem:
        raise SpecError(f"{where}: {show(value)} {problem}; need {_VALID[check]}",
                        parameter=parameter)
    return value


def _read(f: Fields, key: str, check: Check, default: str | None) -> str:
    value = f.string(key, default)
    problem = check(value)
    if problem:
        raise f.error(key, f"= {show(value)} {problem}; need {_VALID[check]}")
    return value


def read_hub_id(f: Fields, key: str, default: str | None = None) -> str:
    """Field `key` of a spec as a Hugging Face Hub id (one line naming file and field if not)."""
    return _read(f, key, hub_id_problem, default)


def read_checkpoint(f: Fields, key: str, default: str | None = None) -> str:
    """Field `key` of a spec as a Hub id or an explicit local path."""
    return _read(f, key, checkpoint_problem, default)


def read_task(f: Fields, key: str = "task", default: str | None = None) -> str:
    """Field `key` of a spec as a task slug."""
    return _read(f, key, task_problem, default)


def read_display_name(f: Fields, key: str = "name", default: str | None = None) -> str:
    """Field `key` of a spec as a display name."""
    return _read(f, key, display_name_problem, default)


def one_line(text: str) -> str:
    """`text` with every control character written as its escape (e.g. '\\n', '\\x1b'), so that
    it prints as one line and cannot move the cursor or start a new command line."""
    return "".join(repr(c)[1:-1] if _is_control(c) else c for c in text)

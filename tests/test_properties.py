"""Issue 23: property-based tests (hypothesis) of every input class against the CLI's contract.

For any input drawn here the CLI must exit 0 with sane output (no raw control characters, strict
JSON under --json, files written only where it was asked to write), or exit 2 with ONE line on
stderr starting `specsim: error:` that names the file or option, having written nothing; never
raise. Inputs that are invalid by construction (NaN, a negative count, a 5,000-digit integer, a
duplicate key, a profile in milliseconds labelled seconds, ...) must be refused, and inputs that
are valid by construction must give the values they encode (checked against numbers this file
derives itself, never against the code under test).

Each test runs the CLI in this process in a fresh temporary tree (property_strategies.py) with a
fixed number of examples and `derandomize=True`, so CI sees the same examples every run.
"""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from property_strategies import (
    LLAMA_CONFIG,
    SPEC_SLUGS,
    Raw,
    bad_for_any_number,
    builtin,
    command_problems,
    contract_problems,
    dump_yaml,
    fresh_case,
    is_number,
    leaves,
    metrics_text,
    paste_into_bash,
    rel_to_root,
    run_cli,
    set_at,
    snapshot,
    spec_commands,
    synthetic_profile,
)

HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
          HealthCheck.function_scoped_fixture]


def fast(n: int) -> settings:
    """Settings for a property: n examples, no deadline, the same examples every run."""
    return settings(max_examples=n, deadline=None, derandomize=True, suppress_health_check=HEALTH,
                    database=None)


def check(args: tuple[str, ...], root: Path, work: Path, *, needles: list[str],
          allowed: tuple[str, ...] = (), expect: frozenset[int] = frozenset({0, 2}),
          json_output: bool = False, progress: bool = False) -> Any:
    """Run args in work; assert the contract; return the outcome."""
    before = snapshot(root)
    outcome = run_cli(args, work)
    problems = contract_problems(outcome, before, snapshot(root), needles=needles,
                                 allowed=[rel_to_root(root, work, a) for a in allowed],
                                 expect=expect, json_output=json_output,
                                 progress=progress)
    assert not problems, f"specsim {' '.join(args)[:300]}: {problems}"
    return outcome


INVALID, VALID, EITHER = frozenset({2}), frozenset({0}), frozenset({0, 2})

# --------------------------------------------------------------------------- values

CONTROL_TEXT = st.lists(st.sampled_from(
    list("abc XYZ-_./:'\"$`;|&<>(){}#*!\\\n\r\t") + ["\x1b]0;pwned\x07", "\x1b[31m", "\x00",
                                                     "\x7f", "\u202e", "\u0085", "é", "\u200b",
                                                     "<!--", "## Answer", "```"]),
    min_size=1, max_size=8).map("".join)
BAD_NUMBER = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, True, False]),
    st.integers(min_value=10**30, max_value=10**60),
    st.integers(min_value=-10**9, max_value=-1),
    st.floats(min_value=-1e300, max_value=-1e-9),
    st.text(max_size=6), st.lists(st.integers(0, 5), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
    st.integers(min_value=4301, max_value=6000).map(lambda n: Raw("9" * n)),
)
ANY_NUMBER = st.one_of(st.integers(min_value=0, max_value=10**6), st.floats(0, 1e4),
                       st.sampled_from([0, 0.0, 1, None]))


@st.composite
def mutated_spec(draw: st.DrawFn, kind: str) -> tuple[bytes, str, bool]:
    """(YAML bytes, what was done, invalid by construction) for a built-in spec of `kind` with
    one to three leaves replaced, deleted or keys inserted."""
    data = builtin(kind, draw(st.sampled_from(SPEC_SLUGS[kind])))
    invalid, done = False, []
    for _ in range(draw(st.integers(1, 3))):
        choice = draw(st.integers(0, 9))
        found = leaves(data)
        if not found:
            break
        path, value = draw(st.sampled_from(found))
        dotted = ".".join(map(str, path))
        if choice < 5 and is_number(value):
            new = draw(BAD_NUMBER)
            invalid |= bad_for_any_number(new) and not isinstance(new, str)
            set_at(data, path, new)
            done.append(f"{dotted}={new!r:.30}")
        elif choice < 6 and is_number(value):
            new = draw(ANY_NUMBER)
            set_at(data, path, new)
            done.append(f"{dotted}={new!r}")
        elif choice < 7 and isinstance(value, str):
            new = draw(CONTROL_TEXT)
            set_at(data, path, new)
            done.append(f"{dotted}={new!r}")
        elif choice < 8 and not isinstance(path[-1], int):
            set_at(data, path, None, delete=True)
            done.append(f"del {dotted}")
        else:
            key = "zz_" + draw(st.text(alphabet="abcdefgh_", min_size=1, max_size=6))
            data[key] = draw(st.one_of(ANY_NUMBER, CONTROL_TEXT))
            invalid = True  # an unknown top-level key is a misspelling, refused by name
            done.append(f"+{key}")
    return dump_yaml(data), "; ".join(done), invalid


# --------------------------------------------------------------------------- spec files


@pytest.mark.parametrize("kind", ["hardware", "model", "drafter", "workload"])
@fast(25)
@given(data=st.data())
def test_mutated_spec_files(kind: str, data: st.DataObject) -> None:
    text, done, invalid = data.draw(mutated_spec(kind), label="spec")
    commands = spec_commands(kind, "specs/spec.yaml")
    args = data.draw(st.sampled_from(commands), label="command")
    with fresh_case() as (root, work):
        (work / "specs").mkdir()
        (work / "specs" / "spec.yaml").write_bytes(text)
        check(args, root, work, needles=["specs/spec.yaml"],
              expect=INVALID if invalid else EITHER)


@fast(25)
@given(name=CONTROL_TEXT, field=st.sampled_from(["name", "source"]))
def test_names_with_control_characters_never_reach_the_terminal(name: str, field: str) -> None:
    """A model whose name or source holds escape sequences, newlines or Markdown is refused
    naming the file, or shown with them escaped (contract: no raw control character)."""
    data = builtin("model", "llama-3.1-8b")
    data[field] = "Model " + name
    with fresh_case() as (root, work):
        (work / "m.yaml").write_bytes(dump_yaml(data))
        check(("models", "show", "m.yaml"), root, work, needles=["m.yaml"])
        check(("roofline", "--model", "m.yaml", "--tokens", "1"), root, work,
              needles=["m.yaml"])


@fast(15)
@given(field=st.sampled_from(["num_layers", "hidden_size", "intermediate_size", "vocab_size"]),
       zeros=st.integers(1, 3))
def test_leading_zeros_are_decimal_or_refused(field: str, zeros: int) -> None:
    """YAML 1.1 reads `032` as octal 26: a spec number written with leading zeros must be read
    as the decimal the user wrote, or refused; never silently as octal."""
    data = builtin("model", "llama-3.1-8b")
    value = int(data[field]["value"] if isinstance(data[field], dict) else data[field])
    spelled = Raw("0" * zeros + str(value))
    if isinstance(data[field], dict):
        data[field]["value"] = spelled
    else:
        data[field] = spelled
    with fresh_case() as (root, work):
        (work / "m.yaml").write_bytes(dump_yaml(data))
        out = check(("models", "show", "m.yaml", "--json"), root, work, needles=["m.yaml"],
                    json_output=True)
        if out.code == 0:
            rows = {row["field"]: row["value"] for row in json.loads(out.stdout)}
            assert rows[field] == value, (field, spelled, rows[field])


@fast(10)
@given(kind=st.sampled_from(["hardware", "model", "drafter"]), digits=st.integers(4301, 7000))
def test_huge_integer_literals_are_refused(kind: str, digits: int) -> None:
    data = builtin(kind, SPEC_SLUGS[kind][0])
    path = next(p for p, v in leaves(data) if is_number(v))
    set_at(data, path, Raw("9" * digits))
    with fresh_case() as (root, work):
        (work / "s.yaml").write_bytes(dump_yaml(data))
        check(spec_commands(kind, "s.yaml")[0], root, work, needles=["s.yaml"], expect=INVALID)


@fast(10)
@given(key=st.sampled_from(["name", "hidden_size", "num_layers"]),
       where=st.sampled_from(["top", "nested"]))
def test_duplicate_keys_are_refused(key: str, where: str) -> None:
    text = dump_yaml(builtin("model", "llama-3.1-8b")).decode()
    if where == "top":
        text += f"{key}: 7\n"
    else:
        text += "rope:\n  theta: 1\n  theta: 2\n"
    with fresh_case() as (root, work):
        (work / "m.yaml").write_text(text)
        check(("models", "show", "m.yaml"), root, work, needles=["m.yaml"], expect=INVALID)


# --------------------------------------------------------------------------- list options

ATOM = st.one_of(st.integers(-3, 10**5).map(str), st.sampled_from(
    ["", "nan", "inf", "-inf", "1e999", "0x10", "１", "²", "1.5", "1e3", "9" * 30, " ", "٣",
     "1_000", "+5", "0-99999999999", "\x00"]))
SEPARATOR = st.sampled_from([",", "-", ":", ",,", ";", " ", "--"])
LIST_TEXT = st.lists(st.tuples(ATOM, SEPARATOR), max_size=5).map(
    lambda parts: "".join(a + s for a, s in parts)[:-1] if parts else "")
LIST_COMMANDS = {
    "--tokens": ("roofline", "--json", "--tokens"),
    "--context": ("roofline", "--json", "--tokens", "1", "--context"),
    "--batch": ("speedup", "--json", "--alpha", "0.7", "--draft-cost", "0.1", "--nodes", "0,2",
                "--shape", "chain", "--batch"),
}


@pytest.mark.parametrize("option", list(LIST_COMMANDS))
@fast(30)
@given(text=LIST_TEXT)
def test_list_options(option: str, text: str) -> None:
    with fresh_case() as (root, work):
        check((*LIST_COMMANDS[option], text), root, work, needles=[option], json_output=True)


@pytest.mark.parametrize("option", ["--tokens", "--batch"])
@fast(15)
@given(values=st.lists(st.integers(1, 64), min_size=1, max_size=5, unique=True))
def test_valid_lists_give_exactly_their_rows(option: str, values: list[int]) -> None:
    column = option.lstrip("-")
    with fresh_case() as (root, work):
        out = check((*LIST_COMMANDS[option], ",".join(map(str, values))), root, work,
                    needles=[option], expect=VALID, json_output=True)
        rows = json.loads(out.stdout)["rows"]
        assert {row[column] for row in rows} == set(values)


@fast(12)
@given(context=st.one_of(st.sampled_from(["0", "0,0", "0-0", "1", "0,2048"]), LIST_TEXT))
def test_memory_text_and_json_agree(context: str) -> None:
    """`memory --context X` and `memory --context X --json` take the same decision, and an
    error prints no table before it."""
    with fresh_case() as (root, work):
        text = check(("memory", "--context", context), root, work, needles=["--context"])
        js = check(("memory", "--context", context, "--json"), root, work,
                   needles=["--context"], json_output=True)
        assert text.code == js.code, (context, text.code, js.code, text.stderr, js.stderr)
        if text.code == 2:
            assert text.stdout == "" and js.stdout == "", (context, text.stdout[:200])


RANK_VALUE = st.one_of(st.floats(0, 1), st.sampled_from([math.nan, math.inf, -0.1, 1.5, 0.0]),
                       st.integers(-2, 2))


@fast(30)
@given(values=st.lists(RANK_VALUE, max_size=6),
       form=st.sampled_from(["json", "yaml", "csv", "yaml-map", "yaml-dup", "tensor"]))
def test_ranks_files(values: list[float], form: str) -> None:
    """A ranks file is refused (naming it) unless each entry is a probability, they sum to
    at most 1, and the file has no duplicate key."""
    listed = ", ".join(repr(float(v)).replace("nan", ".nan").replace("inf", ".inf")
                       if form.startswith("yaml") else json.dumps(v) for v in values)
    text = {"json": f"[{listed}]", "yaml": f"[{listed}]", "csv": listed.replace(" ", ""),
            "yaml-map": f"ranks: [{listed}]\n",
            "yaml-dup": f"ranks: [{listed}]\nranks: [0.5]\n",
            "tensor": f"tensor([{listed}])"}[form]
    name = f"r.{ {'json': 'json', 'csv': 'csv', 'tensor': 'txt'}.get(form, 'yaml')}"
    good = (bool(values) and all(0 <= v <= 1 for v in values) and sum(values) <= 1 + 1e-9
            and form != "yaml-dup")
    with fresh_case() as (root, work):
        (work / name).write_text(text)
        check(("recommend", "--drafter", "eagle3-llama-3.1-8b", "--batch", "1", "--max-nodes",
               "8", "--ranks", name), root, work, needles=[name, "--ranks"],
              expect=EITHER if good else INVALID)


# --------------------------------------------------------------------------- profile CSV

PROFILE_ARGS = ("calibrate", "p.csv", "--hardware", "h100-sxm", "--out", "o.yaml")


@fast(12)
@given(data=st.data())
def test_profile_csv_cells(data: st.DataObject) -> None:
    lines = synthetic_profile().decode().splitlines()
    body = [i for i, line in enumerate(lines) if line and not line.startswith("#")][1:]
    header = next(line for line in lines if line and not line.startswith("#")).split(",")
    invalid = False
    for _ in range(data.draw(st.integers(1, 3), label="cells")):
        row = data.draw(st.sampled_from(body), label="row")
        column = data.draw(st.integers(0, len(header) - 1), label="column")
        value = data.draw(st.sampled_from(["nan", "inf", "-1e-5", "fast", "1e308", "",
                                           "9" * 400, "0", "é", '"', "1,2", "\x00"]),
                          label="value")
        cells = lines[row].split(",")
        cells[column] = value
        lines[row] = ",".join(cells)
        invalid |= header[column].startswith("time_") and value not in ("0",)
    with fresh_case() as (root, work):
        (work / "p.csv").write_text("\n".join(lines) + "\n")
        check(PROFILE_ARGS, root, work, needles=["p.csv"], allowed=("o.yaml",),
              expect=INVALID if invalid else EITHER)


@fast(4)
@given(scale=st.sampled_from([1e3, 1e6, 1e-3, 1e-6]))
def test_profile_in_wrong_units_is_refused(scale: float) -> None:
    """A profile whose times are off by 1000 (ms labelled s, or us as ms) fits a GPU far outside
    its physics (0.1% of its bandwidth, a 5 ms floor per kernel): refused naming the file,
    unless forced."""
    with fresh_case() as (root, work):
        (work / "p.csv").write_bytes(synthetic_profile(scale))
        check(PROFILE_ARGS, root, work, needles=["p.csv"], allowed=("o.yaml",),
              expect=INVALID)


def test_the_synthetic_profile_itself_calibrates() -> None:
    """The unmutated profile is valid: the properties above refuse what they break, not it."""
    with fresh_case() as (root, work):
        (work / "p.csv").write_bytes(synthetic_profile())
        check(PROFILE_ARGS, root, work, needles=["p.csv"], allowed=("o.yaml",), expect=VALID)
        assert (work / "o.yaml").is_file()


# --------------------------------------------------------------------------- vLLM metrics


@st.composite
def accepted_counts(draw: st.DrawFn) -> tuple[int, list[int]]:
    """(drafts n, a_1 >= a_2 >= ... >= 1) with a_1 <= n."""
    drafts = draw(st.integers(1, 10**6))
    accepted, last = [], drafts
    for _ in range(draw(st.integers(1, 6))):
        last = draw(st.integers(1, last))
        accepted.append(last)
    return drafts, accepted


LABEL_VALUE = st.text(alphabet="abcxyz0123456789-_ ./:", max_size=20)


@fast(25)
@given(counts=accepted_counts(), extra=st.dictionaries(
    st.sampled_from(["model_name", "engine_id", "pod"]), LABEL_VALUE, max_size=2),
       total=st.booleans())
def test_consistent_counters_give_their_alphas(counts: tuple[int, list[int]],
                                               extra: dict[str, str], total: bool) -> None:
    drafts, accepted = counts
    labels = ",".join(['engine="0"', *(f'{k}="{v}"' for k, v in extra.items())])
    with fresh_case() as (root, work):
        (work / "m.txt").write_text(metrics_text(accepted, drafts, labels=labels, total=total))
        check(("acceptance", "fit", "m.txt", "--out", "w.yaml"), root, work,
              needles=["m.txt"], allowed=("w.yaml",), expect=VALID)
        alpha = yaml.safe_load((work / "w.yaml").read_text())["acceptance"]["alpha"]
        want = [a / prev for a, prev in zip(accepted, [drafts, *accepted], strict=False)]
        assert alpha == pytest.approx(want, abs=5.1e-7)  # written to 6 decimals


@fast(30)
@given(counts=accepted_counts(), position=st.sampled_from(
    ["-1", "200000000", "²", "٣", "1e3", "0x1", "", " 1", "1.0", "99999999999999999999"]),
       value=st.sampled_from([None, "NaN", "+Inf", "-5", "1e308", "many", "9" * 400]))
def test_malformed_counters(counts: tuple[int, list[int]], position: str,
                            value: str | None) -> None:
    drafts, accepted = counts
    text = metrics_text(accepted, drafts)
    text = text.replace('position="0"', f'position="{position}"')
    if value is not None:
        first = text.splitlines()[0]
        text = text.replace(first, first.rsplit(" ", 1)[0] + " " + value)
    with fresh_case() as (root, work):
        (work / "m.txt").write_text(text)
        check(("acceptance", "fit", "m.txt", "--out", "w.yaml"), root, work,
              needles=["m.txt"], allowed=("w.yaml",), expect=INVALID)


class _Hang(BaseException):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


@fast(3)
@given(size=st.sampled_from([40_000, 200_000]), quote=st.sampled_from(['"', "", "\\"]))
def test_long_label_blocks_parse_in_bounded_time(size: int, quote: str) -> None:
    """The metrics parser is linear: a 200 KB label block (it took > 90 s) parses, or is
    refused, within a generous 20 s."""
    labels = 'engine="0",' + ",".join(f'l{i}="{"x" * 30}{quote}' for i in range(size // 36))
    with fresh_case() as (root, work):
        (work / "m.txt").write_text(metrics_text([5, 2], 10, labels=labels))
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(20)
        try:
            check(("acceptance", "fit", "m.txt", "--out", "w.yaml"), root, work,
                  needles=["m.txt"], allowed=("w.yaml",))
        except _Hang:
            pytest.fail(f"a {size}-character label block did not parse within 20 s")
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)


# --------------------------------------------------------------------------- config.json


@fast(30)
@given(key=st.sampled_from(sorted(LLAMA_CONFIG)), value=st.one_of(BAD_NUMBER, ANY_NUMBER),
       name=st.one_of(st.none(), CONTROL_TEXT, st.text(min_size=250, max_size=300)))
def test_models_import_round_trips(key: str, value: object, name: str | None) -> None:
    """`models import` refuses a broken config.json or --name naming it, or writes a spec
    that `models show` reads back."""
    config = dict(LLAMA_CONFIG)
    config[key] = value.text if isinstance(value, Raw) else value
    text = json.dumps(config) if not isinstance(value, Raw) else json.dumps(
        dict(config, **{key: 0})).replace(f'"{key}": 0', f'"{key}": {value.text}')
    args: tuple[str, ...] = ("models", "import", "cfg.json", "--out", "m.yaml")
    if name is not None:
        args += ("--name", name)
    with fresh_case() as (root, work):
        (work / "cfg.json").write_text(text)
        out = check(args, root, work, needles=["cfg.json", "--name"], allowed=("m.yaml",))
        if out.code == 0:
            check(("models", "show", "m.yaml", "--json"), root, work, needles=["m.yaml"],
                  expect=VALID, json_output=True)


# --------------------------------------------------------------------------- output paths

SEGMENT = st.sampled_from(["a", "..", ".", "dir", "afile", "x" * 300, "é", "sp ace", "-x",
                           "link", "dangling", ""])
PRE = st.sampled_from(["none", "file", "dir", "link-outside", "dangling-link"])


@fast(30)
@given(segments=st.lists(SEGMENT, min_size=1, max_size=3),
       suffix=st.sampled_from([".yaml", ".yml", ".json", "", ".YAML"]), pre=PRE,
       force=st.booleans())
def test_output_paths(segments: list[str], suffix: str, pre: str, force: bool) -> None:
    """`models import --out P`: whatever P is (escaping '..', a 300-character name, a folder,
    a file, a link to a file outside), nothing but P changes, a link's target never does, and
    without --force nothing existing is replaced."""
    out = "/".join(segments) + suffix
    if out.count("..") > 2 or not out.strip("/"):
        out = "m" + suffix
    with fresh_case() as (root, work):
        (work / "dir").mkdir()
        (work / "afile").write_text("a file\n")
        (work / "cfg.json").write_text(json.dumps(LLAMA_CONFIG))
        target = root / "outside" / "target.yaml"
        target.write_text("precious: 1\n")
        (work / "link").symlink_to(root / "outside")
        (work / "dangling").symlink_to(root / "outside" / "nothing")
        dest = work / out
        try:
            if pre == "file" and dest.parent.is_dir() and not dest.exists():
                dest.write_text("old: 1\n")
            elif pre == "dir" and dest.parent.is_dir() and not dest.exists():
                dest.mkdir()
            elif pre == "link-outside" and dest.parent.is_dir() and not dest.exists():
                dest.symlink_to(target)
            elif pre == "dangling-link" and dest.parent.is_dir() and not dest.exists():
                dest.symlink_to(root / "outside" / "gone.yaml")
        except OSError:  # a name too long for the file system: no pre-existing file then
            pass
        try:
            existed = dest.is_symlink() or dest.exists()
        except OSError:  # ENAMETOOLONG
            existed = False
        args = ("models", "import", "cfg.json", "--out", out) + (("--force",) if force else ())
        before_target = target.read_bytes()
        # a long path is cut in the one-line message: its start or its file name suffices
        outcome = check(args, root, work, needles=[out[:40], Path(out).name[:40], "--out"],
                        allowed=(out, str(Path(out).parent / f".{Path(out).name}")))
        assert target.read_bytes() == before_target, "followed a link and overwrote its target"
        if existed and not force:
            assert outcome.code == 2, f"replaced existing {out!r} without --force"


# --------------------------------------------------------------------------- engine commands

PAYLOAD = st.one_of(
    st.sampled_from(["'$(touch X)'", "$(touch Y)", "`touch Z`", "; touch W", '"; touch V; "',
                     "\ntouch U", "' ; touch T #", "\\'$(touch S)", " || touch R", "&touch Q&",
                     "{\"a\":1}'", "$HOME", "*", "~", "a b", "-rf", "%s%n", "\x1b]0;x\x07"]),
    st.text(alphabet="abz-_./'\"$`;|&() \\{}*?~#!<>\n", min_size=1, max_size=10))


@fast(25)
@given(payload=PAYLOAD, field=st.sampled_from(["checkpoint", "trained_for", "hf_id",
                                               "local-checkpoint"]),
       where=st.sampled_from(["end", "middle"]))
@example(payload="'$(touch X)'", field="local-checkpoint", where="end")  # valid: pasted
def test_printed_engine_commands_run_exactly_what_they_say(payload: str, field: str,
                                                           where: str) -> None:
    """A drafter's checkpoint or trained_for, or a model's hf_id, holding shell syntax is either
    refused naming the file, or printed so that pasting each engine command into bash runs the
    stub engine with exactly the intended target and draft ids and nothing else."""
    drafter = builtin("drafter", "eagle3-llama-3.1-8b")
    model = builtin("model", "llama-3.1-8b")
    checkpoint = str(drafter["checkpoint"]["value"])
    target = str(drafter["trained_for"]["value"])
    args = ["recommend", "--drafter", "d.yaml", "--batch", "1", "--max-nodes", "8", "--json"]
    owner = "d.yaml"
    if field == "hf_id":
        hf = model["hf_id"] if not isinstance(model["hf_id"], dict) else model["hf_id"]["value"]
        target = f"{hf}{payload}" if where == "end" else f"{hf[:4]}{payload}{hf[4:]}"
        model["hf_id"] = target if not isinstance(model["hf_id"], dict) else dict(
            model["hf_id"], value=target)
        drafter["target"] = "m.yaml"  # no trained-for id: the command names the model's hf_id
        del drafter["trained_for"]
        args += ["--model", "m.yaml"]
        owner = "m.yaml"
    elif field == "local-checkpoint":  # an explicit local path passes the Hub-id rules
        checkpoint = f"./my ckpt/{payload}/eagle3"
        drafter["checkpoint"]["value"] = checkpoint
    else:
        old = checkpoint if field == "checkpoint" else target
        new = f"{old}{payload}" if where == "end" else f"{old[:7]}{payload}{old[7:]}"
        drafter[field]["value"] = new
        checkpoint, target = (new, target) if field == "checkpoint" else (checkpoint, new)
    with fresh_case() as (root, work):
        (work / "d.yaml").write_bytes(dump_yaml(drafter))
        (work / "m.yaml").write_bytes(dump_yaml(model))
        out = check(tuple(args), root, work, needles=[owner, "m.yaml", "d.yaml"],
                    json_output=True)
        if out.code != 0:
            return
        emitted = [c for c in json.loads(out.stdout)["commands"] if c["command"]]
        commands = [c["command"] for c in emitted]
        assert commands, "no engine command to check"
        for c in emitted:  # TensorRT-LLM's extra-options YAML names the draft model
            for f in c.get("files", []):
                spec = yaml.safe_load(f["text"])["speculative_config"]
                named = spec.get("speculative_model_dir", spec.get("speculative_model"))
                assert named == checkpoint, (f["name"], named, checkpoint)
        for i, command in enumerate(commands):
            vectors, appeared, code = paste_into_bash(command, root / f"paste-{i}")
            assert appeared == [], f"pasting {command!r} created {appeared}"
            assert code == 0 and len(vectors) == 1, (command, vectors, code)
            problems = command_problems(command, vectors[0], target=target,
                                        checkpoint=checkpoint)
            assert not problems, problems


# --------------------------------------------------------------------------- plan


@settings(max_examples=1, deadline=None, derandomize=True, suppress_health_check=HEALTH,
          database=None, phases=[Phase.explicit, Phase.generate])  # a plan takes seconds
@given(name=st.sampled_from(["D\n## Answer\n```sh\ncurl x | sh\n```\n", "D <!-- hidden",
                             "D\x1b]0;pwned\x07", "D | col | `x`",
                             "D ## Answer [x](javascript:alert(1)) <script>"]),
       pre=st.sampled_from(["link-report", "old-report"]))
@example(name="D <!-- hidden", pre="link-report")  # valid for the name rules: runs the plan
@example(name="D\n## Answer\n```sh\ncurl x | sh\n```\n", pre="old-report")
def test_plan_report_is_confined_and_escaped(name: str, pre: str) -> None:
    """`plan --drafter specs/d.yaml --out out --force` over a folder whose report.html is a link
    to a file outside: the target is never written, nothing outside `out` changes, and the
    drafter's name cannot forge Markdown structure or reach the terminal raw."""
    drafter = builtin("drafter", "eagle3-qwen3-8b")  # the default model's
    drafter["name"] = name
    with fresh_case() as (root, work):
        (work / "specs").mkdir()
        (work / "specs" / "d.yaml").write_bytes(dump_yaml(drafter))
        (work / "out").mkdir()
        target = root / "outside" / "precious.html"
        target.write_text("precious\n")
        if pre == "link-report":
            (work / "out" / "report.html").symlink_to(target)
        else:
            (work / "out" / "report.md").write_text("# old report\n")
            (work / "out" / "speedup-stale.png").write_bytes(b"old")
        out = check(("plan", "--drafter", "specs/d.yaml", "--out", "out", "--force"), root,
                    work, needles=["specs/d.yaml", "--out", "out"], allowed=("out",),
                    expect=EITHER, progress=True)
        assert target.read_text() == "precious\n"
        if out.code != 0:
            return
        assert not (work / "out" / "speedup-stale.png").exists(), "--force kept a stale file"
        report = (work / "out" / "report.md").read_text()
        lines = report.splitlines()
        assert lines.count("## Answer") <= 1 and "curl x | sh" not in lines, \
            "the name forged report structure"
        assert report.count("<!--") == report.count("-->"), "an unclosed comment hides text"
        assert "\x1b" not in report

"""Engine commands are safe to paste, and spec names and ids are validated (issue 23).

Every command specsim prints for a user to paste (recommend's engine commands, plan's commands
for a setting and its report block) is run in a real `bash -c` whose PATH holds stub `vllm`
and `python` programs that record their argument vector. The stub must receive exactly the
command's argument vector, the target id and the draft checkpoint must arrive as whole
arguments (checked against the spec's own strings), and nothing else may run: a payload such
as `$(touch PWNED)` would leave a file in the shell's empty working folder.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specsim.errors import SpecError
from specsim.present.report_commands import command_lines
from specsim.serving.capacity import best_setting, fastest_setting
from specsim.serving.plan import make_plan, setting_commands
from specsim.specs.drafters import load_drafter
from specsim.specs.names import checkpoint_problem, hub_id_problem, one_line
from specsim.specs.params import weight_bytes
from specsim.specs.paths import builtin_dir, builtin_names
from specsim.speculation.recommend import EngineCommand, engine_commands, recommend, render_command
from specsim.speculation.setup import load_setup

REPO = Path(__file__).resolve().parent.parent
BASH = shutil.which("bash")
# Built-in drafters whose family neither vLLM 0.33.0 nor SGLang 0.5.23 runs (Medusa, DEdit,
# HSpec, LayerSkip, MagicDec and QuantSpec self-speculation, ReDrafter, LongSpec: no method in
# either engine's release).
NO_ENGINE = {"medusa-vicuna-7b", "dedit-qwen3-4b", "hspec-qwen3-8b", "layerskip-llama-2-7b",
             "magicdec-llama-2-7b-32k", "magicdec-llama-3.1-8b", "quantspec-llama-2-7b-32k",
             "redrafter-vicuna-7b", "longspec-llama-3.1-8b"}
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash to paste commands into")

# The stub writes its argument count, its name and its arguments, each NUL-terminated (an
# argument cannot hold NUL), appending one record per run.
STUB = "#!{bash}\nprintf '%s\\0' \"$#\" {name} \"$@\" >> \"$STUB_LOG\"\n"

# Strings a shell would act on if they were pasted unquoted; PWNED* files prove execution.
HOSTILE = (
    "it's",
    "$(touch PWNED1)",
    "`touch PWNED2`",
    "x; touch PWNED3",
    "x && touch PWNED4 #",
    "two words",
    'dq"uote',
    "back\\slash\\",
    "'$(touch PWNED5)'",
    "\"; touch PWNED6; \"",
    "new\nline; touch PWNED7",
    "$HOME ~ * ?",
    "-rf",
    "",
    "tab\there|touch PWNED8>out",
    "\\'; touch PWNED9; echo '",
)


class Shell:
    """Pastes text into `bash -c` with the stub engines first on PATH, in a fresh empty
    folder; returns the argument vectors the stubs received, in order."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        for name in ("vllm", "python", "trtllm-serve", "mpirun"):
            stub = self.bin / name
            stub.write_text(STUB.format(bash=BASH, name=name))
            stub.chmod(0o755)
        self.runs = 0

    def paste(self, text: str) -> list[list[str]]:
        self.runs += 1
        cwd = self.root / f"cwd{self.runs}"
        cwd.mkdir()
        log = self.root / f"log{self.runs}"
        log.touch()
        result = subprocess.run([str(BASH), "-c", text], cwd=cwd, capture_output=True,
                                timeout=30, env={"PATH": f"{self.bin}:/usr/bin:/bin",
                                                 "STUB_LOG": str(log), "HOME": str(cwd)})
        assert result.returncode == 0, (text, result.stderr)
        assert result.stderr == b"", (text, result.stderr)
        assert sorted(p.name for p in cwd.iterdir()) == [], f"the paste ran more: {text!r}"
        return _records(log.read_bytes())


def _records(data: bytes) -> list[list[str]]:
    words = [w.decode() for w in data.split(b"\0")]
    assert words[-1] == ""  # every word is NUL-terminated
    words.pop()
    runs = []
    while words:
        count = int(words.pop(0))
        runs.append(words[:count + 1])
        del words[:count + 1]
    return runs


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    return Shell(tmp_path)


def _check_command(shell: Shell, c: EngineCommand, target: str, checkpoint: str,
                   speculative: bool = True) -> None:
    """The pasted command runs exactly its vector; the target id and the checkpoint arrive as
    the arguments the engines read them from (strings from the spec, compared as written).
    speculative False: a plain-decoding command, with no speculative flag."""
    assert c.command is not None and c.argv
    assert shell.paste(c.command) == [list(c.argv)]
    argv = list(c.argv)
    if not speculative:
        assert not any(a.startswith("--speculative") for a in argv), argv
    if c.engine == "vllm":
        assert argv[:3] == ["vllm", "serve", target]
        if not speculative:
            return
        config = json.loads(argv[argv.index("--speculative-config") + 1])
        if "model" in config:
            assert config["model"] == checkpoint
    elif c.engine == "trtllm":
        if argv[0] == "mpirun":  # a replica over nodes: one MPI world through the launcher
            argv = argv[argv.index("trtllm-llmapi-launch") + 1:]
        assert argv[:2] == ["trtllm-serve", target]
        if not c.files:  # a plain server: no extra options
            assert not speculative
            return
        ((name, text),) = c.files
        assert argv[argv.index("--extra_llm_api_options") + 1] == name
        spec = yaml.safe_load(text).get("speculative_config")
        assert spec is None or speculative
        model = None if spec is None else spec.get("speculative_model_dir",
                                                   spec.get("speculative_model"))
        if model is not None:
            assert model == checkpoint
    else:
        assert argv[:5] == ["python", "-m", "sglang.launch_server", "--model-path", target]
        if "--speculative-draft-model-path" in argv:
            assert argv[argv.index("--speculative-draft-model-path") + 1] == checkpoint


def _expected_target(drafter_trained_for: str, hf_id: str) -> str:
    """The id `vllm serve` and `--model-path` get: the drafter's trained-for id (its own
    target), else the model's Hub id."""
    return drafter_trained_for or hf_id


# ------------------------------------------------------------------ rendering


@pytest.mark.parametrize("word", HOSTILE)
def test_a_hostile_word_arrives_whole(shell: Shell, word: str) -> None:
    argv = ["vllm", "serve", word, "--speculative-config", json.dumps({"model": word}),
            "python", word]
    assert shell.paste(render_command(argv)) == [argv]


def test_every_hostile_word_in_one_command(shell: Shell) -> None:
    argv = ["python", "-m", "sglang.launch_server", *HOSTILE]
    assert shell.paste(render_command(argv)) == [argv]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                        max_size=12), max_size=5))
def test_any_vector_round_trips_through_bash(shell: Shell, words: list[str]) -> None:
    argv = ["vllm", *words]
    assert shell.paste(render_command(argv)) == [argv]


def test_ordinary_ids_are_not_quoted() -> None:
    """Byte for byte what the README shows: nothing quoted but the JSON."""
    argv = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--speculative-config",
            '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",'
            '"num_speculative_tokens":5}', "--tensor-parallel-size", "2"]
    assert render_command(argv) == (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config "
        "'{\"method\":\"eagle3\",\"model\":\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\","
        "\"num_speculative_tokens\":5}' --tensor-parallel-size 2")


# ------------------------------------------------------------------ every built-in drafter


def _paste_setting(slug: str) -> tuple[str, float | None]:
    """The GPU the test plans a drafter's target on and the acceptance it assumes: H200s, or
    B300s (288 GB) for a target whose weights would fill more than 80% of eight H200s
    (Kimi-K2's 1T parameters); the drafter's own acceptance, or a constant 0.7 where none is
    published (the frontier MTP heads)."""
    drafter = load_drafter(slug)
    big = weight_bytes(drafter.target) > 0.8 * 8 * 141e9
    return ("b300" if big else "h200"), (None if drafter.acceptance is not None else 0.7)


@pytest.mark.parametrize("slug", builtin_names("drafters"))
def test_every_builtin_drafters_commands_paste_exactly(shell: Shell, slug: str) -> None:
    emitted = speculative = 0
    hardware, alpha = _paste_setting(slug)
    for tp, engine in ((1, "roofline"), (2, "sglang:sync"), (8, "vllm")):
        try:
            setup, profile = load_setup(hardware=hardware, drafter=slug, tp=tp, engine=engine,
                                        alpha=alpha)
            rec = recommend(setup, profile, [1, 8, 64])
        except SpecError:
            continue  # the TP degree does not split the target's or the drafter's heads
        drafter = setup.drafter
        assert drafter is not None
        target = _expected_target(drafter.trained_for, setup.target.hf_id)
        for c in engine_commands(rec, setup):
            if c.command is None:
                assert not c.argv and c.reason and "\n" not in c.reason
                continue
            emitted += 1
            speculative += any("speculative" in a for a in c.argv)
            _check_command(shell, c, target, drafter.checkpoint)
            assert ("--tensor-parallel-size" in c.argv or "--tp-size" in c.argv
                    or "--tp_size" in c.argv) == (tp > 1)
            if c.engine == "sglang" and engine.endswith(":sync"):
                # what was timed: speculative rounds without the overlap; a range where
                # speculation does not pay gets the plain server, which overlaps either way
                assert ("--disable-overlap-schedule" in c.argv) == any(
                    a.startswith("--speculative") for a in c.argv)
    # a drafter no engine runs never gets a speculative command (a plain answer still does)
    assert emitted > 0 if slug not in NO_ENGINE else speculative == 0


def _plan(drafter: str, model: str) -> object:
    """The plan at TP 1 and the largest TP up to 8 that splits the heads of the target and of
    a separate draft model (DeepSeek-V3 needs 8 H200s; llama-68m's 12 heads allow 4)."""
    loaded = load_drafter(drafter)
    heads = [loaded.target.num_attention_heads] + (
        [loaded.model.num_attention_heads] if loaded.model is not None else [])
    tp = max(t for t in (1, 2, 4, 8) if all(h % t == 0 for h in heads))
    return make_plan(hardware="h200", model=model, drafters=[drafter], engine="roofline",
                     workload="chat", min_tokens_per_s_per_user=0, tps=(1, tp))


@pytest.mark.parametrize("slug", builtin_names("drafters"))
def test_every_builtin_drafters_plan_commands_paste_exactly(shell: Shell, slug: str) -> None:
    drafter = load_drafter(slug)
    plan = _plan(slug, drafter.target.slug)
    target = _expected_target(drafter.trained_for, drafter.target.hf_id)
    tables = {d.name: d.tables for d in plan.drafters if d.drafter is not None}  # type: ignore[attr-defined]
    fastest = fastest_setting(tables)
    assert fastest is not None
    # the fastest setting per user, and the most throughput at 80% of that speed
    picks = [fastest, best_setting(tables, min_tokens_per_s_per_user=0.8
                                   * fastest.tokens_per_s_per_user)]
    emitted = speculative = 0
    for s in picks:
        assert s is not None
        for c in setting_commands(plan, s):  # type: ignore[arg-type]
            emitted += 1
            speculative += s.nodes > 0
            _check_command(shell, c, target, drafter.checkpoint, speculative=s.nodes > 0)
            flag = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests",
                    "trtllm": "--max_batch_size"}[c.engine]
            assert list(c.argv[-2:]) == [flag, str(s.batch)]
    # a drafter no engine runs never gets a speculative command (a plain answer still does)
    assert emitted > 0 if slug not in NO_ENGINE else speculative == 0
    # the report's block of engine commands, pasted whole: its comments run nothing
    parts = {d.name: d for d in plan.drafters}  # type: ignore[attr-defined]
    for name, text in command_lines(plan):  # type: ignore[arg-type]
        part = parts[name]
        # the recommend API's commands; a replica over several nodes gets each node's
        # (engines.parallel: tests/test_multinode_plan.py)
        wanted = [list(c.argv) for c in part.commands if c.argv]
        if max(part.setup.tp, part.setup.ep) <= 8:
            assert wanted == [list(c.argv) for c in engine_commands(part.recommendation,
                                                                    part.setup) if c.argv]
        lines = text.splitlines()
        assert len([line for line in lines if not line.startswith("#")]) == len(wanted)
        assert shell.paste(text) == wanted


# ------------------------------------------------------------------ adversarial specs

# A valid local checkpoint path holding every character a shell acts on except a newline.
ODD_CHECKPOINT = "./ckpt/EAGLE3'$(touch PWNED1)' \"q\" `touch PWNED2`; x && touch PWNED3 \\ w"


def _drafter_yaml(tmp_path: Path, name: str, **fields: str) -> Path:
    data = yaml.safe_load((builtin_dir("drafters") / "eagle3-llama-3.1-8b.yaml").read_text())
    data.update(fields)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_local_checkpoint_path_is_quoted_in_every_command(tmp_path: Path,
                                                            shell: Shell) -> None:
    path = _drafter_yaml(tmp_path, "odd.yaml", checkpoint=ODD_CHECKPOINT)
    setup, profile = load_setup(drafter=str(path))
    rec = recommend(setup, profile, [1, 8])
    commands = [c for c in engine_commands(rec, setup) if c.command is not None]
    assert {c.engine for c in commands} == {"vllm", "sglang", "trtllm"}
    for c in commands:
        _check_command(shell, c, "meta-llama/Llama-3.1-8B-Instruct", ODD_CHECKPOINT)
    plan = _plan(str(path), "llama-3.1-8b")
    s = fastest_setting({d.name: d.tables for d in plan.drafters if d.drafter})  # type: ignore[attr-defined]
    assert s is not None and s.nodes > 0
    for c in setting_commands(plan, s):  # type: ignore[arg-type]
        _check_command(shell, c, "meta-llama/Llama-3.1-8B-Instruct", ODD_CHECKPOINT)


def test_recommends_printed_commands_paste_exactly(tmp_path: Path, shell: Shell) -> None:
    """The CLI's text output, line by line as a user copies it."""
    for drafter in ("eagle3-llama-3.1-8b",
                    str(_drafter_yaml(tmp_path, "odd.yaml", checkpoint=ODD_CHECKPOINT))):
        result = subprocess.run([sys.executable, "-m", "specsim", "recommend", "--drafter",
                                 drafter, "--batch", "1,8"], capture_output=True, text=True,
                                cwd=REPO, timeout=120)
        assert result.returncode == 0, result.stderr
        setup, profile = load_setup(drafter=drafter)
        wanted = {c.engine: list(c.argv)
                  for c in engine_commands(recommend(setup, profile, [1, 8]), setup)}
        engines = {"vLLM ": "vllm", "SGLang ": "sglang", "TensorRT-LLM ": "trtllm"}
        printed = {engines[line.split(" ", 1)[0] + " "]: line.split(": ", 1)[1]
                   for line in result.stdout.splitlines()
                   if line.startswith(tuple(engines))}
        assert set(printed) == {"vllm", "sglang", "trtllm"}
        for engine, line in printed.items():
            assert shell.paste(line) == [wanted[engine]]
            assert wanted[engine][:3] in (["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"],
                                          ["python", "-m", "sglang.launch_server"],
                                          ["trtllm-serve", "meta-llama/Llama-3.1-8B-Instruct",
                                           "--extra_llm_api_options"])


@pytest.mark.parametrize("word", HOSTILE)
def test_hostile_ids_built_in_code_still_paste_exactly(shell: Shell, word: str) -> None:
    """Validation keeps such ids out of spec files; a Model or Drafter built in code with one
    still gets a command that passes it as one argument."""
    setup, profile = load_setup(drafter="eagle3-llama-3.1-8b")
    assert setup.drafter is not None
    for trained_for, hf_id in ((word, "x/y"), ("", word)):
        if not (trained_for or hf_id):
            continue
        drafter = dataclasses.replace(setup.drafter, checkpoint=f"./{word}",
                                      trained_for=trained_for)
        target = dataclasses.replace(setup.target, hf_id=hf_id)
        odd = dataclasses.replace(setup, drafter=dataclasses.replace(drafter, target=target),
                                  target=target)
        rec = recommend(odd, profile, [1])
        commands = [c for c in engine_commands(rec, odd) if c.command is not None]
        assert len(commands) == 3
        for c in commands:
            _check_command(shell, c, trained_for or hf_id, f"./{word}")


# ------------------------------------------------------------------ validation of ids


def test_the_issues_drafter_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    path = _drafter_yaml(tmp_path, "evil.yaml", checkpoint="yuhuili/EAGLE3'$(touch X)'",
                         trained_for="meta-llama/Llama-3.1-8B-Instruct$(touch Y)")
    result = subprocess.run([sys.executable, "-m", "specsim", "recommend", "--drafter",
                             str(path)], capture_output=True, text=True, cwd=tmp_path,
                            timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"specsim: error: {path}: field 'checkpoint' = ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.yaml"]
    path = _drafter_yaml(tmp_path, "evil.yaml",
                         trained_for="meta-llama/Llama-3.1-8B-Instruct$(touch Y)")
    with pytest.raises(SpecError, match=rf"^{path}: field 'trained_for' = .*Hugging Face"):
        load_drafter(str(path))


@pytest.mark.parametrize("value", [
    "meta-llama/Llama-3.1-8B-Instruct$(touch Y)", "a/b/c", "a b/c", "-org/name", "org/name.",
    "org/na--me", "org/na..me", "org/name.git", "org/", "/name", "org/" + "n" * 97,
    "org/n\u0430me", "org/name\n", "org/`id`", "org/name;id", "org/'x'", "",
])
def test_hub_ids_follow_the_hubs_rules(value: str) -> None:
    assert hub_id_problem(value)


@pytest.mark.parametrize("value", [
    "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B", "gpt2", "z-lab/Qwen3-8B-DFlash-b16",
    "deepseek-ai/eagle3_qwen3_8b_ttt7", "org/" + "n" * 96, "a.b/c_d-e",
])
def test_valid_hub_ids_pass(value: str) -> None:
    assert hub_id_problem(value) == ""
    assert checkpoint_problem(value) == ""


@pytest.mark.parametrize(("value", "ok"), [
    ("/models/my ckpt", True), ("./ckpt/it's", True), ("../x/$(y)", True),
    ("./a\nb", False), ("/a\x1b[2Jb", False), ("/a\u202eb", False), ("ckpt dir/x", False),
    ("~/ckpt", False), ("/" + "a" * 5000, False),
])
def test_checkpoints_are_hub_ids_or_explicit_local_paths(value: str, ok: bool) -> None:
    assert (checkpoint_problem(value) == "") is ok


def _model_yaml(tmp_path: Path, **fields: str) -> Path:
    data = yaml.safe_load((builtin_dir("models") / "llama-3.1-8b.yaml").read_text())
    data.update(fields)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


BAD_NAMES = ["evil\x1b]0;title\x07", "two\nlines", "cr\rhere", "nul\0", "del\x7f",
             "c1\x85", "bidi\u202eevil", "sep\u2028x", "n" * 201, "   "]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_display_names_are_refused_everywhere(tmp_path: Path, name: str) -> None:
    from specsim.serving.scenarios import load_scenario
    from specsim.specs.engines import load_engine
    from specsim.specs.hardware import load_hardware
    from specsim.specs.models import load_model
    from specsim.specs.workloads import load_workload

    cases = [(load_model, "models", "llama-3.1-8b"), (load_drafter, "drafters", "eagle3-qwen3-8b"),
             (load_hardware, "hardware", "h100-sxm"), (load_engine, "engines", "vllm"),
             (load_workload, "scenarios", "chat"), (load_scenario, "scenarios", "chat")]
    for load, kind, slug in cases:
        data = yaml.safe_load((builtin_dir(kind) / f"{slug}.yaml").read_text())
        data["name"] = name
        path = tmp_path / f"{kind}-{slug}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        with pytest.raises(SpecError) as err:
            load(str(path))  # type: ignore[operator]
        message = str(err.value)
        assert message.startswith(f"{path}: field 'name' "), message
        assert "\n" not in message and "\x1b" not in message and "\u202e" not in message


def test_good_display_names_load(tmp_path: Path) -> None:
    from specsim.specs.models import load_model

    name = "Llama 3.1 8B (Instruct) — ü, 8x7B: \"test\" 'x' $HOME" + "n" * 140
    assert load_model(str(_model_yaml(tmp_path, name=name))).name == name


@pytest.mark.parametrize("hf_id", ["meta-llama/Llama-3.1-8B$(id)", "a/b/c", "x y/z"])
def test_bad_hf_ids_are_refused(tmp_path: Path, hf_id: str) -> None:
    from specsim.specs.models import load_model

    path = _model_yaml(tmp_path, hf_id=hf_id)
    with pytest.raises(SpecError, match=rf"^{path}: field 'hf_id' = "):
        load_model(str(path))


def test_import_name_options_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    config = next((REPO / "tests" / "fixtures" / "hf_configs").glob("*.json"))
    for name in ("x" * 300, "evil\x1b]0;t\x07"):
        result = subprocess.run([sys.executable, "-m", "specsim", "models", "import",
                                 str(config), "--name", name], capture_output=True, text=True,
                                cwd=tmp_path, timeout=120)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("specsim: error: option --name: ")
        assert result.stderr.count("\n") == 1 and "\x1b" not in result.stderr
        assert list(tmp_path.iterdir()) == []


def test_one_line_escapes_what_would_start_a_line() -> None:
    assert one_line("a\nb\x1b[31m\u202ec") == "a\\nb\\x1b[31m\\u202ec"
    assert one_line("plain 'text' $(x)") == "plain 'text' $(x)"


def test_a_drafter_file_name_cannot_start_a_line_of_the_command_block(tmp_path: Path,
                                                                       shell: Shell) -> None:
    """The reason a command is missing names the drafter's file; a newline in that name stays
    inside its `#` comment line."""
    data = yaml.safe_load((builtin_dir("drafters") / "eagle3-llama-3.1-8b.yaml").read_text())
    del data["checkpoint"]
    path = tmp_path / "x\ntouch PWNED\n.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = _plan(str(path), "llama-3.1-8b")
    blocks = dict(command_lines(plan))  # type: ignore[arg-type]
    text = blocks[str(path)]
    assert "has no published checkpoint" in text
    assert all(line.startswith("#") for line in text.splitlines()), text
    assert shell.paste(text) == []


def test_recommend_json_carries_each_command_as_its_argument_vector() -> None:
    import json
    import shlex

    from typer.testing import CliRunner

    from specsim.cli import app

    result = CliRunner().invoke(app, ["recommend", "--batch", "1,8", "--json"],
                                standalone_mode=False)
    assert result.exit_code == 0, result.output
    commands = [c for c in json.loads(result.stdout)["commands"] if c["command"]]
    assert commands
    for c in commands:
        # The vector is what the shell makes of the printed line, word for word.
        assert c["argv"] == shlex.split(c["command"])


def test_a_plan_command_block_says_why_its_schedule_lengthens(shell: Shell) -> None:
    """gpt-oss-120b is a mixture of experts: its vLLM per-batch chain lengthens with the batch
    (a larger batch already reads most experts), and the plan's command block says so in a `#`
    line above the commands, which runs nothing when pasted."""
    from specsim.serving.plan import make_plan

    plan = make_plan(hardware="h200", model="gpt-oss-120b", drafters=["eagle3-gpt-oss-120b"],
                     engine="sglang", workload="chat", min_tokens_per_s_per_user=0, tps=(1,))
    text = dict(command_lines(plan))["eagle3-gpt-oss-120b"]
    first = text.splitlines()[0]
    assert first.startswith("# the per-batch chain lengthens from batch ")
    assert "mixture of experts" in first
    commands = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(shell.paste(text)) == len(commands)

"""`drafters import` records the drafter's checkpoint (from --checkpoint, the Hub repo the config
was read from, or the config's `_name_or_path`), refuses a bad --checkpoint on one line, and an
engine's refusal of a drafter without one says how to add it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specsim.cli import app
from specsim.errors import SpecError
from specsim.specs.drafter_import import check_hub_repo, checkpoint_hint, import_drafter
from specsim.specs.drafters import load_drafter
from specsim.specs.models import load_model
from tests.test_cli import run
from tests.test_drafter_import import FIXTURES

EAGLE3 = FIXTURES / "eagle3-llama3.1-8b.json"
HUB_ID = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"  # where the EAGLE-3 fixture is published
REPO = Path(__file__).resolve().parent.parent


def _eagle3(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EAGLE3.read_text())
    return {**data, **extra}


def _import(config: dict[str, Any], **options: Any) -> dict[str, Any]:
    return import_drafter(config, target=load_model("llama-3.1-8b"), target_name="llama-3.1-8b",
                          name="x", source="cfg", **options)


def _engine_answers(drafter: str, monkeypatch: pytest.MonkeyPatch, cwd: Path
                    ) -> dict[str, str]:
    """`recommend --json`'s answer per engine for a drafter of Llama-3.1-8B (run in `cwd`):
    the command with the files it reads (TensorRT-LLM's extra-options YAML names the draft
    model), or the reason there is none."""
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, ["recommend", "--model", "llama-3.1-8b", "--drafter",
                                      drafter, "--batch", "1", "--alpha", "0.7", "--json"])
    assert result.exit_code == 0, result.output
    return {c["engine"]: (c["command"] and "\n".join([c["command"], *(f["text"] for f in
                                                                       c["files"])]))
            or c["reason"] for c in json.loads(result.stdout)["commands"]}


def _launches(answer: str) -> bool:
    """Whether an engine's answer is a launch command loading the fixture's checkpoint."""
    return HUB_ID in answer and "no published checkpoint" not in answer


# ----------------------------------------------------------------------------- --checkpoint


def test_checkpoint_option_is_written_and_read_back(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "mine.yaml"
    result = run("drafters", "import", str(EAGLE3), "--target", "llama-3.1-8b", "--out",
                 str(out), "--checkpoint", HUB_ID)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(f"checkpoint {HUB_ID}")
    assert result.stderr == ""
    assert yaml.safe_load(out.read_text())["checkpoint"] == {
        "value": HUB_ID,
        "source": f"https://huggingface.co/{HUB_ID} (given with `drafters import --checkpoint`)"}
    assert load_drafter(str(out)).checkpoint == HUB_ID
    # and the engines now launch it: nothing refused
    answers = _engine_answers(str(out), monkeypatch, tmp_path)
    assert sorted(answers) == ["sglang", "trtllm", "vllm"]
    assert all(_launches(a) for a in answers.values()), answers


@pytest.mark.parametrize("bad, problem", [
    ("EAGLE3-LLaMA3.1-Instruct-8B", "has no '/'"),
    ("./drafters/eagle3", "has more than one '/'"),
    ("yuhuili/EAGLE3 $(id)", "may hold only letters, digits"),
])
def test_a_bad_checkpoint_is_one_line_naming_the_option(bad: str, problem: str,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    result = run("drafters", "import", str(EAGLE3), "--target", "llama-3.1-8b", "--out",
                 str(out), "--checkpoint", bad)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"specsim: error: option --checkpoint: {bad!r} {problem}")
    assert "need a Hugging Face Hub repo id owner/name" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("value", ["a/b", "deepseek-ai/DeepSeek-V3", "z-lab/Qwen3-8B-DFlash-b16"])
def test_hub_repo_ids_pass(value: str) -> None:
    assert check_hub_repo(value) == value


@pytest.mark.parametrize("value", ["", "/", "a/", "/b", "a/b/c", "a/b.git", "a--x/b"])
def test_degenerate_ids_are_refused(value: str) -> None:
    with pytest.raises(SpecError, match=r"^checkpoint: ") as err:
        check_hub_repo(value)
    assert err.value.parameter == "checkpoint"


# ----------------------------------------------------------------------------- from the config


def test_hub_name_or_path_is_picked_up() -> None:
    spec = _import(_eagle3(_name_or_path=HUB_ID))
    assert spec["checkpoint"] == {"value": HUB_ID, "source": "cfg, key '_name_or_path'"}


def test_cli_records_and_says_where_the_checkpoint_came_from(tmp_path: Path) -> None:
    folder = tmp_path / "EAGLE3-LLaMA3.1-Instruct-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_eagle3(_name_or_path=HUB_ID)))
    out = tmp_path / "mine.yaml"
    result = run("drafters", "import", str(folder), "--target", "llama-3.1-8b", "--out",
                 str(out))
    assert result.returncode == 0, result.stderr
    assert (f"checkpoint {HUB_ID} (the config's _name_or_path; pass --checkpoint if that is "
            "not the drafter's)") in result.stdout
    assert yaml.safe_load(out.read_text())["checkpoint"] == {
        "value": HUB_ID, "source": f"config.json at {folder / 'config.json'}, key '_name_or_path'"}
    assert load_drafter(str(out)).checkpoint == HUB_ID


@pytest.mark.parametrize("named", [
    "/home/me/runs/eagle3",            # a local path: not a Hub id
    "./runs/eagle3",
    "eagle3-ckpt",                     # no owner
    "",
    "meta-llama/Llama-3.1-8B",         # the target itself: the base it was initialised from
    "META-LLAMA/llama-3.1-8b",         # Hub ids are case-insensitive
])
def test_name_or_path_that_is_not_the_drafters_is_ignored(named: str) -> None:
    assert "checkpoint" not in _import(_eagle3(_name_or_path=named))


def test_no_name_or_path_no_checkpoint() -> None:
    assert "checkpoint" not in _import(_eagle3())


def test_mtp_lives_in_the_targets_own_checkpoint() -> None:
    """DeepSeek-V3's config names its own repo; its MTP module ships there (mtp-deepseek-v3)."""
    config = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
              "vocab_size": 129280, "num_nextn_predict_layers": 1,
              "_name_or_path": "deepseek-ai/DeepSeek-V3"}
    spec = import_drafter(config, target=load_model("deepseek-v3"), target_name="deepseek-v3",
                          name="mtp", source="cfg")
    assert spec["checkpoint"]["value"] == "deepseek-ai/DeepSeek-V3"


def test_what_wins() -> None:
    """--checkpoint, then the Hub repo the config was read from, then `_name_or_path`."""
    config = _eagle3(_name_or_path="someone/else")
    assert _import(config, checkpoint=HUB_ID, repo="org/repo")["checkpoint"]["value"] == HUB_ID
    from_repo = _import(config, repo="org/repo")["checkpoint"]
    assert from_repo == {"value": "org/repo", "source":
                         "https://huggingface.co/org/repo (the Hub repo the config was read from)"}
    assert _import(config)["checkpoint"]["value"] == "someone/else"


# ----------------------------------------------------------------------------- the refusal


def test_without_checkpoint_the_refusal_says_how_to_add_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run("drafters", "import", str(EAGLE3), "--target", "llama-3.1-8b", "--out",
                 "mine.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "checkpoint" not in yaml.safe_load((tmp_path / "mine.yaml").read_text())
    assert result.stderr == ("note: mine.yaml names no checkpoint (the config names no Hub repo "
                             "of its own); the engine commands need one: import again with "
                             "--checkpoint <owner/name> --force\n")
    hint = ("add `checkpoint: {value: <owner/name>, source: \"<where it is published>\"}` to "
            "mine.yaml or re-import it with `specsim drafters import <config.json> --target "
            "llama-3.1-8b --out mine.yaml --force --checkpoint <owner/name>`")
    assert _engine_answers("mine.yaml", monkeypatch, tmp_path) == {
        "vllm": f"mine has no published checkpoint for vLLM's 'model' (method eagle3): {hint}",
        "sglang": f"mine has no published checkpoint for --speculative-draft-model-path: {hint}",
        "trtllm": f"mine has no published checkpoint for TensorRT-LLM's speculative_model "
                  f"(Eagle): {hint}",
    }


def test_the_hinted_import_works_once_filled_in(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Paste the hint's command with its two placeholders filled: the engines then launch."""
    assert run("drafters", "import", str(EAGLE3), "--target", "llama-3.1-8b", "--out",
               "my drafter.yaml", cwd=tmp_path).returncode == 0
    reason = _engine_answers("my drafter.yaml", monkeypatch, tmp_path)["vllm"]
    command = reason.split("re-import it with `")[1].rstrip("`")
    assert "--out 'my drafter.yaml'" in command  # quoted for the shell
    filled = command.replace("<config.json>", shlex.quote(str(EAGLE3))).replace(
        "<owner/name>", HUB_ID)
    result = run(*shlex.split(filled)[1:], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert load_drafter(str(tmp_path / "my drafter.yaml")).checkpoint == HUB_ID
    assert _launches(_engine_answers("my drafter.yaml", monkeypatch, tmp_path)["vllm"])


def test_a_builtin_drafter_is_told_to_use_a_copy() -> None:
    """H-Spec ships without a checkpoint; its built-in file is not the one to edit."""
    path = REPO / "workloads" / "drafters" / "hspec-qwen3-8b.yaml"
    assert checkpoint_hint(load_drafter("hspec-qwen3-8b")) == (
        "add `checkpoint: {value: <owner/name>, source: \"<where it is published>\"}` to a "
        f"copy of {path} and pass that copy as --drafter")

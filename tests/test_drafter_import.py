"""`drafters import`: published drafter configs (tests/fixtures/drafter_configs) become drafter
specs equal to the hand-written built-in ones read from the same checkpoints, and a drafter
that does not fit its target fails on one line naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specsim.errors import SpecError
from specsim.specs.drafter_import import import_drafter
from specsim.specs.drafters import load_drafter
from specsim.specs.models import load_model
from specsim.specs.outputs import write_yaml
from tests.test_cli import run

FIXTURES = Path(__file__).parent / "fixtures" / "drafter_configs"
SAME = ("family", "layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
        "intermediate_size", "vocab_size", "own_lm_head", "fused_target_layers", "block_size",
        "max_draft_tokens")


def _config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


@pytest.mark.parametrize("fixture, target, builtin, family", [
    ("eagle3-llama3.1-8b", "llama-3.1-8b", "eagle3-llama-3.1-8b", None),
    ("eagle-vicuna-7b", "vicuna-7b-v1.3", "eagle-vicuna-7b", "eagle"),
    ("dflash-qwen3-8b-b16", "qwen3-8b", "dflash-qwen3-8b", None),
])
def test_imports_match_the_builtin_drafters(fixture: str, target: str, builtin: str,
                                            family: str | None, tmp_path: Path) -> None:
    spec = import_drafter(_config(fixture), target=load_model(target), target_name=target,
                          name=fixture, source="test", family=family)
    path = tmp_path / f"{fixture}.yaml"
    write_yaml(path, spec, force=False)
    imported, reference = load_drafter(str(path)), load_drafter(builtin)
    for field in SAME:
        assert getattr(imported, field) == getattr(reference, field), field
    assert imported.params() == reference.params()


def test_mtp_from_the_target_config(tmp_path: Path) -> None:
    """DeepSeek-V3's own config carries its MTP module (num_nextn_predict_layers = 1)."""
    config = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
              "vocab_size": 129280, "num_nextn_predict_layers": 1}
    spec = import_drafter(config, target=load_model("deepseek-v3"), target_name="deepseek-v3",
                          name="mtp", source="test")
    path = tmp_path / "mtp.yaml"
    write_yaml(path, spec, force=False)
    imported, reference = load_drafter(str(path)), load_drafter("mtp-deepseek-v3")
    for field in SAME:
        assert getattr(imported, field) == getattr(reference, field), field


@pytest.mark.parametrize("fixture, target, message", [
    ("eagle3-llama3.1-8b", "qwen3-8b",
     r"key 'vocab_size' = 128256 does not match target qwen3-8b vocab_size = 151936"),
    ("dflash-qwen3-8b-b16", "llama-3.2-1b", r"key 'hidden_size' = 4096 does not match target"),
    ("eagle-vicuna-7b", "vicuna-7b-v1.3", r"cannot tell the drafter family"),
])
def test_mismatch_with_the_target(fixture: str, target: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        import_drafter(_config(fixture), target=load_model(target), target_name=target,
                       name="x", source="s")


def test_dflash_layer_ids_outside_the_target() -> None:
    config = {**_config("dflash-qwen3-8b-b16"), "dflash_config": {"target_layer_ids": [40]}}
    with pytest.raises(SpecError, match=r"'target_layer_ids' has 40, outside the target's 36"):
        import_drafter(config, target=load_model("qwen3-8b"), target_name="qwen3-8b",
                       name="x", source="s")


def test_cli_drafters_import(tmp_path: Path) -> None:
    out = tmp_path / "d.yaml"
    cfg = str(FIXTURES / "eagle3-llama3.1-8b.json")
    result = run("drafters", "import", cfg, "--target", "llama-3.1-8b", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "eagle3 drafter" in result.stdout and out.exists()
    bad = run("drafters", "import", cfg, "--target", "qwen3-8b", "--out", str(tmp_path / "b.yaml"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "does not match target qwen3-8b" in bad.stderr

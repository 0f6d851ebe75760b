"""`models import Org/Name`: a Hub repo id is read through huggingface_hub's cache. The tests
build that cache themselves (models--Org--Name/snapshots/<rev>/config.json + refs/main) and run
offline, so no network is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specsim.errors import SpecError
from specsim.specs.hf_hub import locate_config

REPO = Path(__file__).resolve().parents[1]
REVISION = "0123456789abcdef0123456789abcdef01234567"
CONFIG = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 36,
          "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
          "intermediate_size": 12288, "vocab_size": 151936, "tie_word_embeddings": False}


def _cache(root: Path, repo_id: str = "Qwen/Qwen3-8B") -> Path:
    """The hub cache layout huggingface_hub reads offline."""
    base = root / f"models--{repo_id.replace('/', '--')}"
    snapshot = base / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(CONFIG))
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(REVISION)
    return root


def _run(*args: str, cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "specsim", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)


def test_repo_id_imports_from_the_offline_cache(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "hub")
    result = _run("models", "import", "Qwen/Qwen3-8B", cache=cache, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load((tmp_path / "qwen3-8b.yaml").read_text())
    assert spec["hidden_size"] == 4096 and spec["name"] == "Qwen3-8B"
    assert spec["source"] == f"https://huggingface.co/Qwen/Qwen3-8B/blob/{REVISION}/config.json"


def test_repo_id_not_in_the_cache_offline_is_one_line(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "hub")
    result = _run("models", "import", "Org/Missing", cache=cache, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == ("specsim: error: Org/Missing: config.json is not in the "
                                     "Hugging Face cache and offline (HF_HUB_OFFLINE=1)")


def test_locate_config_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = _cache(tmp_path / "hub")
    found = locate_config("Qwen/Qwen3-8B", cache_dir=cache)
    assert json.loads(found.path.read_text()) == CONFIG and found.name == "Qwen3-8B"
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert locate_config(str(folder)).name == "my-model"  # a folder means its config.json
    with pytest.raises(SpecError, match="cannot read"):
        locate_config(str(tmp_path / "absent.json"))

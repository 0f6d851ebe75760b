"""The command line as a user meets it: tables, --json, and one clear line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m specsim` as a user would (a real process: exit codes and stderr)."""
    return subprocess.run([sys.executable, "-m", "specsim", *args], capture_output=True,
                          text=True, cwd=cwd or REPO, timeout=120)


def ok(*args: str) -> str:
    result = run(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_help_lists_the_commands() -> None:
    out = ok("--help")
    for command in ("hardware", "models", "roofline", "memory"):
        assert command in out


def test_hardware_list_and_show() -> None:
    assert "h100-sxm" in ok("hardware", "list")
    rows = json.loads(ok("hardware", "list", "--json"))
    assert {r["hardware"] for r in rows} >= {"h100-sxm", "mi300x"}
    shown = ok("hardware", "show", "h100-sxm")
    assert "3,350" in shown and "datasheet" in shown.lower()


def test_models_list_and_show() -> None:
    rows = json.loads(ok("models", "list", "--json"))
    by_slug = {r["model"]: r for r in rows}
    assert by_slug["llama-3.1-8b"]["params_B"] == pytest.approx(8.03, abs=0.01)
    assert "num_kv_heads" in ok("models", "show", "qwen3-8b")


def test_roofline_table_and_json() -> None:
    rows = json.loads(ok("roofline", "--hardware", "h100-sxm", "--model", "llama-3.1-8b",
                         "--tokens", "1,8,4096", "--context", "0", "--json"))["rows"]
    assert [r["tokens"] for r in rows] == [1, 8, 4096]
    # no cache read (context 0): 15.0 GB of weights (all but the embedding table) / 3.35 TB/s
    assert rows[0]["time_ms"] == pytest.approx(4.48, abs=0.02)
    assert rows[0]["bound"] == "memory" and rows[2]["bound"] == "compute"
    assert set(rows[0]) >= {"tokens", "time_ms", "bound", "bytes", "flops"}
    assert "time_ms" in ok("roofline", "--tokens", "1-4")
    by_op = json.loads(ok("roofline", "--tokens", "1", "--by-op", "--json"))["rows"]
    assert {"qkv_proj", "attention", "mlp_up", "lm_head"} <= {r["op"] for r in by_op}


def test_memory_with_a_drafter() -> None:
    out = ok("memory", "--hardware", "h100-sxm", "--model", "qwen3-8b", "--drafter",
             "dflash-qwen3-8b", "--context", "32768", "--requests", "1,128")
    assert "max concurrent requests" in out
    rows = json.loads(ok("memory", "--model", "qwen3-8b", "--drafter", "dflash-qwen3-8b",
                         "--context", "32768", "--requests", "128", "--json"))["rows"]
    assert rows[0]["drafter_kv_GB_per_gpu"] == pytest.approx(128 * 671_088_640 / 1e9)
    assert rows[0]["fits"] is False


def test_import_writes_and_refuses_to_overwrite(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
        "vocab_size": 128256}))
    out = tmp_path / "mine.yaml"
    first = run("models", "import", str(config), "--name", "mine", "--out", str(out))
    assert first.returncode == 0 and "8.03B" in first.stdout
    before = out.read_text()
    again = run("models", "import", str(config), "--name", "mine", "--out", str(out))
    assert again.returncode != 0 and "--force" in again.stderr
    assert out.read_text() == before
    assert run("models", "import", str(config), "--out", str(out), "--force").returncode == 0
    rows = json.loads(ok("roofline", "--model", str(out), "--tokens", "1", "--context", "0",
                         "--json"))["rows"]
    assert rows[0]["time_ms"] == pytest.approx(4.48, abs=0.02)


BAD = [
    (["roofline", "--hardware", "h900"], "unknown hardware 'h900'"),
    (["roofline", "--model", "llama-9"], "unknown model 'llama-9'"),
    (["roofline", "--tokens", "1,x"], "option --tokens: cannot read 'x'"),
    (["roofline", "--tokens", "-5"], "option --tokens"),
    (["roofline", "--tp", "3"], "option --tp: tensor parallel degree 3 must divide the 32"),
    (["roofline", "--weight-dtype", "fp12"], "option --weight-dtype: 'fp12'"),
    (["roofline", "--compute-dtype", "fp4"], "no fp4 peak flops"),
    (["memory", "--memory-fraction", "0"], "option --memory-fraction: must be in (0, 1]"),
    (["memory", "--drafter", "nope"], "unknown drafter 'nope'"),
    (["hardware", "show", "missing.yaml"], "missing.yaml: no such hardware file"),
    (["models", "import", "nofile.json"], "nofile.json: cannot read"),
    (["roofline", "--tokens", "1", "--bogus"], "No such option"),
]


@pytest.mark.parametrize("args, message", BAD)
def test_bad_input_is_one_clear_line(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2


def test_bad_spec_files_are_one_clear_line(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "gpu.yaml"
    bad_yaml.write_text("name: [unclosed\n")
    result = run("roofline", "--hardware", str(bad_yaml))
    assert result.returncode == 2 and "malformed YAML" in result.stderr
    heads = tmp_path / "model.yaml"
    heads.write_text("name: m\nsource: s\narchitecture: LlamaForCausalLM\nhidden_size: 96\n"
                     "num_layers: 2\nnum_attention_heads: 6\nnum_kv_heads: 4\n"
                     "intermediate_size: 128\nvocab_size: 100\n")
    result = run("roofline", "--model", str(heads))
    assert result.returncode == 2
    assert f"{heads}: field 'num_attention_heads' = 6 is not divisible" in result.stderr
    unknown = tmp_path / "config.json"
    unknown.write_text(json.dumps({"architectures": ["RwkvForCausalLM"]}))
    result = run("models", "import", str(unknown))
    assert result.returncode == 2 and "cannot model key 'architectures'" in result.stderr


def test_cli_shim_matches_the_console_script() -> None:
    shim = subprocess.run([sys.executable, str(REPO / "cli.py"), "hardware", "list"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert shim.returncode == 0 and "h100-sxm" in shim.stdout

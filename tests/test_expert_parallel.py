"""Expert parallelism: routed experts spread whole over EP GPUs, and the all-to-all it costs.

Hand derivations for DeepSeek-V3 (config.json: hidden 7168, 61 layers of which the first 3
dense, 256 routed experts of intermediate size 2048, top-8, fp8 weights) on 8 H200s (NVLink 4:
450 GB/s per direction, 16 us latency, from hardware/h200.yaml):

- one routed expert (gated MLP) = 3 x 7168 x 2048 = 44,040,192 parameters; 58 MoE layers x 256
  experts = 653,908,770,816 parameters = 653,908,770,816 bytes in fp8;
- with EP 8 each GPU holds 256 / 8 = 32 experts per layer: 81,738,596,352 expert bytes, so
  going from EP 1 to EP 8 (TP 1: attention and dense parts replicated) saves 7/8 of the expert
  bytes, 572,170,174,464 bytes per GPU;
- one all-to-all moves, per token, hidden x act bytes x top-k x (EP - 1)/EP =
  7168 x 2 x 8 x 7/8 = 100,352 bytes (bf16 activations); dispatch and combine each, per MoE
  layer: 2 x 58 = 116 of them per pass.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.cost import pass_cost
from specsim.forward.memory import serving_memory
from specsim.forward.ops import pass_work
from specsim.forward.shapes import uniform_passes
from specsim.specs.hardware import load_hardware
from specsim.specs.models import load_model
from tests.conftest import REPO

EXPERT_PARAMS = 3 * 7168 * 2048
EXPERT_BYTES_ALL = 58 * 256 * EXPERT_PARAMS  # fp8: one byte each
A2A_BYTES_PER_TOKEN = 7168 * 2 * 8 * 7 / 8


@pytest.fixture(scope="module")
def dsv3():  # type: ignore[no-untyped-def]
    return load_model("deepseek-v3")


def test_hand_numbers_are_consistent() -> None:
    assert EXPERT_PARAMS == 44_040_192
    assert EXPERT_BYTES_ALL == 653_908_770_816
    assert A2A_BYTES_PER_TOKEN == 100_352


def test_expert_bytes_per_gpu_under_ep8(dsv3) -> None:  # type: ignore[no-untyped-def]
    h200 = load_hardware("h200")
    one = serving_memory(dsv3, h200, [1], 1024.0, tp=1, ep=1)
    eight = serving_memory(dsv3, h200, [1], 1024.0, tp=1, ep=8)
    assert one.weights_bytes - eight.weights_bytes == pytest.approx(EXPERT_BYTES_ALL * 7 / 8)
    # TP 8 with EP 8: everything is split eight ways either way.
    tp8 = serving_memory(dsv3, h200, [1], 1024.0, tp=8, ep=1)
    both = serving_memory(dsv3, h200, [1], 1024.0, tp=8, ep=8)
    assert both.weights_bytes == pytest.approx(tp8.weights_bytes)


def test_all_to_all_bytes_and_time(dsv3) -> None:  # type: ignore[no-untyped-def]
    h200 = load_hardware("h200")
    n = np.array([1.0, 64.0, 1024.0])
    shape = uniform_passes(1.0, n, 0.0)
    ops = {op.name: op for op in pass_work(dsv3, shape, tp=8, ep=8)}
    a2a = ops["all_to_all"]
    assert a2a.layers == 2 * 58
    np.testing.assert_allclose(a2a.bytes_, n * A2A_BYTES_PER_TOKEN)
    cost = {c.op.name: c for c in pass_cost(dsv3, h200, shape, tp=8, ep=8).ops}
    expected = 116 * (16e-6 + n * A2A_BYTES_PER_TOKEN / 450e9)
    np.testing.assert_allclose(cost["all_to_all"].total_time_s, expected, rtol=1e-12)
    assert "all_to_all" not in {op.name for op in pass_work(dsv3, shape, tp=8)}


def test_local_experts_are_whole_and_one_eighth_touched(dsv3) -> None:  # type: ignore[no-untyped-def]
    # One token touches 8 experts; with EP 8 one of them (in expectation) is on this GPU,
    # whole: up projection 7168 x (2 x 2048), i.e. 29,360,128 fp8 bytes per expert.
    shape = uniform_passes(1.0, np.array([1.0]), 0.0)
    up = {op.name: op for op in pass_work(dsv3, shape, tp=8, ep=8)}["experts_up"]
    assert (up.gemm_k, up.gemm_n) == (7168, 4096)
    assert up.gemm_count is not None
    assert float(up.gemm_count[0]) == pytest.approx(1.0)
    assert float(up.weight_bytes[0]) == pytest.approx(29_360_128)


def test_bad_ep_is_one_clear_error(dsv3) -> None:  # type: ignore[no-untyped-def]
    shape = uniform_passes(1.0, np.array([1.0]), 0.0)
    with pytest.raises(SpecError, match="must divide the 256 routed experts"):
        pass_work(dsv3, shape, ep=3)
    with pytest.raises(SpecError, match="has no experts"):
        pass_work(load_model("llama-3.1-8b"), shape, ep=2)
    with pytest.raises(SpecError, match=">= 1"):
        serving_memory(dsv3, load_hardware("h200"), [1], 0.0, ep=0)


def test_ep_option_on_the_commands() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "specsim", *args], capture_output=True,
                              text=True, cwd=REPO, timeout=120)

    out = run("memory", "-H", "h200", "-m", "deepseek-v3", "--tp", "1", "--ep", "8",
              "--requests", "1", "--json")
    assert out.returncode == 0, out.stderr
    bad = run("roofline", "-H", "h200", "-m", "llama-3.1-8b", "--ep", "2")
    assert bad.returncode != 0 and "has no experts" in bad.stderr
    assert "Traceback" not in bad.stderr
    for command in ("speedup", "recommend"):
        assert "--ep" in run(command, "--help").stdout

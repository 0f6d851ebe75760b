"""Collectives that span nodes: the `node` block of a GPU profile, the hierarchical all-reduce
and the all-to-all past one scale-up domain, and the layouts an interconnect cannot hold.

Hand derivations, from the numbers in hardware/h100-sxm.yaml and hardware/h200.yaml:

- H100 SXM: an HGX node of 8 GPUs, one NVLink domain; ConnectX-7 400 Gb/s per GPU = 50e9
  bytes/s per direction; a small all-reduce between nodes 21.27 us (NDmv4, NCCL 2.17.1).
- A TP-16 all-reduce of 1,000,000 bytes over 2 nodes: inside each node the engines' measured
  TP-8 all-reduce at 1e6 bytes, between the 524,288 B (22.1 us) and 1,048,576 B (33.8 us)
  points: 22.1 + (1e6 - 524,288) / 524,288 x 11.7 = 32.71598 us; then each GPU all-reduces its
  1e6 / 8 = 125,000 bytes with its peer on the other node: 21.27 us + 2 (2 - 1)/2 x 125,000 /
  50e9 s = 21.27 + 2.5 us. Total 56.48598 us.
- TP 32 (4 nodes): 32.71598 + 21.27 + 2 x 3/4 x 125,000 / 50e9 s (3.75 us) = 57.73598 us.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecError
from specsim.forward.cost import all_to_all_time_s, collective_time_s, pass_cost
from specsim.forward.shapes import uniform_passes
from specsim.specs.hardware import Node, layout_problem, load_hardware
from specsim.specs.models import load_model
from tests.conftest import REPO

# TP-8 all-reduce of 1e6 bytes on an H100 node, interpolated by hand (module docstring), s.
TP8_1E6_S = (22.1 + (1e6 - 524288) / 524288 * 11.7) * 1e-6
NET_LATENCY_S = 21.27e-6
NIC_BYTES_PER_S = 400e9 / 8
NODE_PROFILES = ("h100-sxm", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x",
                 "mi355x")


def test_hand_numbers() -> None:
    assert TP8_1E6_S * 1e6 == pytest.approx(32.71598, abs=1e-5)
    assert NIC_BYTES_PER_S == 50e9


@pytest.mark.parametrize("slug, gpus, domain, gbit", [
    ("h100-sxm", 8, 8, 400), ("h200", 8, 8, 400), ("b200", 8, 8, 400), ("b300", 8, 8, 800),
    ("gb200", 4, 72, 400), ("gb300", 4, 72, 800), ("mi300x", 8, 8, 400), ("mi325x", 8, 8, 400),
    ("mi355x", 8, 8, 400)])
def test_node_blocks_hold_the_reference_architectures(slug: str, gpus: int, domain: int,
                                                      gbit: int) -> None:
    """DGX/HGX reference architectures: one NIC per GPU, 400 Gb/s ConnectX-7 (Hopper, B200,
    GB200) or Pollara 400 / ConnectX-7 (MI300 series), 800 Gb/s ConnectX-8 (Blackwell Ultra);
    NVL72: 4-GPU trays in one 72-GPU NVLink domain. Each number has its source."""
    hw = load_hardware(slug)
    assert hw.node is not None
    assert (hw.node.gpus, hw.node.scale_up_gpus) == (gpus, domain)
    assert hw.node.network_bandwidth_bytes_per_s == pytest.approx(gbit * 1e9 / 8)
    assert hw.node.network_latency_s == pytest.approx(NET_LATENCY_S)
    for key in ("node.gpus", "node.scale_up_gpus", "node.network.bandwidth_Gb_per_s",
                "node.network.latency_us"):
        assert hw.sources.get(key, "").strip(), f"{slug}: {key} has no source"


def test_a_16_gpu_all_reduce_over_two_hgx_nodes_by_hand() -> None:
    hw = load_hardware("h100-sxm")
    got = collective_time_s(np.array([1e6]), hw, 16)[0]
    assert got == pytest.approx(TP8_1E6_S + NET_LATENCY_S + 125_000 / NIC_BYTES_PER_S, rel=1e-9)
    assert got * 1e6 == pytest.approx(56.48598, abs=1e-4)
    four = collective_time_s(np.array([1e6]), hw, 32)[0]
    assert four * 1e6 == pytest.approx(57.73598, abs=1e-4)


def test_within_one_domain_pricing_is_unchanged() -> None:
    """TP <= the domain: exactly the measured table (H100 TP 8 at 32 KiB: 7.8 us) or the ring
    over NVLink at NCCL's ring rate, 0.538 of it (GB200 TP 16 and 64: one 72-GPU NVLink
    domain, no network)."""
    h100 = load_hardware("h100-sxm")
    assert collective_time_s(np.array([32768.0]), h100, 8)[0] == pytest.approx(7.8e-6)
    gb200 = load_hardware("gb200")
    for tp in (16, 64):
        ring = 3e-6 + 2 * (tp - 1) / tp * 1e6 / (0.538 * 900e9)
        assert collective_time_s(np.array([1e6]), gb200, tp)[0] == pytest.approx(ring)
    # GB200 TP 144: two NVL72 racks, the network between them
    got = collective_time_s(np.array([1e6]), gb200, 144)[0]
    inside = 3e-6 + 2 * 71 / 72 * 1e6 / (0.538 * 900e9)
    assert got == pytest.approx(inside + NET_LATENCY_S + 1e6 / 72 / NIC_BYTES_PER_S)


def test_the_hierarchy_reproduces_a_measured_two_node_all_reduce() -> None:
    """Pinned to a measurement: NCCL 2.17.1 all-reduce of 1 KB in place on Azure NDmv4 (8 A100
    SXM per node, ConnectX-6 HDR 200 Gb/s per GPU), microsoft/mscclpp docs/performance-ndmv4.md:
    1 node x 8 GPUs 16.96 us, 2 nodes x 1 GPU 21.27 us, 2 nodes x 8 GPUs 35.85 us. The model
    built from the first two predicts the third within 10% (16.96 + 21.27 + bytes = 38.24 us,
    +6.7%)."""
    a100 = dataclasses.replace(load_hardware("a100-80g-sxm"), node=Node(
        gpus=8, scale_up_gpus=8, network_name="HDR", network_bandwidth_bytes_per_s=200e9 / 8,
        network_latency_s=21.27e-6))
    got = collective_time_s(np.array([1024.0]), a100, 16)[0]
    assert got * 1e6 == pytest.approx(35.85, rel=0.10)
    assert got * 1e6 == pytest.approx(16.96 + 2 * 7 / 8 * 1024 / (0.538 * 300e3) + 21.27
                                      + 1024 / 8 / 25e3, rel=1e-9)


def test_all_to_all_across_nodes_by_hand() -> None:
    """DeepSeek-V3 EP 16 over 2 H200 nodes (TP 8 in each): one token sends 7168 x 2 x 8 x 15/16
    = 107,520 bytes; 7 of its 15 peers share its node (NVLink, 450e9 B/s), 8 are on the other
    (its NIC, 50e9 B/s), which is the slower part: 16 us + 21.27 us + 107,520 x 8/15 / 50e9 s
    per token. Dispatch and combine in each of the 58 MoE layers: 116 per pass. EP 8 in one
    node keeps the NVLink price."""
    h200, model = load_hardware("h200"), load_model("deepseek-v3")
    per_token = 7168 * 2 * 8 * 15 / 16
    assert per_token == 107_520
    n = np.array([1.0, 256.0])
    one = 16e-6 + NET_LATENCY_S + n * per_token * 8 / 15 / NIC_BYTES_PER_S
    np.testing.assert_allclose(all_to_all_time_s(n * per_token, h200, 16), one, rtol=1e-12)
    cost = {c.op.name: c for c in pass_cost(model, h200, uniform_passes(1.0, n, 0.0), tp=8,
                                            ep=16).ops}
    np.testing.assert_allclose(cost["all_to_all"].total_time_s, 116 * one, rtol=1e-12)
    inside = all_to_all_time_s(n * 100_352.0, h200, 8)
    np.testing.assert_allclose(inside, 16e-6 + n * 100_352 / 450e9, rtol=1e-12)


def test_layouts_that_do_not_fit_the_interconnect() -> None:
    a100 = load_hardware("a100-80g-sxm")  # no node block
    assert layout_problem(a100, 8) is None
    assert "has no 'node' block" in (layout_problem(a100, 16) or "")
    h100 = load_hardware("h100-sxm")
    assert layout_problem(h100, 16) is None and layout_problem(h100, 8, 32) is None
    assert "not a whole number of its 8-GPU nodes" in (layout_problem(h100, 12) or "")
    assert "must divide one another" in (layout_problem(h100, 8, 12) or "")
    assert layout_problem(load_hardware("gb200"), 36) is None  # within the NVL72 domain


def test_cli_refuses_a_layout_past_the_interconnect_in_one_line() -> None:
    result = subprocess.run([sys.executable, "-m", "specsim", "roofline", "--hardware",
                             "a100-80g-sxm", "--model", "llama-3.1-70b", "--tp", "16"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specsim: error: option --tp: a layout of 16")
    assert "has no 'node' block" in lines[0]


def _profile(tmp_path: Path, old: str, new: str) -> Path:
    text = (REPO / "hardware" / "h100-sxm.yaml").read_text()
    assert old in text
    path = tmp_path / "gpu.yaml"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize("old, new, field", [
    ("  gpus: 8\n", "  gpus: 0\n", "node.gpus"),
    ("  scale_up_gpus: 8 ", "  scale_up_gpus: 12 ", "node.scale_up_gpus"),
    ("    bandwidth_Gb_per_s: 400\n", "    bandwidth_Gb_per_s: -400\n",
     "node.network.bandwidth_Gb_per_s"),
    ("      value: 21.27\n", "      value: -1\n", "node.network.latency_us"),
])
def test_bad_node_values_name_file_and_field(tmp_path: Path, old: str, new: str,
                                             field: str) -> None:
    path = _profile(tmp_path, old, new)
    with pytest.raises(SpecError) as err:
        load_hardware(str(path))
    assert str(path) in str(err.value) and f"'{field}'" in str(err.value)


def test_a_node_number_without_a_source_is_refused(tmp_path: Path) -> None:
    text = (REPO / "hardware" / "h100-sxm.yaml").read_text()
    node = text.index("\nnode:")
    block = text[node:]
    source = block.rindex("\n  source:")
    path = tmp_path / "gpu.yaml"
    path.write_text(text[:node] + block[:source] + "\n")
    with pytest.raises(SpecError, match="node.gpus' = 8 has no source"):
        load_hardware(str(path))


def test_a_profile_without_the_block_still_loads(tmp_path: Path) -> None:
    text = (REPO / "hardware" / "h100-sxm.yaml").read_text()
    path = tmp_path / "gpu.yaml"
    path.write_text(text[:text.index("\nnode:")] + "\n")
    hw = load_hardware(str(path))
    assert hw.node is None
    # its TP 16 keeps the ring over NVLink it had before the block, and a pass refuses it
    assert collective_time_s(np.array([1e6]), hw, 16)[0] == pytest.approx(
        16e-6 + 2 * 15 / 16 * 1e6 / (0.538 * 450e9))
    with pytest.raises(SpecError, match="has no 'node' block"):
        pass_cost(load_model("llama-3.1-70b"), hw, uniform_passes(1.0, np.array([1.0]), 0.0),
                  tp=16)

"""`specsim acceptance from-probs|rounds|objectives|weights` as a user runs them, and one clear
line with exit 2 for each kind of bad array file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from specsim.specs.workloads import load_workload
from specsim.speculation.verification import tokenwise_expected_accepted
from tests.test_cli import ok, run


def write_pair(tmp_path: Path, rollouts: int = 40, positions: int = 5, vocab: int = 4
               ) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    """A target and a drafter file of full distributions with the target's sampled tokens."""
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(vocab), size=(rollouts, positions))
    q = 0.5 * p + 0.5 * rng.dirichlet(np.ones(vocab), size=(rollouts, positions))
    tokens = (rng.random((rollouts, positions, 1)) > np.cumsum(p, axis=-1)).sum(-1)
    target, draft = tmp_path / "target.npz", tmp_path / "draft.npz"
    np.savez(target, probs=p, tokens=np.minimum(tokens, vocab - 1))
    np.savez(draft, probs=q)
    return target, draft, p, q


def test_from_probs_writes_a_workload_that_recommend_reads(tmp_path: Path) -> None:
    target, draft, p, q = write_pair(tmp_path)
    out = tmp_path / "w.yaml"
    data = json.loads(ok("acceptance", "from-probs", str(target), str(draft), "--out", str(out),
                         "--max-draft", "4", "--check", "--json"))
    # per rollout, token-wise tau is the verification module's exact value plus one
    expected = np.mean([tokenwise_expected_accepted(p[r, :4], q[r, :4]) for r in range(40)])
    assert data["rows"][-1]["tau"] == pytest.approx(expected + 1.0)
    assert data["check"]["agrees"] is True
    workload = load_workload(str(out))
    assert len(workload.acceptance.position_alphas) == 4
    assert yaml.safe_load(out.read_text())["from_probs"]["tau"][-1] == pytest.approx(
        expected + 1.0, abs=1e-6)
    rows = json.loads(ok("recommend", "--workload", str(out), "--batch", "1", "--json"))
    assert "target.npz" in rows["acceptance_source"]
    again = run("acceptance", "from-probs", str(target), str(draft), "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr


def test_from_probs_block_is_at_least_tokenwise_and_checks(tmp_path: Path) -> None:
    target, draft, _, _ = write_pair(tmp_path, rollouts=400)
    taus = {}
    for rule in ("tokenwise", "block"):
        data = json.loads(ok("acceptance", "from-probs", str(target), str(draft), "--out",
                             str(tmp_path / f"{rule}.yaml"), "--verification", rule, "--check",
                             "--json"))
        assert data["check"]["agrees"] is True, data["check"]
        taus[rule] = data["rows"][-1]["tau"]
    assert taus["block"] > taus["tokenwise"] - 0.05
    text = ok("acceptance", "from-probs", str(target), str(draft), "--out",
              str(tmp_path / "x.yaml"), "--check")
    assert "simulated" in text and "agree" in text


def test_rounds_compares_two_drafters(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    a = rng.uniform(0.6, 1.0, size=(10, 8, 8))
    np.savez(tmp_path / "a.npz", acceptance=a)
    np.savez(tmp_path / "b.npz", acceptance=a * 0.8)
    data = json.loads(ok("acceptance", "rounds", str(tmp_path / "a.npz"),
                         str(tmp_path / "b.npz"), "--json"))
    assert data["comparison"]["rounds_difference"] > 0
    first = data["rows"][0]
    assert 1.0 <= first["rounds"] <= 9.0 and 8 / 9 <= first["tau_equivalent"] <= 8.0
    assert "minus" in ok("acceptance", "rounds", str(tmp_path / "a.npz"),
                         str(tmp_path / "b.npz"))


def test_objectives_default_and_user_target(tmp_path: Path) -> None:
    png = tmp_path / "fits.png"
    rows = json.loads(ok("acceptance", "objectives", "--plot", str(png), "--json"))
    alpha = {r["objective"]: r["alpha"] for r in rows}
    assert alpha["forward_kl"] == pytest.approx(0.42, abs=0.006)
    assert alpha["tv"] == pytest.approx(0.54, abs=0.006)
    assert png.read_bytes()[:4] == b"\x89PNG"
    # one Gaussian target: every objective recovers it, alpha ~ 1
    grid = np.linspace(-5, 5, 101)
    target = np.exp(-0.5 * (grid - 1.0) ** 2)
    np.savez(tmp_path / "mine.npz", target=target / target.sum(), grid=grid)
    rows = json.loads(ok("acceptance", "objectives", "--target", str(tmp_path / "mine.npz"),
                         "--json"))
    assert all(r["alpha"] > 0.99 for r in rows)


def test_weights_table_and_plot(tmp_path: Path) -> None:
    png = tmp_path / "weights.png"
    data = json.loads(ok("acceptance", "weights", "--plot", str(png), "--json"))
    assert len(data["rows"]) == 16 and data["rows"][0]["tau_weight"] == 1.0
    assert 6.0 < data["tau"] < 7.0
    assert png.read_bytes()[:4] == b"\x89PNG"
    rows = json.loads(ok("acceptance", "weights", "--alpha", "1,1,1", "--json"))["rows"]
    assert [r["tau_weight"] for r in rows] == pytest.approx([1, 2 / 3, 1 / 3])


def _bad_files(tmp_path: Path) -> dict[str, tuple[dict[str, np.ndarray], str]]:
    good = np.full((2, 3, 4), 0.25)
    negative = good.copy()
    negative[1, 2, 0], negative[1, 2, 1] = -0.25, 0.75
    nan = good.copy()
    nan[0, 1, 3] = np.nan
    short = good.copy()
    short[1, 0, 2] = 0.1
    ids = np.tile(np.arange(2), (2, 3, 1))
    return {
        "shape": ({"probs": np.full((2, 3, 5), 0.2)}, "does not match"),
        "negative": ({"probs": negative}, "'probs' index (1, 2, 0)"),
        "nan": ({"probs": nan}, "'probs' index (0, 1, 3)"),
        "sum": ({"probs": short}, "'probs' index (1, 0): sums to 0.85"),
        "topk_sum": ({"topk_ids": ids, "topk_probs": np.full((2, 3, 2), 0.25),
                      "rest": np.full((2, 3), 0.4)}, "'topk_probs' index (0, 0): sums to 0.9"),
        "topk_rest_shape": ({"topk_ids": ids, "topk_probs": np.full((2, 3, 2), 0.25),
                             "rest": np.full((2, 2), 0.5)}, "array 'rest' shape (2, 2)"),
        "tokens": ({"probs": good, "tokens": np.full((2, 3), 4)}, "'tokens' index (0, 0) = 4"),
        "unknown": ({"logits": good}, "unknown format"),
    }


@pytest.mark.parametrize("case", ["shape", "negative", "nan", "sum", "topk_sum",
                                  "topk_rest_shape", "tokens", "unknown"])
def test_bad_probability_files(tmp_path: Path, case: str) -> None:
    arrays, message = _bad_files(tmp_path)[case]
    np.savez(tmp_path / "target.npz", probs=np.full((2, 3, 4), 0.25))
    np.savez(tmp_path / "draft.npz", **arrays)
    order = ["target.npz", "draft.npz"] if case in ("shape", "topk_sum", "topk_rest_shape") \
        else ["draft.npz", "target.npz"]
    if case == "tokens":
        np.savez(tmp_path / "target.npz", **arrays)
        order = ["target.npz", "draft.npz"]
        np.savez(tmp_path / "draft.npz", probs=np.full((2, 3, 4), 0.25))
    out = tmp_path / "w.yaml"
    result = run("acceptance", "from-probs", *(str(tmp_path / f) for f in order),
                 "--out", str(out))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and ".npz" in lines[0], result.stderr
    assert not out.exists()


def test_unknown_format_and_bad_acceptance(tmp_path: Path) -> None:
    text = tmp_path / "probs.csv"
    text.write_text("0.5,0.5\n")
    result = run("acceptance", "from-probs", str(text), str(text), "--out",
                 str(tmp_path / "w.yaml"))
    assert result.returncode == 2 and "probs.csv: unknown format" in result.stderr
    a = np.full((1, 3, 3), 0.5)
    a[0, 1, 2] = 1.5
    a[0, 2, 0] = np.nan  # below the diagonal: ignored
    np.savez(tmp_path / "a.npz", acceptance=a)
    result = run("acceptance", "rounds", str(tmp_path / "a.npz"))
    assert result.returncode == 2
    assert "a.npz: array 'acceptance' index (0, 1, 2) = 1.5" in result.stderr
    np.savez(tmp_path / "b.npz", acceptance=np.full((1, 4, 4), 0.5))
    result = run("acceptance", "rounds", str(tmp_path / "a.npz").replace("a.npz", "b.npz"),
                 str(tmp_path / "c.npz"))
    assert result.returncode == 2 and "c.npz: cannot read" in result.stderr

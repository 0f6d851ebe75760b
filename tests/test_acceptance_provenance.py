"""Which acceptance a drafter gets on a workload, and that the answer says where it came from.

Expected values are the published numbers the YAML files cite (their `source` lines), written
here by hand: a drafter's own measurement comes before another drafter's of its family.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specsim.errors import SpecError
from specsim.specs.acceptance import constant_profile
from specsim.specs.drafters import load_drafter
from specsim.specs.paths import builtin_dir, builtin_names
from specsim.specs.workloads import load_workload
from specsim.speculation.setup import load_setup


def _drafter_yaml(tmp_path: Path, **changes: object) -> str:
    data = yaml.safe_load((builtin_dir("drafters") / "eagle3-llama-3.1-8b.yaml").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_own_measurement_on_the_task_comes_first() -> None:
    # EAGLE-1 on Llama-3.1-8B, vLLM issue 20780: MT-Bench tau 2.47 at K = 7 (chat.yaml's
    # eagle3 entry, 2.77, is EAGLE-3's and must not be used for it).
    p = load_workload("chat").profile_for(load_drafter("eagle-llama-3.1-8b"))
    assert p.tau(7) == pytest.approx(2.47, abs=1e-6)
    assert not p.is_proxy
    assert p.provenance == "eagle-llama-3.1-8b's own measurement on chat"
    # the code workload's eagle3 entry was measured with this very checkpoint on HumanEval
    p = load_workload("code").profile_for(load_drafter("eagle3-llama-3.1-8b"))
    assert p.tau(7) == pytest.approx(3.49, abs=1e-6)
    assert p.provenance == "eagle3-llama-3.1-8b's own measurement on code"


def test_own_measurement_on_another_task_is_labelled() -> None:
    # SpecForge issue 339: accept length 1.86 with 3 draft tokens on MT-Bench; the code
    # workload's eagle3 entry (HumanEval 3.49 at K = 7) is another checkpoint's.
    p = load_workload("code").profile_for(load_drafter("eagle3-qwen3-30b-a3b"))
    assert p.tau(3) == pytest.approx(1.86, abs=1e-6)
    assert p.provenance == ("eagle3-qwen3-30b-a3b's own measurement on chat, used for code "
                            "(none on code)")


def test_another_drafters_number_is_a_flagged_proxy(tmp_path: Path) -> None:
    mine = load_drafter(_drafter_yaml(tmp_path, checkpoint=None, acceptance=None))
    p = load_workload("chat").profile_for(mine)
    assert p.tau(7) == pytest.approx(2.77, abs=1e-6)  # chat.yaml's eagle3 entry
    assert p.is_proxy
    assert p.provenance.startswith("PROXY: the eagle3 family's acceptance on chat, measured "
                                   "with yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, not with mine")


def test_a_users_workload_without_a_drafter_is_taken_as_given(tmp_path: Path) -> None:
    path = tmp_path / "ours.yaml"
    path.write_text(yaml.safe_dump({
        "name": "Our traffic", "source": "our logs", "context": 1000,
        "acceptance": {"alpha": 0.5, "source": "our logs"},
        "acceptance_by_family": {"eagle3": {"alpha": 0.6, "source": "our EAGLE-3 logs"}}}))
    w = load_workload(str(path))
    p = w.profile_for(load_drafter("eagle3-llama-3.1-8b"))  # it has its own 2.77 on chat
    assert p.position_alphas == (0.6,)
    assert "names no drafter checkpoint" in p.provenance
    given = w.with_acceptance(constant_profile(0.7, source="fit"))
    p = given.profile_for(load_drafter("eagle3-llama-3.1-8b"))
    assert p.position_alphas == (0.7,)
    assert p.provenance.startswith("given for every drafter")


def test_speedup_and_recommend_use_the_same_choice() -> None:
    _, p = load_setup(hardware="h100-sxm", drafter="eagle3-qwen3-30b-a3b", workload="code")
    assert p.tau(3) == pytest.approx(1.86, abs=1e-6)


@pytest.mark.parametrize("slug", builtin_names("scenarios"))
def test_every_builtin_workload_entry_names_its_drafter(slug: str) -> None:
    w = load_workload(slug)
    for p in [w.acceptance, *w.by_family.values()]:
        assert p.measured_with, (slug, p.source)


def test_a_bad_task_names_the_file_and_field(tmp_path: Path) -> None:
    bad = _drafter_yaml(tmp_path, acceptance={"tau": 2.0, "gamma": 3, "task": "MT Bench!",
                                              "source": "x"})
    with pytest.raises(SpecError) as err:
        load_drafter(bad)
    text = str(err.value)
    assert "mine.yaml" in text and "task" in text and "\n" not in text


def test_the_answer_names_the_acceptance_and_flags_a_proxy() -> None:
    from specsim.present.report_answer import answer_text
    from specsim.serving.plan import make_plan

    plan = make_plan(hardware="h100-sxm", model="qwen3-8b", drafters=["hspec-qwen3-8b"],
                     engine="vllm", workload="code", min_tokens_per_s_per_user=0, tps=(1,))
    text = answer_text(plan)
    assert plan.best is not None and plan.best.nodes > 0
    # H-Spec's acceptance is the article's +8.7% over DSpark's 3.72 on MT-Bench: 4.04
    assert "It rests on a PROXY acceptance" in text
    assert ("hspec-qwen3-8b's own measurement on chat, used for code (none on code) "
            "(itself a proxy)") in text
    assert "\u03c4 = 4.04 at 6 draft tokens" in text


def test_validate_refuses_a_published_drafter_for_another_model(tmp_path: Path) -> None:
    """validate goes through the same compatibility check: a row that runs Medusa heads made for
    Vicuna-7B on Vicuna-13B is refused naming the file and row, unless the row says the spec
    only stands for the architecture of a checkpoint made for that target."""
    from specsim.measurement.published import load_published
    from specsim.measurement.validate import validate

    data = yaml.safe_load((builtin_dir("published") / "spec-bench-a100.yaml").read_text())
    row = next(r for r in data["rows"] if r["id"] == "specbench-a100-vicuna13b-medusa")
    assert row["drafter_spec_stands_in"] is True
    del row["drafter_spec_stands_in"]
    data["rows"] = [row]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as err:
        validate(load_published([str(path)]))
    text = str(err.value)
    assert text.startswith("mine.yaml row specbench-a100-vicuna13b-medusa: field 'drafter_spec'")
    assert "was trained for vicuna-7b-v1.3, not vicuna-13b-v1.3" in text and "\n" not in text

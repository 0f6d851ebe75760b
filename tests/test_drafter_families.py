"""The drafter-family table: one complete record per family, every round-cost rule has a
function, and no module outside the table names a family."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path
from typing import get_args

import pytest

import specsim
from specsim.errors import SpecError
from specsim.specs.drafters import (
    FAMILIES,
    BlockRule,
    Cache,
    ConfigReader,
    DraftLimitRule,
    Family,
    RoundCost,
    load_drafter,
)
from specsim.specs.hardware import load_hardware
from specsim.specs.paths import builtin_names
from specsim.speculation.draft_cost import COST_RULES, draft_time_s, round_shape

RULES = {"cache": Cache, "round_cost": RoundCost, "block": BlockRule,
         "draft_limit": DraftLimitRule, "config_reader": ConfigReader}


def test_the_draft_cost_dispatch_covers_every_round_cost_rule() -> None:
    assert set(COST_RULES) == set(get_args(RoundCost))
    assert {f.round_cost for f in FAMILIES.values()} == set(get_args(RoundCost))


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_has_a_complete_record(name: str) -> None:
    record = FAMILIES[name]
    for field in fields(Family):
        value = getattr(record, field.name)
        if field.name in RULES:
            assert value in get_args(RULES[field.name]), field.name
        elif field.name == "other_caches":  # more cache kinds a spec may choose
            assert all(c in get_args(Cache) and c != record.cache for c in value)
        elif field.name == "config_hints":
            # an importable family is recognisable from its config, and only then has hints
            assert bool(value) == (record.config_reader != "none"), field.name
            assert all(isinstance(h, str) and h for h in value)
        else:
            assert isinstance(value, bool), field.name
    # a block rule exactly for the parallel backbones; a block limit needs a block
    assert (record.block != "none") == (record.round_cost == "parallel")
    assert record.draft_limit != "block" or record.block != "none"
    # a sequential family takes one pass per level: a model's layers, or a recurrent cell
    assert record.parallel or record.round_cost in ("autoregressive", "recurrent_cell")


def test_a_record_with_an_unknown_rule_is_refused() -> None:
    with pytest.raises(SpecError, match="'tree'"):
        Family(parallel=True, cache="none", round_cost="tree",  # type: ignore[arg-type]
               block="trained", draft_limit="block")


def test_every_built_in_drafter_is_timed_by_its_familys_rule() -> None:
    hw = load_hardware("h100-sxm")
    for slug in builtin_names("drafters"):
        drafter = load_drafter(slug)
        assert drafter.family in FAMILIES
        t = draft_time_s(drafter, hw, round_shape(batch=[1, 8], depth=[0, 2], nodes=[0, 2],
                                                  accepted=1.0, context=1024))
        assert t[0] == 0.0 and 0.0 < t[1] < 0.1, slug


def test_no_module_outside_the_table_names_a_family() -> None:
    package = Path(specsim.__file__).parent
    table = package / "specs" / "drafters.py"
    assert set(_family_names(table)) == set(FAMILIES)  # the scan finds the table's own names
    offenders = [f"{path.relative_to(package)}: {name!r}"
                 for path in sorted(package.rglob("*.py")) if path != table
                 for name in _family_names(path)]
    assert offenders == []


def _family_names(path: Path) -> list[str]:
    """The string literals in a Python file that are family names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in FAMILIES]


def test_the_config_readers_cover_every_importable_family() -> None:
    from specsim.specs.drafter_import import _READERS

    used = {f.config_reader for f in FAMILIES.values()} - {"none", "target_modules"}
    assert used <= set(_READERS)

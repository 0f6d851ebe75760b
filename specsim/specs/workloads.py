"""Workloads: what a deployment serves (context length, acceptance of its drafter).

An acceptance block, in a workload or a drafter spec, gives per-position conditional
acceptance `alpha` (a list, or one number for every position), optionally per-rank acceptance
`ranks` for trees, or a published mean acceptance length `tau` of a chain of `gamma` draft
tokens from which a constant alpha is derived. Without `ranks`, trees use the article's
candidate-rank model a_j = alpha (1 - alpha)^j with alpha the first position's acceptance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specsim.errors import SpecError
from specsim.specs.acceptance import (
    GEOMETRIC_RANKS,
    AcceptanceProfile,
    alpha_from_tau,
    rank_acceptance_geometric,
)
from specsim.specs.defaults import MAX_CONTEXT_TOKENS
from specsim.specs.io import Fields, read_spec_file, resolve_path, show
from specsim.specs.names import display_name_problem, read_display_name, require


def acceptance_profile(f: Fields, where: str) -> AcceptanceProfile:
    """Parse an acceptance block (see the module docstring)."""
    source = f"{where}: {f.string('source')}"
    if f.has("tau"):
        tau, gamma = f.number("tau", minimum=1.0), f.integer("gamma", minimum=1)
        try:
            alphas: list[float] = [float(alpha_from_tau(tau, gamma))]
        except SpecError:
            raise f.error("tau", f"= {tau} must be in [1, gamma + 1 = {gamma + 1}]") from None
    else:
        alphas = _numbers(f, "alpha")
    ranks = _numbers(f, "ranks") if f.has("ranks") else \
        [float(a) for a in rank_acceptance_geometric(alphas[0], GEOMETRIC_RANKS)]
    try:
        return AcceptanceProfile(
            position_alphas=tuple(alphas), rank_acceptance=tuple(ranks), source=source,
            measured_positions=f.integer("gamma") if f.has("tau") else len(alphas),
            ranks_from_chain=not f.has("ranks"),
            measured_on=f.choice("measured_on", ("chain", "tree", "proxy"), "chain")
            if f.has("measured_on") else "chain")
    except SpecError as err:
        raise f.error("", str(err)) from None


def _numbers(f: Fields, key: str) -> list[float]:
    value = f.value(key)
    values = value if isinstance(value, list) else [value]
    numbers = [float(v) for v in values
               if isinstance(v, int | float) and not isinstance(v, bool) and 0.0 <= v <= 1.0]
    if not values or len(numbers) != len(values):
        raise f.error(key, f"must be a number or a list of numbers in [0, 1], got {show(value)}")
    return numbers


def workload_context(f: Fields) -> float:
    """A workload's `context` (cached tokens per request; 0 when absent), at most
    MAX_CONTEXT_TOKENS like --context: every loader of a workload file reads it here."""
    return f.number("context", 0.0, minimum=0.0, maximum=MAX_CONTEXT_TOKENS)


def family_profiles(f: Fields, where: str) -> dict[str, AcceptanceProfile]:
    """The optional `acceptance_by_family` block: one acceptance block per drafter family."""
    families: dict[str, AcceptanceProfile] = {}
    fam = f.sub("acceptance_by_family", required=False)
    if fam is not None:
        for family in fam.keys():
            sub = fam.sub(family)
            assert sub is not None
            families[family] = acceptance_profile(sub, f"{where} [{family}]")
    return families


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """A serving scenario: the context per request and the drafter's acceptance on it (per
    drafter family where the scenario measured it, else its default block)."""

    slug: str
    name: str
    context: float
    acceptance: AcceptanceProfile
    by_family: dict[str, AcceptanceProfile] = field(default_factory=dict)
    path: str = ""

    def acceptance_for(self, family: str | None) -> AcceptanceProfile:
        """The acceptance of a drafter of this family (the default block if none is listed)."""
        return self.by_family.get(family or "", self.acceptance)


def load_workload(name: str) -> Workload:
    """Load a built-in workload by slug or a YAML file by path."""
    path = resolve_path("scenarios", name)
    spec = read_spec_file(path)
    f = Fields(spec.data, spec.path)
    block = f.sub("acceptance")
    assert block is not None
    workload = Workload(slug=path.stem, name=read_display_name(f),
                        context=workload_context(f),
                        acceptance=acceptance_profile(block, spec.path),
                        by_family=family_profiles(f, spec.path), path=spec.path)
    f.value("from_probs")  # the record `acceptance from-probs` keeps of its run (not read)
    for key in ("source", "prompt_tokens", "output_tokens"):
        f.value(key)  # a serving scenario's lengths: `plan` reads them (load_scenario)
    f.check_unknown()
    return workload


def workload_to_yaml(name: str, profile: AcceptanceProfile, *,
                     context: float | tuple[float, ...], counts_source: str) -> dict[str, Any]:
    """A workload mapping (for `acceptance fit`) in the form `load_workload` reads.

    context: cached tokens per request; a workload holds one length, not a mix.
    """
    require(name, display_name_problem, "option --name (the workload name)")
    if isinstance(context, tuple):
        raise SpecError(f"option --context: a workload holds one context length, got a mix "
                        f"{', '.join(f'{c:g}' for c in context)}")
    return {
        "name": name,
        "context": context,
        "source": counts_source,
        "acceptance": {"alpha": [round(a, 6) for a in profile.position_alphas],
                       "source": counts_source},
    }

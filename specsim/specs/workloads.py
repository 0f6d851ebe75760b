"""Workloads: what a deployment serves (context, request lengths, acceptance of its drafters).

One type (`Workload`) and one loader (`load_workload`) for every workload file, built-in
(`workloads/scenarios/`: chat, code, ...) or a path: `--workload` means the same on every
command. A workload gives `context` and an `acceptance` block, and optionally

    prompt_tokens: {median: M, p90: P, source: ...}    lognormal through two quantiles
    output_tokens: {median: M, p90: P, source: ...}
    acceptance_by_family:                              one acceptance block per drafter family
      eagle3: {tau: 2.77, gamma: 7, source: ...}

An acceptance block, in a workload or a drafter spec, gives per-position conditional
acceptance `alpha` (a list, or one number for every position), optionally per-rank acceptance
`ranks` for trees, or a published mean acceptance length `tau` of a chain of `gamma` draft
tokens from which a constant alpha is derived. Without `ranks`, trees use the article's
candidate-rank model a_j = alpha (1 - alpha)^j with alpha the first position's acceptance.
An acceptance block may say what it was measured on: `task` (the kind of prompts, as a
workload's `task` names them: chat for MT-Bench, code, math, ...) and, in a workload,
`measured_with` (the Hub id of the drafter checkpoint measured).

Which acceptance a drafter gets on a workload (`Workload.profile_for`), first that applies:

1. the workload's own statement for its family (or its default block) where it names no
   drafter: the user's file for their deployment;
2. a measurement of this drafter (the workload's entry `measured_with` its checkpoint, or the
   drafter's own `acceptance`) on the workload's task;
3. a measurement of this drafter on another task, labelled with that task;
4. another drafter's measurement of the same family on this workload, flagged as a proxy;
5. the workload's default block (another family's drafter), flagged as a proxy.

The profile returned says which in its `provenance`; 4 and 5 are `measured_on: proxy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from specsim.errors import SpecError, parameter_error
from specsim.specs.acceptance import (
    GEOMETRIC_RANKS,
    AcceptanceProfile,
    alpha_from_tau,
    rank_acceptance_geometric,
)
from specsim.specs.defaults import MAX_CONTEXT_TOKENS, MAX_TREE_NODES
from specsim.specs.fields import Fields, show
from specsim.specs.io import read_spec_file
from specsim.specs.names import (
    display_name_problem,
    read_display_name,
    read_hub_id,
    read_task,
    require,
)
from specsim.specs.paths import resolve_path


class HasFamily(Protocol):
    """What `Workload.profile_for` reads of a drafter (`specsim.specs.drafters.Drafter`, which
    imports this module for its acceptance block, so it is not imported here)."""

    @property
    def family(self) -> str: ...

    @property
    def slug(self) -> str: ...

    @property
    def checkpoint(self) -> str: ...

    @property
    def acceptance(self) -> AcceptanceProfile | None: ...


def acceptance_profile(f: Fields, where: str) -> AcceptanceProfile:
    """Parse an acceptance block (see the module docstring)."""
    source = f"{where}: {f.string('source')}"
    if f.has("tau"):
        # a chain measured past the longest one any command drafts (MAX_TREE_NODES) is a typo
        tau = f.number("tau", minimum=1.0)
        gamma = f.integer("gamma", minimum=1, maximum=MAX_TREE_NODES)
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
            measured_positions=gamma if f.has("tau") else len(alphas),
            ranks_from_chain=not f.has("ranks"),
            measured_on=f.choice("measured_on", ("chain", "tree", "proxy"), "chain")
            if f.has("measured_on") else "chain",
            task=read_task(f) if f.has("task") else "",
            measured_with=read_hub_id(f, "measured_with") if f.has("measured_with") else "")
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


# z of the standard normal at the 90th percentile: p90 = median exp(Z90 sigma).
Z90 = 1.2815515655446004
# Output tokens per request when a workload does not say (an assumption the report states).
DEFAULT_OUTPUT_TOKENS = 512.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LengthDistribution:
    """Lognormal token counts given by their median and 90th percentile (tokens).

    p90 == median is a fixed length.
    """

    median: float
    p90: float
    source: str

    def __post_init__(self) -> None:
        if not (self.median >= 1 and self.p90 >= self.median):
            raise SpecError(f"{self.source}: need 1 <= median <= p90 tokens, got median "
                            f"{self.median:g}, p90 {self.p90:g}")

    @property
    def sigma(self) -> float:
        """Standard deviation of ln(tokens)."""
        return float(np.log(self.p90 / self.median) / Z90)

    @property
    def mean(self) -> float:
        """Mean tokens: median exp(sigma^2 / 2)."""
        return float(self.median * np.exp(self.sigma ** 2 / 2))

    def quantile(self, q: float) -> float:
        """Tokens at quantile q in (0, 1)."""
        from scipy.special import ndtri  # the normal quantile; scipy.stats costs a second

        return float(self.median * np.exp(self.sigma * ndtri(q)))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` draws, rounded up to whole tokens."""
        return np.ceil(self.median * np.exp(self.sigma * rng.standard_normal(size)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """What a deployment serves: the context per request, request lengths, and the drafters'
    acceptance on it (per drafter family where it was measured, else its default block).

    The one type of every workload file: `speedup` and `recommend` read its `context` and
    acceptance; `plan` (where it is called a scenario) its prompt and output lengths.
    context: the workload's own cached tokens per request. prompt, output: lognormal lengths
    (tokens); where the file gives none (`lengths_given` False), the prompt is the context and
    the output DEFAULT_OUTPUT_TOKENS. by_family: profiles per drafter family (eagle3, ...).
    """

    slug: str
    name: str
    source: str
    context: float
    prompt: LengthDistribution
    output: LengthDistribution
    acceptance: AcceptanceProfile
    by_family: dict[str, AcceptanceProfile] = field(default_factory=dict)
    lengths_given: bool = True
    path: str = ""
    task: str = ""

    def acceptance_for(self, family: str | None) -> AcceptanceProfile:
        """The acceptance block of a drafter family (the default block if none is listed), as
        the file gives it; a drafter's own acceptance comes from `profile_for`."""
        return self.by_family.get(family or "", self.acceptance)

    def profile_for(self, drafter: HasFamily | None) -> AcceptanceProfile:
        """The acceptance `drafter` has on this workload, with its `provenance` (the order is
        in the module docstring); None: the default block."""
        if drafter is None:
            return self.acceptance
        family = self.by_family.get(drafter.family)
        entries = [p for p in (family, self.acceptance) if p is not None]
        own = drafter.acceptance
        mine = [p for p in entries if drafter.checkpoint and p.measured_with == drafter.checkpoint]
        given = family if family is not None else self.acceptance
        if not given.measured_with:
            if given.provenance:  # given for every drafter (`with_acceptance`)
                return given
            return replace(given, provenance=f"the workload's acceptance for {drafter.family} "
                           f"({self.path or self.slug}; it names no drafter checkpoint)")
        here = [p for p in mine if (p.task or self.task) == self.task]
        if own is not None and own.task == self.task:
            here.append(own)
        if here:
            return replace(here[0], provenance=f"{drafter.slug}'s own measurement on "
                           f"{self.task}" + (" (itself a proxy)" if here[0].is_proxy else ""))
        elsewhere = mine + ([own] if own is not None else [])
        if elsewhere:
            p = elsewhere[0]
            task = p.task or "an unstated task"
            return replace(p, provenance=f"{drafter.slug}'s own measurement on {task}, used "
                           f"for {self.task} (none on {self.task})"
                           + (" (itself a proxy)" if p.is_proxy else ""))
        other = given.measured_with
        what = f"the {drafter.family} family's" if family is not None else \
            "the workload's default"
        return replace(given, measured_on="proxy", provenance=(
            f"PROXY: {what} acceptance on {given.task or self.task}, measured with {other}, "
            f"not with {drafter.slug} (no measurement of it was found; measure it with "
            "`specsim acceptance fit`)"))

    def with_acceptance(self, profile: AcceptanceProfile) -> Workload:
        """The same lengths with one profile for every drafter (a fitted measurement)."""
        return replace(self, by_family={}, acceptance=replace(
            profile, measured_with="", provenance=f"given for every drafter ({profile.source})"))

    @property
    def decode_context_tokens(self) -> float:
        """Mean cached tokens of a decoding request: its prompt plus half its output."""
        return self.prompt.mean + self.output.mean / 2



def _lengths(f: Fields, key: str, where: str) -> LengthDistribution | None:
    block = f.sub(key, required=False)
    if block is None:
        return None
    median = block.number("median", minimum=1.0, maximum=MAX_CONTEXT_TOKENS)
    p90 = block.number("p90", median, minimum=1.0, maximum=MAX_CONTEXT_TOKENS)
    if p90 < median:
        raise block.error("p90", f"= {p90:g} is below the median {median:g} (need "
                          "median <= p90)")
    return LengthDistribution(median=median, p90=p90,
                              source=f"{where}: {block.string('source')}")


def load_workload(name: str) -> Workload:
    """A workload (a serving scenario) by built-in slug (`specsim workloads list`) or YAML path.

    Every workload file loads: a scenario with request lengths, or one with only a context and
    an acceptance block (e.g. written by `specsim acceptance fit`), whose lengths then default
    (see `Workload`).
    """
    path = resolve_path("scenarios", name)
    spec = read_spec_file(path)
    f = Fields(spec.data, spec.path)
    context = workload_context(f)
    block = f.sub("acceptance")
    assert block is not None
    default = acceptance_profile(block, spec.path)
    families = family_profiles(f, spec.path)
    prompt = _lengths(f, "prompt_tokens", spec.path)
    output = _lengths(f, "output_tokens", spec.path)
    given = prompt is not None and output is not None
    if prompt is None:
        prompt = LengthDistribution(median=max(context, 1.0), p90=max(context, 1.0),
                                    source=f"{spec.path}: prompt = the workload's context")
    if output is None:
        output = LengthDistribution(median=DEFAULT_OUTPUT_TOKENS, p90=DEFAULT_OUTPUT_TOKENS,
                                    source=f"assumed {DEFAULT_OUTPUT_TOKENS:.0f} output tokens "
                                    "(the workload gives none)")
    workload = Workload(slug=path.stem, name=read_display_name(f),
                        source=str(f.value("source") or spec.path), context=context,
                        prompt=prompt, output=output, acceptance=default, by_family=families,
                        lengths_given=given, path=spec.path,
                        task=read_task(f, "task", path.stem) if f.has("task") else path.stem)
    f.value("from_probs")  # the record `acceptance from-probs` keeps of its run (not read)
    f.check_unknown()
    return workload


def workload_to_yaml(name: str, profile: AcceptanceProfile, *,
                     context: float | tuple[float, ...], counts_source: str) -> dict[str, Any]:
    """A workload mapping (for `acceptance fit`) in the form `load_workload` reads.

    context: cached tokens per request; a workload holds one length, not a mix.
    """
    require(name, display_name_problem, "name", parameter="name")
    if isinstance(context, tuple):
        raise parameter_error("context", "a workload holds one context length, got a mix "
                              f"{', '.join(f'{c:g}' for c in context)}")
    return {
        "name": name,
        "context": context,
        "source": counts_source,
        "acceptance": {"alpha": [round(a, 6) for a in profile.position_alphas],
                       "source": counts_source},
    }

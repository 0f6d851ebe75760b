"""Serving scenarios: prompt and output lengths, and acceptance per drafter family.

A scenario is a workload YAML (`workloads/scenarios/`) with, besides the `context` and
`acceptance` every workload has, optional

    prompt_tokens: {median: M, p90: P, source: ...}    lognormal through two quantiles
    output_tokens: {median: M, p90: P, source: ...}
    acceptance_by_family:                              one acceptance block per drafter family
      eagle3: {tau: 2.77, gamma: 7, source: ...}

A workload without lengths (for instance one written by `specsim acceptance fit`) is a
scenario whose prompt is its `context` and whose output is DEFAULT_OUTPUT_TOKENS, stated in
the report as an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specsim.errors import SpecError
from specsim.specs.acceptance import AcceptanceProfile
from specsim.specs.defaults import MAX_CONTEXT_TOKENS
from specsim.specs.drafters import Drafter
from specsim.specs.io import Fields, read_spec_file, resolve_path
from specsim.specs.names import read_display_name
from specsim.specs.workloads import acceptance_profile, family_profiles, workload_context

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
        from scipy.stats import norm

        return float(self.median * np.exp(self.sigma * norm.ppf(q)))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` draws, rounded up to whole tokens."""
        return np.ceil(self.median * np.exp(self.sigma * rng.standard_normal(size)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """What a deployment serves: request lengths and its drafters' acceptance.

    context: the workload's own cached tokens per request (kept for `speedup`/`recommend`);
    the serving model uses the lengths instead. acceptance: the default profile;
    by_family: profiles per drafter family (eagle3, dflash, ...).
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

    @property
    def decode_context_tokens(self) -> float:
        """Mean cached tokens of a decoding request: its prompt plus half its output."""
        return self.prompt.mean + self.output.mean / 2

    def profile_for(self, drafter: Drafter | None) -> AcceptanceProfile:
        """The drafter family's profile, else the scenario's default."""
        if drafter is not None and drafter.family in self.by_family:
            return self.by_family[drafter.family]
        return self.acceptance

    def with_acceptance(self, profile: AcceptanceProfile) -> Scenario:
        """The same lengths with one profile for every drafter (a fitted measurement)."""
        from dataclasses import replace

        return replace(self, acceptance=profile, by_family={})


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


def load_scenario(name: str) -> Scenario:
    """A scenario by slug or path; any workload file loads (missing lengths get defaults)."""
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
    return Scenario(slug=path.stem, name=read_display_name(f),
                    source=str(f.value("source") or spec.path), context=context,
                    prompt=prompt, output=output, acceptance=default, by_family=families,
                    lengths_given=given, path=spec.path)

"""Inference engines as data: the host and launch costs a server adds around the kernels.

An engine spec (engines/*.yaml) holds, each with a source or the rows it was fitted on:

    launch                 "eager" (one asynchronous launch per kernel, no CUDA graphs) or
                           "graphs" (a pass replays a captured CUDA graph)
    kernel_launch_s        seconds of host time per eager kernel launch
    kernels_per_layer      eager kernels per decoder layer; kernels_per_pass: per model
    moe_extra_kernels_per_layer  extra eager kernels of an MoE layer over a dense MLP
    per_pass_s             host seconds per target forward pass (schedule, prepare, sample)
    per_request_s          host seconds per request per pass
    drafter_pass_s         host seconds per sequential drafter pass (tree level)
    round_s                host seconds per speculative round (acceptance, tree mask, KV
                           bookkeeping of rejected tokens)
    bandwidth_efficiency   achieved fraction of datasheet bandwidth used for datasheet GPUs

`roofline` is the engine with no terms: the idealized GPU of the article.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from specsim.errors import SpecError
from specsim.specs.io import Fields, read_spec_file, resolve_path

LAUNCH_MODES = ("eager", "graphs", "none")
# Terms validate may fit (leave-one-source-out); the rest come from sources only.
FITTABLE = ("kernel_launch_s", "per_pass_s", "drafter_pass_s", "round_s")
# Physical range of each fitted term, seconds: the launch cost stays within its sourced range
# (4-15 us per eager op); host terms are non-negative and below 20 ms.
FIT_BOUNDS = {"kernel_launch_s": (4e-6, 15e-6), "per_pass_s": (0.0, 0.02),
              "drafter_pass_s": (0.0, 0.02), "round_s": (0.0, 0.02)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    """Engine terms, SI units (seconds); see the module docstring."""

    slug: str
    name: str
    version: str
    launch: str
    kernel_launch_s: float = 0.0
    kernels_per_layer: float = 0.0
    kernels_per_pass: float = 0.0
    moe_extra_kernels_per_layer: float = 0.0
    per_pass_s: float = 0.0
    per_request_s: float = 0.0
    drafter_pass_s: float = 0.0
    round_s: float = 0.0
    bandwidth_efficiency: float = 1.0
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    fitted_on: tuple[str, ...] = ()
    path: str = ""

    def __post_init__(self) -> None:
        if self.launch not in LAUNCH_MODES:
            raise SpecError(f"{self.path}: field 'launch' must be one of "
                            f"{', '.join(LAUNCH_MODES)}; got {self.launch!r}")
        for name in ("kernel_launch_s", "kernels_per_layer", "kernels_per_pass",
                     "moe_extra_kernels_per_layer", "per_pass_s", "per_request_s",
                     "drafter_pass_s", "round_s"):
            if getattr(self, name) < 0:
                raise SpecError(f"{self.path}: field '{name}' must be >= 0, "
                                f"got {getattr(self, name)!r}")
        if not 0 < self.bandwidth_efficiency <= 1:
            raise SpecError(f"{self.path}: field 'bandwidth_efficiency' must be in (0, 1], "
                            f"got {self.bandwidth_efficiency!r}")

    @property
    def eager(self) -> bool:
        return self.launch == "eager"

    def with_terms(self, **terms: float) -> Engine:
        """The same engine with some terms replaced (a fit)."""
        return dataclasses.replace(self, **terms)  # type: ignore[arg-type]


ROOFLINE = Engine(slug="roofline", name="no engine (idealized GPU roofline)", version="-",
                  launch="none")


def engine_or_none(engine: Engine) -> Engine | None:
    """The engine a Setup carries: None for the roofline (no terms to add)."""
    return None if engine.launch == "none" else engine


def load_engine(name: str) -> Engine:
    """Load an engine by slug or path; `roofline` is the engine with no terms."""
    if name == ROOFLINE.slug:
        return ROOFLINE
    path = resolve_path("engines", name)
    spec = read_spec_file(path)
    f = Fields(spec.data, spec.path)
    numbers = {key: f.number(key, 0.0, minimum=0.0) for key in (
        "kernel_launch_s", "kernels_per_layer", "kernels_per_pass",
        "moe_extra_kernels_per_layer", "per_pass_s", "per_request_s", "drafter_pass_s",
        "round_s")}
    terms = _fitted_terms(f)
    numbers.update(terms)
    fitted_on = tuple(str(r) for r in (spec.data.get("fit") or {}).get("rows", []) or [])
    return Engine(slug=path.stem, name=f.string("name"), version=f.string("version"),
                  launch=f.choice("launch", LAUNCH_MODES),
                  bandwidth_efficiency=f.number("bandwidth_efficiency", 1.0, positive=True),
                  sources=spec.sources, fitted_on=fitted_on, path=spec.path, **numbers)


def _fitted_terms(f: Fields) -> dict[str, float]:
    """The `fit` block: terms fitted on published rows (validate refits them held out)."""
    fit = f.sub("fit", required=False)
    if fit is None:
        return {}
    return {key: fit.number(key, minimum=0.0) for key in FITTABLE if fit.has(key)}

"""Serving scenarios: the workloads `plan` serves (request lengths, acceptance per family).

A scenario is a workload: the same file, read by the same loader into the same type
(`specsim.specs.workloads`); these names are kept for the serving code that says "scenario".
A workload without lengths (for instance one written by `specsim acceptance fit`) is a
scenario whose prompt is its `context` and whose output is DEFAULT_OUTPUT_TOKENS, stated in
the report as an assumption.
"""

from __future__ import annotations

from specsim.specs.workloads import (
    DEFAULT_OUTPUT_TOKENS,
    Z90,
    LengthDistribution,
    Workload,
    load_workload,
)

__all__ = ["DEFAULT_OUTPUT_TOKENS", "Z90", "LengthDistribution", "Scenario", "load_scenario"]

Scenario = Workload  # one type for every workload file
load_scenario = load_workload  # one loader

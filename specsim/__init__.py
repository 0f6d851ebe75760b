"""specsim: predict the speed of speculative decoding of LLMs before renting a GPU.

The public API is the names in `__all__`, importable from here (`from specsim import
load_model`); docs/api.md shows them in a notebook-style example. They are loaded lazily (on
first use), so `import specsim` and the command line start fast.

One subpackage per layer of the architecture (docs/architecture.md), lowest first:

- `specs`: what the user describes, read from sourced YAML (GPUs, models, drafters, engines,
  workloads);
- `forward`: one forward pass, T(n), and the memory it needs;
- `speculation`: draft-and-verify rounds, speedup(N, B) and the recommended setting;
- `serving`: capacity plans over batch, TP and GPUs under a workload;
- `measurement`: profiling, measured tables, engine counters and calibration;
- `present`: result rows, rendering and figures; `cli`: the `specsim` command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it (the one place it is written).
_EXPORTS: dict[str, str] = {
    # Loaders: a built-in slug or a YAML path -> a validated, sourced record.
    "load_hardware": "specsim.specs.hardware",
    "load_model": "specsim.specs.models",
    "load_drafter": "specsim.specs.drafters",
    "load_engine": "specsim.specs.engines",
    "load_workload": "specsim.specs.workloads",
    "load_scenario": "specsim.serving.scenarios",
    "load_setup": "specsim.speculation.setup",
    # Records.
    "Hardware": "specsim.specs.hardware",
    "Model": "specsim.specs.models",
    "Drafter": "specsim.specs.drafters",
    "Engine": "specsim.specs.engines",
    "Workload": "specsim.specs.workloads",
    "Precision": "specsim.specs.dtypes",
    "Setup": "specsim.speculation.speedup",
    "AcceptanceProfile": "specsim.specs.acceptance",
    "Tree": "specsim.speculation.trees",
    "SpeedupTable": "specsim.speculation.speedup",
    "Recommendation": "specsim.speculation.speedup",
    "MemoryPlan": "specsim.forward.memory",
    "Plan": "specsim.serving.plan",
    # One forward pass.
    "forward_time_s": "specsim.forward.cost",
    "decode_time_s": "specsim.forward.cost",
    "knee_tokens": "specsim.forward.cost",
    "pass_cost": "specsim.forward.cost",
    # Memory.
    "DEFAULT_MEMORY_FRACTION": "specsim.specs.defaults",
    "serving_memory": "specsim.forward.memory",
    "memory_plan": "specsim.forward.memory",
    # Acceptance and trees.
    "tau_chain": "specsim.specs.acceptance",
    "tau_constant": "specsim.specs.acceptance",
    "speedup_constant_cost": "specsim.specs.acceptance",
    "conditional_acceptance": "specsim.specs.acceptance",
    "marginal_acceptance": "specsim.specs.acceptance",
    "constant_profile": "specsim.specs.acceptance",
    "chain": "specsim.speculation.trees",
    "best_first_tree": "specsim.speculation.trees",
    # Speedup, recommendation, engine commands, capacity plan.
    "speedup_table": "specsim.speculation.speedup",
    "speedup_sweep": "specsim.speculation.speedup",
    "recommend": "specsim.speculation.recommend",
    "engine_commands": "specsim.speculation.recommend",
    "compare_structures": "specsim.speculation.round_structures",
    "StructureOptions": "specsim.speculation.round_structures",
    "make_plan": "specsim.serving.plan",
}

__all__ = [  # the names of _EXPORTS, and the version
    "__version__", "load_hardware", "load_model", "load_drafter", "load_engine", "load_workload",
    "load_scenario", "load_setup", "Hardware", "Model", "Drafter", "Engine", "Workload",
    "Precision", "Setup", "AcceptanceProfile", "Tree", "SpeedupTable", "Recommendation",
    "MemoryPlan", "Plan", "forward_time_s", "decode_time_s", "knee_tokens", "pass_cost",
    "DEFAULT_MEMORY_FRACTION", "serving_memory", "memory_plan", "tau_chain", "tau_constant",
    "speedup_constant_cost", "conditional_acceptance", "marginal_acceptance", "constant_profile",
    "chain", "best_first_tree", "speedup_table", "speedup_sweep", "recommend", "engine_commands",
    "compare_structures", "StructureOptions", "make_plan",
]

if TYPE_CHECKING:  # what type checkers and editors see; at run time `__getattr__` loads them
    from specsim.forward.cost import decode_time_s, forward_time_s, knee_tokens, pass_cost
    from specsim.forward.memory import MemoryPlan, memory_plan, serving_memory
    from specsim.serving.plan import Plan, make_plan
    from specsim.serving.scenarios import load_scenario
    from specsim.specs.acceptance import (
        AcceptanceProfile,
        conditional_acceptance,
        constant_profile,
        marginal_acceptance,
        speedup_constant_cost,
        tau_chain,
        tau_constant,
    )
    from specsim.specs.defaults import DEFAULT_MEMORY_FRACTION
    from specsim.specs.drafters import Drafter, load_drafter
    from specsim.specs.dtypes import Precision
    from specsim.specs.engines import Engine, load_engine
    from specsim.specs.hardware import Hardware, load_hardware
    from specsim.specs.models import Model, load_model
    from specsim.specs.workloads import Workload, load_workload
    from specsim.speculation.recommend import engine_commands, recommend
    from specsim.speculation.round_structures import StructureOptions, compare_structures
    from specsim.speculation.setup import load_setup
    from specsim.speculation.speedup import (
        Recommendation,
        Setup,
        SpeedupTable,
        speedup_sweep,
        speedup_table,
    )
    from specsim.speculation.trees import Tree, best_first_tree, chain


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562), then keep it here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'specsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

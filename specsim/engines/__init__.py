"""Serving engines' command lines: one adapter module per engine, chosen by slug here.

`adapter("vllm")` / `adapters()` give the registered `EngineAdapter`s (base.py holds the
interface and the registry); each engine module registers its one adapter when imported. The
engines' timing terms live in `specsim.specs.engines`; the idealized roofline engine and
Hugging Face eager decoding have no speculative command line, so no adapter.
"""

# The order of registration is the order engines are printed: vLLM, SGLang, TensorRT-LLM.
from specsim.engines import vllm

# isort: split
from specsim.engines import sglang

# isort: split
from specsim.engines import trtllm

# isort: split
from specsim.engines.base import (
    BatchRange,
    EngineAdapter,
    EngineCommand,
    adapter,
    adapters,
    batch_ranges,
    block_only,
    check_engine_runs,
    check_engine_serves,
    precision_cautions,
    register,
    render_command,
    runs_chains,
    target_id,
    tree_engines,
    unregister,
)

__all__ = ["BatchRange", "EngineAdapter", "EngineCommand", "adapter", "adapters",
           "batch_ranges", "block_only", "check_engine_runs", "check_engine_serves",
           "precision_cautions", "register",
           "render_command", "runs_chains", "sglang", "target_id", "tree_engines", "trtllm",
           "unregister", "vllm"]

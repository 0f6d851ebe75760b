"""The defaults every command and library entry point shares: one GPU, target, drafter, context.

Kept free of imports so that the command line can read them without loading numpy.
"""

from __future__ import annotations

DEFAULT_HARDWARE = "h100-sxm"
DEFAULT_MODEL = "qwen3-8b"  # the default drafter's target: one default setup
DEFAULT_DRAFTER = "dflash-qwen3-8b"
# Cached tokens per request when neither the caller nor a workload says (speedup, recommend).
DEFAULT_CONTEXT_TOKENS = 2048.0
# Share of HBM the engine may take: vLLM's default `gpu_memory_utilization` (the one place this
# number is written; `specsim.forward.memory.DEFAULT_MEMORY_FRACTION` is this constant).
DEFAULT_MEMORY_FRACTION = 0.9
# Serving engine whose host terms a round pays: "roofline" is the idealized GPU, no engine.
DEFAULT_ENGINE = "sglang"

# Limits on what a command may be asked for: far above any real serving setup, far below what
# exhausts memory or time. Each is stated in the error that enforces it.
MAX_LIST_VALUES = 65_536  # values in one list or range option (--tokens, --batch, ...)
MAX_TOKENS_PER_PASS = 1_048_576  # --tokens: tokens scored in one forward pass
MAX_BATCH = 4_096  # --batch, --requests: concurrent requests
MAX_TREE_NODES = 4_096  # --nodes, --max-nodes: drafted nodes per request
MAX_CONTEXT_TOKENS = 10_000_000  # --context and a workload's context: cached tokens per request
MAX_TP = 64  # --tp: GPUs per replica
MAX_TOKENS_PER_S = 1e12  # --target-throughput: output tokens/s a whole service delivers
MAX_TOKENS_PER_S_PER_USER = 1e6  # --min-tokens-per-s-per-user: the per-user speed floor
MAX_DRAFT_COST = 100.0  # --draft-cost: a drafter pass costing 100 target steps never pays off

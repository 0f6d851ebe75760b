"""The defaults every command and library entry point shares: one GPU, target, drafter, context.

Kept free of imports so that the command line can read them without loading numpy.
"""

from __future__ import annotations

DEFAULT_HARDWARE = "h100-sxm"
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_DRAFTER = "dflash-qwen3-8b"
# Cached tokens per request when neither the caller nor a workload says (speedup, recommend).
DEFAULT_CONTEXT_TOKENS = 2048.0
# Serving engine whose host terms a round pays: "roofline" is the idealized GPU, no engine.
DEFAULT_ENGINE = "roofline"

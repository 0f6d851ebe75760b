"""specsim: predict the speed of speculative decoding of LLMs before renting a GPU.

The library is organised one concept per module (import what you need; nothing heavy is
imported here, so the command line starts fast):

- specs: `hardware` (GPU profiles), `models` (targets), `drafters`, `workloads`, `loading`;
- time and memory: `passes`, `work`, `roofline` (T(n)), `gemm_model`, `memory`, `params`;
- speculation: `acceptance`, `verification`, `trees`, `simulate`, `draft_cost`, `speedup`,
  `recommend`, `vllm_metrics`;
- measurement: `profiling`, `profile_data`, `measurements`, `vidur`, `calibrate`.
"""

__version__ = "0.1.0"

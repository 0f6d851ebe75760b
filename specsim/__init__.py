"""specsim: predict the speed of speculative decoding of LLMs before renting a GPU.

One subpackage per layer of the architecture (nothing heavy is imported here, so the command
line starts fast):

- `specs`: what the user describes, read from sourced YAML (GPUs, models, drafters, workloads);
- `forward`: one forward pass, T(n), and the memory it needs;
- `speculation`: draft-and-verify rounds, speedup(N, B) and the recommended setting;
- `measurement`: profiling, measured tables, engine counters and calibration;
- `present`: result rows, rendering and figures; `cli`: the `specsim` command.
"""

__version__ = "0.1.0"

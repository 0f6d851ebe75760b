"""The specs: GPUs, target models, drafters, workloads and dtypes, read from sourced YAML."""

"""Measured data: the profiling harness, profile CSVs, Vidur tables, engine counters,
calibration."""

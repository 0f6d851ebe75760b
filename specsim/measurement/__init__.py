"""Measured data: profiling harness, profile CSVs, Vidur tables, engine counters, calibration."""

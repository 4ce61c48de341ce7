"""Measurement, separate from kernels: timing, the observers of a cell's steps, telemetry, provenance
and the row they make."""

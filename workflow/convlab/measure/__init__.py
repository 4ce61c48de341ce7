"""Measurement, separate from kernels: problem data, timing, verification, metrics, provenance."""

"""Timing modes on the cpu backend: mode graph (n back-to-back runs timed together, divided)
measures and records itself, and the default mode's rows are as before."""

import time
from dataclasses import replace

import numpy as np
from cpu_helpers import SabotagedBackend, cell_for

from convlab.backends.base import Backend, PreparedKernel
from convlab.backends.cpu import CpuBackend
from convlab.measure.timing import GRAPH_MS
from convlab.run.runner import run_cell

RUN_MS = 0.2


def in_mode(cell, mode: str):
    return replace(cell, timing={**cell.timing, "mode": mode})


def fixed_time(honest, problem, buffers):
    """The kernel's correct output, written in a fixed RUN_MS: a time the test knows."""
    honest.run()
    answer = buffers.output.copy()

    def run():
        started = time.perf_counter()
        np.copyto(buffers.output, answer)
        while time.perf_counter() - started < RUN_MS / 1e3:
            pass

    return PreparedKernel(run, honest.info)


def test_graph_mode_gives_the_time_per_run_and_records_it(image_path):
    row = run_cell(in_mode(cell_for("direct"), "graph"), image_path, backend=SabotagedBackend(fixed_time))
    assert row["status"] == "ok", row["reason"]
    assert row["timing_mode"] == row["timing_applied"] == "graph" and row["timing_fallback"] is None
    # about GRAPH_MS of runs per sample, each sample reported per run
    assert row["graph_launches"] >= 3 and row["graph_launches"] * RUN_MS >= 0.5 * GRAPH_MS
    assert RUN_MS <= row["kernel_ms_min"] <= row["kernel_ms"] < 5 * RUN_MS
    assert row["reps"] >= 3 and row["max_rel_err"] < 1e-5


def test_graph_mode_runs_the_real_twin_and_verifies_it(image_path):
    row = run_cell(in_mode(cell_for("direct", stride=2, filter_kind="laplacian"), "graph"), image_path)
    assert row["status"] == "ok", row["reason"]
    assert row["timing_applied"] == "graph" and row["graph_launches"] >= 1 and row["kernel_ms"] > 0


def test_a_backend_without_graphs_times_per_launch_and_says_so(image_path):
    class NoGraphs(CpuBackend):
        capture_graph = Backend.capture_graph

    row = run_cell(in_mode(cell_for("direct"), "graph"), image_path, backend=NoGraphs())
    assert row["status"] == "ok" and row["kernel_ms"] > 0
    assert row["timing_mode"] == "graph" and row["timing_applied"] == "warm" and row["graph_launches"] is None
    assert row["timing_fallback"] == "graph capture refused, timed per launch: no graph timing on the cpu backend"


def test_the_default_mode_never_captures_and_its_row_is_as_before(image_path):
    class Uncapturable(CpuBackend):
        def capture_graph(self, run, launches):
            raise AssertionError("only timing mode graph captures")

    cell = cell_for("direct")
    assert cell.timing["mode"] == "warm"  # the schema's default, unchanged
    row = run_cell(cell, image_path, backend=Uncapturable())
    assert row["status"] == "ok"
    assert row["timing_mode"] == row["timing_applied"] == "warm"
    assert row["graph_launches"] is None and row["timing_fallback"] is None and row["smem_limit_bytes"] is None

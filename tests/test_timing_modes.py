"""Timing modes on the cpu backend: mode graph (n back-to-back runs timed together, divided)
measures and records itself, and the default mode's rows are as before."""

import time
from dataclasses import replace

import numpy as np
import pytest
from cpu_helpers import SabotagedBackend, cell_for

from convlab.backends.base import Backend, PreparedKernel
from convlab.backends.cpu import CpuBackend
from convlab.measure.timing import GRAPH_MS, STAGES_IN_RUN_MS
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


def spin(ms: float) -> None:
    started = time.perf_counter()
    while time.perf_counter() - started < ms / 1e3:
        pass


class StagedBackend(SabotagedBackend):
    """The direct kernel's output, written by the first of two stages of a fixed time each; counts
    the runs it timed with a clock read between their stages."""

    def __init__(self, first_ms: float, second_ms: float) -> None:
        def prepare(honest, problem, buffers):
            honest.run()
            answer = buffers.output.copy()

            def first():
                np.copyto(buffers.output, answer)
                spin(first_ms)

            def second():
                spin(second_ms)

            def run():
                first()
                second()

            return PreparedKernel(run, honest.info, stages=[("first", first), ("second", second)])

        super().__init__(prepare)
        self.staged_runs = 0

    def time_stages(self, stages, n, cold):
        self.staged_runs += n if len(stages) > 1 else 0  # the cpu's time_batch is a run of one stage
        return super().time_stages(stages, n, cold)


@pytest.mark.parametrize("first_ms, second_ms, in_run", [(0.7, 1.4, True), (0.05, 0.1, False)])
def test_each_stage_has_its_time_from_the_runs_own_repeats_or_alone(image_path, first_ms, second_ms, in_run):
    """A run of STAGES_IN_RUN_MS or more: its timed repeats read the clock between its stages, and
    give the stages' times. A shorter one's stages are timed alone after it. The row has them both ways."""
    backend = StagedBackend(first_ms, second_ms)
    row = run_cell(cell_for("direct"), image_path, backend=backend)
    assert row["status"] == "ok", row["reason"]
    assert ((first_ms + second_ms) >= STAGES_IN_RUN_MS) is in_run
    stages = dict(part.split("=") for part in row["stage_ms"].split(";"))
    assert list(stages) == ["first", "second"]
    for name, ms in (("first", first_ms), ("second", second_ms)):
        assert ms <= float(stages[name]) < ms + 5.0, (name, stages)
    assert row["kernel_ms"] >= first_ms + second_ms
    # in the run, every timed repeat was a staged one (and the first warm-up run, itself a repeat
    # where the run is slow for its budget); alone, the first warm-up run only
    if in_run:
        assert row["reps"] <= backend.staged_runs <= row["reps"] + 1
    else:
        assert backend.staged_runs == 1

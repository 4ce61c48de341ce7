"""The launches a profiler reads a grid's hardware counters from: each cell placed, set up and
launched once untimed (compiles, plans and lazy loading stay out of the profile), then launched once
more between the profiler's start and stop, in the NVTX range that names it (convlab.measure.counters). Run inside
Nsight Compute by the `counters` step, never in a cell's own measurement: the profiler replays
each kernel many times, and no timed launch may include that."""

from __future__ import annotations

from pathlib import Path

from convlab.backends.base import Backend
from convlab.plan import problemcache
from convlab.plan.cell import Cell
from convlab.run.steps import launch, load_inputs, place, set_up
from convlab.status import CellFailure

# Cells of one problem come together in the plan: keep a few problems' operands, as a worker does.
PROBLEMS_KEPT = 4


def replay_cells(plan: list[tuple[Cell, str | Path | None]], backend: Backend) -> dict[int, str]:
    """Each planned cell's profiled launch; the reason for each cell (by its index) that has none."""
    problemcache.PROBLEMS.capacity = PROBLEMS_KEPT
    reasons = {}
    for index, (cell, image) in enumerate(plan):
        try:
            inputs = load_inputs(cell, image)
            placed = place(backend, inputs, backend.layout_for(inputs.spec))
            prepared = set_up(backend, inputs, placed)
            launch(backend, prepared)
            with backend.profiled(index):
                launch(backend, prepared)
        except CellFailure as failure:
            reasons[index] = f"its replay failed: {failure.status}: {' '.join(failure.reason.split())[:300]}"
    return reasons

"""The launches a profiler reads a grid's hardware counters from: each cell placed, set up and
launched once untimed (compiles, plans and lazy loading stay out of the profile), then launched once
more between the profiler's start and stop, in the NVTX range that names it (convlab.measure.counters). Run inside
Nsight Compute by the `counters` step, never in a cell's own measurement: the profiler replays
each kernel many times, and no timed launch may include that."""

from __future__ import annotations

from pathlib import Path

from convlab.backends.base import Backend
from convlab.plan.cell import Cell
from convlab.run.steps import launch, load_inputs, place, set_up
from convlab.status import CellFailure


def replay_cells(plan: list[tuple[Cell, str | Path | None]], backend: Backend) -> dict[int, str]:
    """Each planned cell's profiled launch; the reason for each cell (by its index) that has none.

    Nothing is kept from one cell to the next, and the memory pool is emptied after each cell: the
    profiler saves and restores the device memory a kernel could reach around each of its passes,
    and every byte left allocated is in that."""
    reasons = {}
    for index, (cell, image) in enumerate(plan):
        reason = replay_cell(index, cell, image, backend)
        if reason:
            reasons[index] = reason
        backend.release_memory()  # the cell's buffers went with replay_cell's frame
    return reasons


def replay_cell(index: int, cell: Cell, image: str | Path | None, backend: Backend) -> str:
    """One cell set up, launched untimed, then launched in its profiled range; or why it could not."""
    try:
        inputs = load_inputs(cell, image)
        placed = place(backend, inputs, backend.layout_for(inputs.spec))
        prepared = set_up(backend, inputs, placed)
        launch(backend, prepared)
        with backend.profiled(index):
            launch(backend, prepared)
    except CellFailure as failure:
        return f"its replay failed: {failure.status}: {' '.join(failure.reason.split())[:300]}"
    return ""

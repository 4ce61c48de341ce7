"""The launches a profiler reads a grid's hardware counters from: each cell placed, set up and
launched once untimed (compiles, plans and lazy loading stay out of the profile), then launched once
more between the profiler's start and stop, in the NVTX range that names it (convlab.measure.ncureport). Run inside
Nsight Compute by the `counters` step, never in a cell's own measurement: the profiler replays
each kernel many times, and no timed launch may include that.

Nsight Compute runs this process once per pass its metrics need (application replay), and matches
each pass's kernels with the first's: every pass must launch the same kernels in the same order,
which a replay of the same plan in the same process does."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from convlab.backends.base import ENGINE_SETTING, Backend
from convlab.plan.cell import Cell
from convlab.plan.problemcache import PROBLEMS, problem_key
from convlab.run.steps import launch, load_inputs, place, set_up
from convlab.status import CellFailure

Plan = list[tuple[Cell, str | Path | None]]


def as_timed(cell: Cell, engine: str) -> Cell:
    """The cell as its replay runs it: with the engine its timed run chose (its row's), for a
    library that would otherwise search for one again (convlab.backends.base.ENGINE_SETTING)."""
    return replace(cell, settings={**cell.settings, ENGINE_SETTING: engine}) if engine else cell


def replay_order(plan: Plan) -> list[int]:
    """The plan's indices in the order they are replayed: by problem, so that each is made once."""
    return sorted(range(len(plan)), key=lambda index: repr(problem_key(*plan[index])))


def replay_cells(plan: Plan, backend: Backend, problems_kept: int) -> dict[int, str]:
    """Each planned cell's profiled launch; the reason for each cell (by its index) that has none.

    The cells of one problem share its operands and device inputs, as in a service worker
    (convlab.plan.problemcache, at most ``problems_kept`` problems at a time): nothing is saved or
    restored around a kernel in application replay, so what the process holds costs the profile
    nothing."""
    reasons = {}
    PROBLEMS.capacity = problems_kept
    try:
        for index in replay_order(plan):
            cell, image = plan[index]
            reason = replay_cell(index, cell, image, backend)
            if reason:
                reasons[index] = reason
    finally:
        PROBLEMS.clear()
        PROBLEMS.capacity = 0
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

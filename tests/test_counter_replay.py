"""The counters step's replay (convlab.run.counterreplay) without a GPU: every planned cell gets its
profiled launch under its own index, the cells of one problem run together and share its operands,
and nothing stays kept after the replay, even one that fails."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from gpu_helpers import write_image

from convlab.backends import get_backend
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.plan.problemcache import PROBLEMS, problem_key
from convlab.run import counterreplay, steps


@pytest.fixture
def plan(tmp_path, monkeypatch):
    """Cells of four problems (two sizes, two strides) with two kernels each, interleaved so that no
    two cells of one problem are next to each other, with their pictures."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    for size in (32, 48):
        write_image(tmp_path / "data" / f"input_{size}.png", size, size)
    config = validate_config({
        "backend": "cpu", "source_size": 64,
        "conv2d": {"sizes": [32, 48], "strides": [1, 2], "kernels": ["direct", "cudnn"]},
        "cpu": {"sizes": [32, 48]},
        "timing": {"min_reps": 3, "budget_s": 0.05, "e2e_reps": 1}})
    cells = [cell for cell in build_cells(config, "cpu", "cpu") if cell.experiment == "conv2d"]
    by_problem: dict = {}
    for cell in cells:
        by_problem.setdefault(problem_key(cell, cell.image), []).append(cell)
    assert len(by_problem) == 4 and all(len(group) >= 2 for group in by_problem.values())
    interleaved = [group[i] for i in range(max(map(len, by_problem.values())))
                   for group in by_problem.values() if i < len(group)]
    return [(cell, cell.image) for cell in interleaved]


@pytest.fixture
def traced(monkeypatch):
    """The cpu backend with a stand-in for the profiler: the indices it was started for, and each
    load of a problem's operands."""
    backend = get_backend("cpu")
    seen = {"profiled": [], "loaded": 0}

    @contextmanager
    def profiled(index):
        seen["profiled"].append(index)
        yield

    real_load = steps.load_operands

    def counting_load(cell, image):
        seen["loaded"] += 1
        return real_load(cell, image)

    monkeypatch.setattr(backend, "profiled", profiled, raising=False)
    monkeypatch.setattr(steps, "load_operands", counting_load)
    yield backend, seen
    monkeypatch.undo()


def problem_runs(plan, indices):
    """How many runs of consecutive cells of one problem the order makes."""
    keys = [repr(problem_key(*plan[index])) for index in indices]
    return 1 + sum(a != b for a, b in zip(keys, keys[1:]))


def test_a_replay_runs_each_problems_cells_together_and_makes_its_operands_once(plan, traced):
    backend, seen = traced
    assert counterreplay.replay_cells(plan, backend, problems_kept=4) == {}
    assert sorted(seen["profiled"]) == list(range(len(plan)))  # each cell under its own index
    assert problem_runs(plan, seen["profiled"]) == 4
    assert seen["loaded"] == 4
    assert PROBLEMS.capacity == 0 and len(PROBLEMS) == 0  # nothing stays kept after the replay


def test_a_replay_that_fails_leaves_nothing_kept(plan, traced, monkeypatch):
    backend, seen = traced
    launches = []

    def failing_launch(backend, prepared):
        launches.append(prepared)
        if len(launches) == 5:  # the third cell's, the first of the second problem
            raise RuntimeError("a pipeline bug")

    monkeypatch.setattr(counterreplay, "launch", failing_launch)
    with pytest.raises(RuntimeError, match="a pipeline bug"):
        counterreplay.replay_cells(plan, backend, problems_kept=4)
    assert seen["loaded"] == 2
    assert PROBLEMS.capacity == 0 and len(PROBLEMS) == 0


def test_a_replayed_cell_names_the_engine_its_timed_run_chose_and_only_then(plan):
    from convlab.backends.base import ENGINE_SETTING

    cell, _ = plan[0]
    pinned = counterreplay.as_timed(cell, "eng28_k2=4_k3=0")
    assert pinned.settings == {**cell.settings, ENGINE_SETTING: "eng28_k2=4_k3=0"}
    assert pinned.path == cell.path and cell.settings.get(ENGINE_SETTING) is None  # the cell itself unchanged
    assert counterreplay.as_timed(cell, "") is cell

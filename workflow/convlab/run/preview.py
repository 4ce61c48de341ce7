"""A kernel version checked on one cell before a preview pairs it (convlab watch): placed, set up,
launched once and compared with the float64 reference, as the cell's own steps do, without timing
it or writing a row.

A version being edited may fail in any way, a cpu twin with any Python exception: each is the
check's outcome to show, with where in the version's own files it was raised, never a traceback.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from convlab.backends.base import Backend
from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec
from convlab.run.runner import refusal
from convlab.run.steps import launch, load_inputs, place, set_up, verify
from convlab.status import ERROR, CellFailure


@dataclass(frozen=True)
class Check:
    """A version's outcome on one cell: its status (``ok``, ``wrong``, ``error``, ...), why, the
    step it failed in, and the place in the version's files it was raised at (None: not in them)."""

    status: str
    reason: str = ""
    stage: str = ""
    where: tuple[Path, int] | None = None


def raised_in(error: BaseException, folder: Path) -> tuple[Path, int] | None:
    """The innermost frame of ``error``'s traceback in a file under ``folder``."""
    found = None
    for frame in traceback.extract_tb(error.__traceback__):
        path = Path(frame.filename)
        if path.is_relative_to(folder) and frame.lineno is not None:
            found = (path, frame.lineno)
    return found


def check_version(cell: Cell, image_path: str | Path | None, spec: KernelSpec, backend: Backend) -> Check | None:
    """``spec`` (a version of the cell's kernel) run once on the cell's problem and verified; None
    where the cell is refused before it runs (a problem the kernel has no code for, an unmet
    ``requires``), as its row would say without measuring."""
    inputs = replace(load_inputs(cell, image_path), spec=spec)
    if refusal(inputs, backend.device_info()["device"], None):
        return None
    stage = "place"
    try:
        placed = place(backend, inputs, backend.layout_for(spec))
        stage = "setup"
        prepared = set_up(backend, inputs, placed)
        stage = "launch"
        launch(backend, prepared)
        stage = "verify"
        verified = verify(backend, inputs, placed, prepared)
    except CellFailure as failure:
        return Check(failure.status, failure.reason, failure.stage or stage)
    except Exception as error:  # the edited code's own exception: this check's outcome
        return Check(ERROR, f"{type(error).__name__}: {error}", stage, raised_in(error, spec.description_path.parent))
    return Check(verified.status, verified.verdict.reason, "verify")

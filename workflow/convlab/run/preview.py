"""A kernel's saved version compiled and checked on its cells before a preview pairs it (convlab
watch): placed, set up, launched once and compared with the float64 reference, as the cell's own
steps do, without timing it or writing a row.

A version being edited may fail in any way, a cpu twin with any Python exception: each is the
check's outcome to show, with where in the version's own files it was raised, never a traceback.
A version that does not compile is one block with its file and line (convlab.backends.compileblock).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from convlab.backends.base import Backend
from convlab.backends.compileblock import nvrtc_block, python_block
from convlab.backends.sourcemodule import SourceModule, grid_modules
from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec
from convlab.run.runner import refusal
from convlab.run.steps import launch, load_inputs, place, set_up, verify
from convlab.status import ERROR, OK, CellFailure

MAX_FAILURE_LINES = 6  # a preview names this many failed cells, then counts the rest


@dataclass(frozen=True)
class Saved:
    """A kernel's files as the preview read them: their hash, paths and bytes, and that version
    as a kernel of its own (None where its files do not make one)."""

    kernel: str
    kernel_hash: str
    contents: list[tuple[str, bytes | None]]
    spec: KernelSpec | None
    why_not: str = ""


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


def cell_name(cell: Cell) -> str:
    """The cell as a line names it: kernel, experiment, problem, variant."""
    return f"{cell.kernel} {cell.experiment} {cell.problem}/{cell.variant}"


def twin_syntax_errors(saved: Iterable[Saved]) -> dict[str, list[str]]:
    """Each saved cpu twin whose Python does not compile: its kernel, with the block that shows
    where (a kernel without a twin's file is left to its check)."""
    blocks: dict[str, list[str]] = {}
    for version in saved:
        twin = next(((path, data) for path, data in version.contents if path.endswith(".py")), None)
        if twin is None or twin[1] is None:
            continue
        block = python_block(twin[1], twin[0])
        if block:
            blocks[version.kernel] = block
    return blocks


def compile_saved(backend: Backend, cells: list[Cell], saved: dict[str, Saved],
                  previous: dict[SourceModule, list[str]]) -> None:
    """The saved versions' modules for ``cells`` and the previous versions' (``previous``), in one
    compiler process; a module that does not compile is its first cell's check's to show."""
    modules = grid_modules(cells, lambda kernel: saved[kernel].spec)
    for module, kernels in previous.items():
        modules.setdefault(module, []).extend(kernels)
    backend.compile_ahead(modules)


def compile_block(saved: Saved, check: Check) -> list[str]:
    """A saved .cu version's compile error as one block, in the lines of its own file."""
    source = next(((path, data) for path, data in saved.contents if path.endswith(".cu")), None)
    if source is None or source[1] is None:
        return [f"compile error: {saved.kernel}: {check.reason}"]
    return nvrtc_block(check.reason, source[0], source[1].decode(errors="replace"))


def failure_line(cell: Cell, saved: Saved, check: Check) -> str:
    """A cell whose saved version failed: the cell, its status and why (and where in its files)."""
    where = ""
    if check.where is not None:
        copied, line = check.where
        real = next((path for path, _ in saved.contents if Path(path).suffix == copied.suffix), copied.name)
        where = f" ({real}:{line})"
    stage = f" in {check.stage}" if check.status != "wrong" and check.stage else ""
    return f"{check.status}{stage}: {cell_name(cell)}: {' '.join(check.reason.split())}{where}"


def checked_cells(backend: Backend, cells: list[Cell], saved: dict[str, Saved], say: Callable[[str], None],
                  before_each: Callable[[], None]) -> tuple[list[Cell], bool]:
    """The cells whose saved version runs and verifies on their problem, and whether any did not.
    Each that does not is said with its status (a compile error: its kernel's block, once, at
    once; the others after the last cell, the first MAX_FAILURE_LINES of them), and has no
    verdict. ``before_each`` is called before each cell's check: a preview stops there for newer
    files."""
    passed: list[Cell] = []
    broken: set[str] = set()
    shown: set[tuple[str, ...]] = set()
    failures: list[str] = []
    failed = False
    for cell in cells:
        if cell.kernel in broken:
            continue
        before_each()
        version = saved[cell.kernel]
        check = check_version(cell, cell.image or None, version.spec, backend)
        if check is None:
            continue
        if check.status == OK:
            passed.append(cell)
            continue
        failed = True
        if check.stage == "compile":
            broken.add(cell.kernel)
            block = tuple(compile_block(version, check))
            if block not in shown:  # kernels that share a file (a cpu twin) share its error
                shown.add(block)
                for line in block:
                    say(line)
            continue
        failures.append(failure_line(cell, version, check))
    for line in failures[:MAX_FAILURE_LINES]:
        say(line)
    if len(failures) > MAX_FAILURE_LINES:
        say(f"  ... and {len(failures) - MAX_FAILURE_LINES} more cells that failed")
    return passed, failed

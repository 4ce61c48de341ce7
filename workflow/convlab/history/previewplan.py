"""What a preview (convlab.app.handlers.preview) measures: the grid's cells it is asked for, each
kernel's files as saved (a version of their own, named by their hash), and the versions the results
database recorded last for each cell."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from convlab.codeversion import file_contents, fingerprint_contents
from convlab.history import store
from convlab.history.kernelversions import VersionUnavailable, copy_kernel_version
from convlab.history.pairing import Candidate, recorded_module
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec, RegistryError, read_kernel_folder
from convlab.status import OK, UserError


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
class Recorded:
    """A cell's measurements the database keeps: the latest (any status), the latest ok one."""

    latest: store.Measurement | None
    latest_ok: store.Measurement | None


def narrowed(cells: list[Cell], kernels: list[str] | None, sizes: list[int] | None,
             strides: list[int] | None) -> list[Cell]:
    """The cells of the given kernels, sizes and strides (each a subset of the grid's; none: all).
    UserError naming the grid's values for one that is not in it."""
    for option, wanted, values in (("--kernels", kernels, {c.kernel for c in cells}),
                                   ("--sizes", sizes, {c.size for c in cells}),
                                   ("--strides", strides, {c.stride for c in cells})):
        missing = sorted(set(wanted or ()) - values)
        if missing:
            raise UserError(f"{option} {' '.join(map(str, missing))}: not in the configured grid (it has "
                            f"{', '.join(map(str, sorted(values)))})")
    return [c for c in cells if (not kernels or c.kernel in kernels) and (not sizes or c.size in sizes)
            and (not strides or c.stride in strides)]


def read_saved(spec: KernelSpec, backend: str, into: Path) -> Saved:
    """The kernel's files now, and that version made a kernel of its own under ``into``."""
    contents = file_contents(spec.files(backend), root=REPO_ROOT)
    kernel_hash = fingerprint_contents(contents)
    folder = into / "saved" / f"{spec.name}@{kernel_hash}"
    try:
        name = copy_kernel_version(spec.name, kernel_hash, contents, folder, twins=True)
        return Saved(spec.name, kernel_hash, contents, read_kernel_folder(folder)[name])
    except (VersionUnavailable, RegistryError) as error:
        return Saved(spec.name, kernel_hash, contents, None, str(error))


def recorded_versions(connection, cells: list[Cell]) -> dict[str, Recorded]:
    """Each cell's latest measurement and latest ok one (none without a database)."""
    found: dict[str, Recorded] = {}
    if connection is None:
        return found
    for kernel in sorted({c.kernel for c in cells}):
        for measurement in store.measurements(connection, kernel=kernel):  # oldest first
            before = found.get(measurement.cell, Recorded(None, None))
            ok = measurement.status == OK and (measurement.kernel_ms or 0) > 0
            found[measurement.cell] = Recorded(measurement, measurement if ok else before.latest_ok)
    return found


def cell_name(cell: Cell) -> str:
    """The cell as a line names it: kernel, experiment, problem, variant."""
    return f"{cell.kernel} {cell.experiment} {cell.problem}/{cell.variant}"


def candidate_of(cell: Cell, saved: Saved, previous: store.Measurement) -> Candidate:
    """The cell as the pair step takes it: its saved version against the recorded one, whose row
    names its machine code and time (the saved version has no row)."""
    return Candidate(cell, saved.kernel_hash, previous.kernel_hash, previous.kernel_ms, None,
                     recorded_module(previous.row_json))


def edited(cells: list[Cell], saved: dict[str, Saved], recorded: dict[str, Recorded]) -> list[Cell]:
    """The cells whose kernel's files differ from those of their latest measurement, or that have none."""
    return [cell for cell in cells
            if recorded.get(cell.path, Recorded(None, None)).latest is None
            or recorded[cell.path].latest.kernel_hash != saved[cell.kernel].kernel_hash]


def differing(cells: list[Cell], saved: dict[str, Saved], recorded: dict[str, Recorded]) -> set[str]:
    """The kernels of which a recorded cell ran other files than the saved ones."""
    return {cell.kernel for cell in cells if recorded.get(cell.path, Recorded(None, None)).latest is not None
            and recorded[cell.path].latest.kernel_hash != saved[cell.kernel].kernel_hash}

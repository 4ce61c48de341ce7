"""What a watch watches and a preview (convlab.pairs.previewverdicts) measures: the configured
grid's cells of this machine's one device, the kernels whose files a preview can run again, each
kernel's files as saved (a version of their own, named by their hash), and the versions the
results database recorded last for each cell."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from convlab.backends.choice import choose_backend
from convlab.codeversion import file_contents, fingerprint_contents
from convlab.history import store
from convlab.history.kernelversions import VersionUnavailable, copy_kernel_version
from convlab.history.pairing import Candidate, recorded_row
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.devicelabel import choose_devices
from convlab.plan.grid import build_cells
from convlab.plan.registry import KernelSpec, RegistryError, load_registry, read_kernel_folder
from convlab.plan.runconfig import run_config
from convlab.run.preview import Saved
from convlab.status import OK, UserError


@dataclass(frozen=True)
class Watched:
    """What a watch previews: the config (and where it came from), its backend, this machine's
    device label, the grid's cells it asks for, the kernels whose files a preview can run again,
    and the grid's other kernels."""

    config: dict[str, Any]
    source: str
    backend: str
    device: str
    cells: list[Cell]
    specs: dict[str, KernelSpec]
    unwatched: list[str]

    def files(self) -> dict[Path, list[str]]:
        """Each watched file, with the kernels it belongs to (a twin may serve several)."""
        owners: dict[Path, list[str]] = {}
        for name, spec in self.specs.items():
            for path in spec.files(self.backend):
                owners.setdefault(path, []).append(name)
        return owners


def watchable(spec: KernelSpec, backend: str) -> bool:
    """Whether a preview can run this kernel's recorded version beside its saved one: a .cu
    kernel's on a GPU, a cpu twin's on the cpu (a library's wrapper is the package's, loaded once)."""
    if backend == "cpu":
        return spec.twin_path is not None
    return spec.source is not None and not spec.library


def watched(configfiles: list[str], kernels: list[str] | None, sizes: list[int] | None,
            strides: list[int] | None) -> Watched:
    """The configured grid's cells of this machine's one device, narrowed to ``kernels``,
    ``sizes`` and ``strides``, and which of their kernels a watch can preview. UserError where the
    config names several devices, or no kernel can be previewed."""
    config, source = run_config(configfiles)
    choice = choose_backend(config["backend"])
    backend = choice.backend
    placements, _ = choose_devices(config, backend, list(choice.gpus))
    if len(placements) != 1:
        raise UserError(f"config devices names {len(placements)} device labels; a watch measures this machine's "
                        "one: give a --configfile that sets `device`")
    device = placements[0].label
    cells = narrowed(build_cells(config, backend, device), kernels, sizes, strides)
    registry = load_registry()
    names = sorted({cell.kernel for cell in cells})
    specs = {name: registry[name] for name in names if watchable(registry[name], backend)}
    if not specs:
        raise UserError(f"no kernel of this grid ({', '.join(names)}) has files a preview can run again on the "
                        f"{backend} backend (a .cu on a GPU, a cpu twin on the cpu)")
    return Watched(config, source, backend, device, cells, specs, [name for name in names if name not in specs])


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
        # by the columns; the rows' JSON of the latest ok ones only, which a pair reads
        for measurement in store.measurements(connection, kernel=kernel, with_rows=False):  # oldest first
            before = found.get(measurement.cell, Recorded(None, None))
            ok = measurement.status == OK and (measurement.kernel_ms or 0) > 0
            found[measurement.cell] = Recorded(measurement, measurement if ok else before.latest_ok)
    rows = store.row_jsons(connection, [kept.latest_ok.row_check for kept in found.values() if kept.latest_ok])
    return {cell: kept if kept.latest_ok is None else
            Recorded(kept.latest, replace(kept.latest_ok, row_json=rows.get(kept.latest_ok.row_check)))
            for cell, kept in found.items()}


def candidate_of(cell: Cell, saved: Saved, previous: store.Measurement) -> Candidate:
    """The cell as the pair step takes it: its saved version against the recorded one, whose row
    names its machine code and time (the saved version has no row)."""
    row = recorded_row(previous.row_json)
    return Candidate(cell, saved.kernel_hash, previous.kernel_hash, previous.kernel_ms, None,
                     str(row.get("module_hash") or ""), previous_row=row)


def edited(cells: list[Cell], saved: dict[str, Saved], recorded: dict[str, Recorded]) -> list[Cell]:
    """The cells whose kernel's files differ from those of their latest measurement, or that have none."""
    return [cell for cell in cells
            if recorded.get(cell.path, Recorded(None, None)).latest is None
            or recorded[cell.path].latest.kernel_hash != saved[cell.kernel].kernel_hash]


def differing(cells: list[Cell], saved: dict[str, Saved], recorded: dict[str, Recorded]) -> set[str]:
    """The kernels of which a recorded cell ran other files than the saved ones."""
    return {cell.kernel for cell in cells if recorded.get(cell.path, Recorded(None, None)).latest is not None
            and recorded[cell.path].latest.kernel_hash != saved[cell.kernel].kernel_hash}

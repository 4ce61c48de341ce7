"""Kernel sources the cpu backend does not measure. A cpu cell runs its kernel's cpu twin, so an
edited .cu re-runs no cpu cell (convlab.plan.registry.KernelSpec.files); the run says so once, rather
than letting the user take the twin's unchanged timings for a verdict on the edit."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec, relative


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def sources_edited_after_cpu_rows(cells: Iterable[Cell], registry: Mapping[str, KernelSpec]) -> list[str]:
    """The .cu files (relative to the checkout) of the cpu cells' kernels that changed after the
    oldest of those kernels' rows was measured: edits this backend cannot measure."""
    oldest: dict[str, float] = {}
    for cell in cells:
        if cell.backend != "cpu":
            continue
        measured = _mtime(cell.path)
        if measured is not None:
            oldest[cell.kernel] = min(measured, oldest.get(cell.kernel, measured))
    edited = []
    for kernel, measured in sorted(oldest.items()):
        spec = registry.get(kernel)
        source = spec.source if spec else None
        changed = _mtime(str(source)) if source else None
        if changed is not None and changed > measured:
            edited.append(relative(source))
    return edited


def cpu_source_note(edited: list[str]) -> str:
    """The one line a cpu run prints for ``edited`` sources."""
    return (f"note: {', '.join(edited)} changed after the cpu rows of {'its kernel' if len(edited) == 1 else 'their kernels'} "
            "were measured; the cpu backend runs each kernel's cpu twin, never its .cu, so no cell is "
            "measured again here: an edit of a .cu is measured on a GPU (backend: cuda)")

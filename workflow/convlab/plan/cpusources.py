"""Kernel sources the cpu backend does not measure. A cpu cell runs its kernel's cpu twin, so an
edited .cu re-runs no cpu cell (convlab.plan.registry.KernelSpec.files); the run says so, rather
than letting the user take the twin's unchanged timings for a verdict on the edit.

Content decides: the record step keeps the hash of each .cu as it was when the cpu rows were last
recorded (results/<device>/cpu_sources.json), and a run names the .cu files whose content now
differs. A file touched, or reverted to what it was, is not an edit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from convlab.atomicfile import write_text_atomically
from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec, relative

# beside the device's results: the .cu hashes of the kernels the cpu rows stand for
SOURCES_FILE = "cpu_sources.json"


def source_hashes(cells: Iterable[Cell], registry: Mapping[str, KernelSpec]) -> dict[str, str]:
    """The sha256 of each .cu (relative to the checkout) of the cpu cells' kernels."""
    hashes = {}
    for kernel in sorted({cell.kernel for cell in cells if cell.backend == "cpu"}):
        spec = registry.get(kernel)
        if spec is None or spec.source is None:
            continue
        try:
            hashes[relative(spec.source)] = hashlib.sha256(Path(spec.source).read_bytes()).hexdigest()
        except OSError:
            continue
    return hashes


def recorded_sources(results: str | Path) -> dict[str, str]:
    """The .cu hashes the record step kept for a device's cpu rows (none where it kept none)."""
    try:
        kept = json.loads((Path(results) / SOURCES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in kept.items()} if isinstance(kept, dict) else {}


def keep_sources(results: str | Path, measured: Iterable[Cell], cells: Iterable[Cell],
                 registry: Mapping[str, KernelSpec]) -> None:
    """Keep the .cu hashes the cpu rows stand for: as they are now for the kernels of the rows
    just recorded (``measured``) and for kernels not kept before; as kept for the others of the
    grid (``cells``), whose rows were measured before the files' current content."""
    kept = recorded_sources(results)
    now = source_hashes(cells, registry)
    merged = {path: kept.get(path, digest) for path, digest in now.items()} | source_hashes(measured, registry)
    if merged and merged != kept:
        write_text_atomically(Path(results) / SOURCES_FILE, json.dumps(merged, indent=1, sort_keys=True) + "\n")


def sources_edited_since_recorded(results: str | Path, cells: Iterable[Cell],
                                  registry: Mapping[str, KernelSpec]) -> list[str]:
    """The .cu files of the cpu cells' kernels whose content differs from what it was when the
    device's cpu rows were last recorded: edits this backend cannot measure."""
    kept = recorded_sources(results)
    now = source_hashes(cells, registry)
    return [path for path, digest in sorted(now.items()) if path in kept and kept[path] != digest]


def cpu_source_note(edited: list[str]) -> str:
    """The one line a cpu run prints for ``edited`` sources."""
    return (f"note: {', '.join(edited)} changed since the cpu rows of {'its kernel' if len(edited) == 1 else 'their kernels'} "
            "were recorded; the cpu backend runs each kernel's cpu twin, never its .cu, so no cell is "
            "measured again here: an edit of a .cu is measured on a GPU (backend: cuda)")

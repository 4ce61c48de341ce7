"""The launches a profiler reads a pair's hardware counts from: for each pair, both versions of the
cell's kernel placed on one set of operands (as the pair measured them, convlab.run.paired), set
up, launched once untimed, then launched once each in the NVTX range that names it: pair ``p``'s
previous version in range 2p, its new version in 2p + 1. Run inside Nsight Compute by
convlab.pairs.whyprofile, after and apart from the pair's timed rounds.

A replay started ahead of its plan (a standby) waits for the plan's file before it touches the GPU,
and leaves without a launch once the process that started it, or its Nsight Compute, has gone.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from convlab.backends.base import Backend
from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec, get_kernel, read_kernel_folder
from convlab.run.steps import Placed, launch, load_inputs, place, set_up
from convlab.status import CellFailure

SIDES = ("previous", "new")
POLL_S = 0.005  # how often a standby looks for its plan: a few stat() calls, against seconds of start


@dataclass(frozen=True)
class Version:
    """A kernel version by where its files are: a folder of its own (a version restored from the
    database, a preview's copy) or, with none, the registry's kernel of that name."""

    name: str
    folder: str | None = None

    def spec(self) -> KernelSpec:
        return read_kernel_folder(Path(self.folder))[self.name] if self.folder else get_kernel(self.name)

    @classmethod
    def of(cls, spec: KernelSpec, registered: bool) -> Version:
        return cls(spec.name, None if registered else str(spec.description_path.parent))


@dataclass(frozen=True)
class PairToExplain:
    cell: Cell
    image: str | None
    previous: Version
    new: Version

    def to_json(self) -> dict:
        return {"spec": self.cell.to_json(), "image": self.image or "",
                "previous": {"name": self.previous.name, "folder": self.previous.folder},
                "new": {"name": self.new.name, "folder": self.new.folder}}

    @classmethod
    def from_json(cls, item: dict) -> PairToExplain:
        return cls(Cell.from_json(item["spec"]), item.get("image") or None, Version(**item["previous"]),
                   Version(**item["new"]))


def range_index(pair: int, side: int) -> int:
    """The profiled range of ``pair``'s ``side`` (0: previous, 1: new)."""
    return 2 * pair + side


def replay_pairs(pairs: list[PairToExplain], backend: Backend) -> dict[int, str]:
    """Each pair's two profiled launches; the reason for each pair (by its index) that has none."""
    reasons = {}
    for index, pair in enumerate(pairs):
        reason = replay_pair(index, pair, backend)
        if reason:
            reasons[index] = reason
    return reasons


def replay_pair(index: int, pair: PairToExplain, backend: Backend) -> str:
    """Both versions set up on one placement, launched untimed, then each in its profiled range;
    or why they could not be."""
    try:
        inputs = load_inputs(pair.cell, pair.image)
        placements: dict[tuple, Placed] = {}
        prepared = []
        for version in (pair.previous, pair.new):
            side = replace(inputs, spec=version.spec())
            layout = backend.layout_for(side.spec)
            key = tuple(sorted(layout.items()))
            if key not in placements:
                placements[key] = place(backend, side, layout)
            ready = set_up(backend, side, placements[key])
            launch(backend, ready)
            prepared.append(ready)
        for side, ready in enumerate(prepared):
            with backend.profiled(range_index(index, side)):
                launch(backend, ready)
    except CellFailure as failure:
        return f"its replay failed: {failure.status}: {' '.join(failure.reason.split())[:300]}"
    except (OSError, KeyError, ValueError) as error:
        return f"its versions could not be read: {error}"
    return ""


def ready_marker(plan: Path) -> Path:
    """The file a standby replay writes beside its plan's path once it waits for it."""
    return plan.with_name(plan.name + ".ready")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for_plan(plan: Path, parent: int | None) -> bool:
    """Wait until ``plan`` exists (True), or until ``parent`` (the process that started the
    standby) or this process's own parent (its Nsight Compute) has gone (False)."""
    launcher = os.getppid()
    ready_marker(plan).write_text(str(os.getpid()))
    while not plan.is_file():
        if os.getppid() != launcher or (parent is not None and not alive(parent)):
            return False
        time.sleep(POLL_S)
    return True

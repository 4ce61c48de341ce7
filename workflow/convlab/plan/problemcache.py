"""What the cells of one problem share in a long-lived measurement worker: the host operands, the
device-resident inputs (a master per input and layout, of which every cell gets a copy of its own)
and the float64 reference, kept on the side it is compared on.

Cells of one problem differ only in their kernel and launch; a worker that measures several of them
makes these once. Why sharing them cannot change a row:

- the key (problem_key) is everything the operands are made from, the picture by its resolved path,
  size and modification time, so that a changed picture is read again;
- kept host arrays are read-only: nothing may write into what another cell reads (the round
  trip's host output, one buffer of the cache's for every problem, is written by every cell and
  read by none);
- a cell's device inputs are its own device-to-device copies of the masters: a kernel that writes
  into its input changes its own copy only;
- each time a kept master or reference is used again, its bits are checked against the checksum
  taken when it was made, so that a kernel that wrote outside its own buffers cannot pass the damage
  on to another cell: the array is made again;
- the cache lives in one worker process and ends with it (a sticky device error ends the worker):
  nothing is shared between processes, so nothing between users or jobs either.

Off (capacity 0) in a one-shot process, where no other cell would use it; a service worker turns it
on, as it does the pictures' cache.
"""

from __future__ import annotations

import math
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from convlab.plan.cell import Cell
from convlab.problem.wordsum import word_sum

Made = TypeVar("Made")
ProblemKey = tuple[Hashable, ...]
# Host and device bytes together: a handful of problems at the default grid's sizes (a 4096^2
# picture's problem holds about 0.8 GiB, an 8192^3 GEMM's 1.3 GiB); the largest (16384^2 tiling,
# 4 GiB) are kept one or two at a time, where their timed work dwarfs what they share anyway.
KEPT_BYTES = 8 << 30


def resident_host_array(shape: tuple[int, ...]) -> np.ndarray:
    """A float32 host array whose pages are already mapped. np.empty's pages are mapped on first
    touch, and a device-to-host copy into them paid for that inside its time: into a fresh 1 GiB
    array an H200 host's copy took 268 ms, into a touched one 70 ms."""
    array = np.empty(shape, dtype=np.float32)
    array.fill(0)
    return array


def problem_fields(cell: Cell) -> ProblemKey:
    """What a cell's problem is, the picture aside: the cells that share these share their operands
    wherever they read the same picture."""
    return (cell.experiment, cell.size, cell.width, cell.stride, cell.filter_size, cell.filter, cell.padding,
            cell.in_channels, cell.out_channels, cell.batch, cell.verify.get("seed"))


def problem_key(cell: Cell, image_path: str | Path | None) -> ProblemKey | None:
    """Everything a cell's operands are made from: cells with the same key share them. None where
    the picture cannot be looked at: the cell then loads it alone, and says why it cannot."""
    picture = None
    if image_path is not None:
        try:
            path = Path(image_path).resolve()
            info = path.stat()
        except OSError:
            return None
        picture = (str(path), info.st_size, info.st_mtime_ns)
    return (*problem_fields(cell), picture)


def checksum(xp: Any, array: Any) -> int:
    """The sum of the array's words as unsigned integers, modulo 2**64 (convlab.problem.wordsum)."""
    return word_sum(xp, array)


def _arrays(value: Any) -> Iterator[Any]:
    """The arrays a kept value holds: itself, or its dataclass fields' (the operands')."""
    if hasattr(value, "nbytes") and hasattr(value, "shape"):
        yield value
    elif is_dataclass(value):
        for item in fields(value):
            yield from _arrays(getattr(value, item.name))


@dataclass
class _Kept:
    value: Any
    arrays: tuple[Any, ...]
    checksum: int | None = None  # of a master or a reference, checked each time it is used again


class SharedProblem:
    """One problem's operands, device masters and references, as its cells ask for them. An unkept
    one (a one-shot process's, or a problem too large to keep) makes each anew, as a cell alone does."""

    def __init__(self, cache: ProblemCache | None = None, key: ProblemKey | None = None,
                 long_lived: bool = False) -> None:
        self._cache, self.key = cache, key
        self._kept: dict[Hashable, _Kept] = {}
        # a long-lived worker's: what it loads once (CuPy's float64 kernels) costs its cells nothing
        self.long_lived = long_lived or cache is not None

    @property
    def kept(self) -> bool:
        return self._cache is not None

    @property
    def nbytes(self) -> int:
        unique = {id(array): array for kept in self._kept.values() for array in kept.arrays}
        return sum(int(array.nbytes) for array in unique.values())

    def operands(self, make: Callable[[], Made]) -> Made:
        """The host operands (picture or random data, weights), read-only when kept."""
        return self._keep(("operands",), make)

    def host_input(self, name: str, layout: str, make: Callable[[], np.ndarray]) -> np.ndarray:
        """An input on the host in a kernel's layout (what the round trip copies in)."""
        return self._keep(("host", name, layout), make)

    def host_output(self, shape: tuple[int, ...]) -> np.ndarray:
        """The host array the round trip copies the output into, its pages mapped: the cache's
        (ProblemCache.host_output) where this problem is kept, else one of its own."""
        if self._cache is None:
            return resident_host_array(shape)
        return self._cache.host_output(shape)

    def device_input(self, name: str, layout: str, make: Callable[[], Any], xp: Any) -> Any:
        """The cell's own device input in a kernel's layout: where kept, a device-to-device copy of
        the master, so that a kernel that writes into its input changes nothing another cell reads."""
        if not self.kept:
            return make()
        return self._keep(("device", name, layout), make, xp).copy()

    def reference(self, xp: Any, make: Callable[[], Made]) -> Made:
        """The float64 reference on the side whose array module ``xp`` compares (numpy: the host)."""
        return self._keep(("reference", xp.__name__), make, xp)

    def reference_scale(self, xp: Any, make: Callable[[], Made]) -> Made:
        """What the reference's errors are relative to (its largest value and its norm), made with it:
        the same for every cell of the problem, and for a reference made again after damage."""
        return self._keep(("reference scale", xp.__name__), make)

    def detach(self) -> None:
        """Leave the cache: keep nothing more, and let go of what was kept."""
        self._cache = None
        self._kept.clear()

    def _keep(self, name: Hashable, make: Callable[[], Made], xp: Any = None) -> Made:
        """``make()``'s value, kept under ``name``; with ``xp``, an array checked on every reuse."""
        if self._cache is None:
            return make()
        kept = self._kept.get(name)
        if kept is not None and xp is not None and checksum(xp, kept.value) != kept.checksum:
            print(f"convlab: the kept {' '.join(map(str, name))} of problem {self.key} changed since it was made "
                  "(a kernel wrote outside its buffers?): made again", file=sys.stderr)
            kept = None
        if kept is None:
            value = make()
            kept = _Kept(value, tuple(_arrays(value)), None if xp is None else checksum(xp, value))
            for array in kept.arrays:
                if isinstance(array, np.ndarray):
                    array.flags.writeable = False
            self._kept[name] = kept
            self._cache.trim(self)
        return kept.value


class ProblemCache:
    """The problems a worker measured last, the least recently used leaving first: at most
    ``capacity`` of them and ``max_bytes`` (host and device) together. Capacity 0 keeps none."""

    def __init__(self, capacity: int = 0, max_bytes: int = KEPT_BYTES) -> None:
        self.capacity, self.max_bytes = capacity, max_bytes
        self._problems: OrderedDict[ProblemKey, SharedProblem] = OrderedDict()
        self._host_output: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._problems)

    @property
    def nbytes(self) -> int:
        return sum(problem.nbytes for problem in self._problems.values())

    def problem(self, key: ProblemKey | None) -> SharedProblem:
        """The problem's shared part, the most recently used from now; an unkept one where the
        cache is off or the key unknown."""
        if self.capacity <= 0 or key is None:
            return SharedProblem(long_lived=self.capacity > 0)
        problem = self._problems.pop(key, None) or SharedProblem(self, key)
        self._problems[key] = problem
        self.trim(problem)
        return problem

    def trim(self, newest: SharedProblem) -> None:
        """Drop the newest problem if it alone does not fit (its cell keeps what it was given), then
        the least recently used ones until the rest fit."""
        if newest.nbytes > self.max_bytes and self._problems.get(newest.key) is newest:
            self._problems.pop(newest.key).detach()
        for key in list(self._problems):
            if len(self._problems) <= self.capacity and self.nbytes <= self.max_bytes:
                return
            if self._problems[key] is not newest:
                self._problems.pop(key).detach()

    def host_output(self, shape: tuple[int, ...]) -> np.ndarray:
        """A view in ``shape`` of the one host buffer every kept problem's round trip copies its
        output into: written by every cell, read by none. It grows to the largest output asked for
        (outside ``max_bytes``: counted there, a 16384² problem's two layouts would no longer fit)."""
        count = math.prod(shape)
        if self._host_output is None or self._host_output.size < count:
            self._host_output = None  # the smaller one goes before the larger is made
            self._host_output = resident_host_array((count,))
        return self._host_output[:count].reshape(shape)

    def clear(self) -> None:
        for problem in self._problems.values():
            problem.detach()
        self._problems.clear()
        self._host_output = None


# Off (capacity 0) in one-shot processes; a service worker turns it on.
PROBLEMS = ProblemCache()

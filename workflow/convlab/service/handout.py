"""Which free worker a waiting job gets (standard library only).

A worker keeps the problems it measured lately: their operands, device inputs and float64
reference (convlab.plan.problemcache). On a host of several GPUs, a cell that goes to a worker
holding its problem skips making them again, which every other worker would pay for once more.
So a free worker goes first to a waiting job whose problem it holds, then to a job whose problem
no worker holds, and only then to a job whose problem a busy worker holds. A free worker never
stays free while a job waits: it is left only to a job that will take it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Hashable
from typing import Any

# Problems remembered per worker: as many as its problem cache keeps at most (the worker's
# PROBLEMS_KEPT); one it dropped early for their bytes only costs the build a wrong guess saves.
REMEMBERED = 4
CELL_FIELDS = ("kernel", "settings", "tunables", "timing")  # what cells of one problem differ in


def problem_of(spec: dict[str, Any]) -> Hashable:
    """The problem a cell's spec measures: everything in it but its kernel's own fields."""
    return repr(sorted((name, value) for name, value in spec.items() if name not in CELL_FIELDS))


class FreeWorkers:
    """The free workers of one pool and the jobs waiting for one. A worker is anything with an
    ``index`` (its device)."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._changed = threading.Condition()
        self._free: list[Any] = []
        self._waiting: list[tuple[object, Hashable | None]] = []
        self._remembered = remembered
        self._held: dict[int, deque[Hashable]] = {}

    def put(self, worker: Any, fresh: bool = False) -> None:
        """A worker is free; ``fresh``: a new process, which holds no problem yet."""
        with self._changed:
            if fresh:
                self._held.pop(worker.index, None)
            self._free.append(worker)
            self._changed.notify_all()

    def get(self, problem: Hashable | None = None, timeout_s: float | None = None) -> Any | None:
        """A free worker for a job of ``problem`` (None: any), waiting up to ``timeout_s``; None if
        none came."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        ticket = object()
        with self._changed:
            self._waiting.append((ticket, problem))
            try:
                while True:
                    worker = self._choose(ticket, problem)
                    if worker is not None:
                        self._free.remove(worker)
                        if problem is not None:
                            self._hold(worker.index, problem)
                        return worker
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return None
                    self._changed.wait(remaining)
            finally:
                self._waiting.remove((ticket, problem))
                self._changed.notify_all()  # a worker left for this job may now suit another

    def take_all(self) -> list[Any]:
        """Every free worker, at once (none is then free)."""
        with self._changed:
            taken, self._free = self._free, []
            return taken

    def holds(self, worker: Any, problem: Hashable | None) -> bool:
        """Whether ``worker`` measured a cell of ``problem`` lately (and was not replaced since)."""
        return problem is not None and problem in self._held.get(worker.index, ())

    @property
    def waiting(self) -> int:
        """How many jobs wait for a worker."""
        with self._changed:
            return len(self._waiting)

    def _choose(self, ticket: object, problem: Hashable | None) -> Any | None:
        for worker in self._free:
            if self.holds(worker, problem):
                return worker
        others = [wanted for waiter, wanted in self._waiting if waiter is not ticket]
        if self._held_anywhere(problem) and not all(self._held_anywhere(wanted) for wanted in others):
            return None  # a busy worker holds this job's problem: a job whose problem none holds goes first
        for worker in self._free:
            if not any(self.holds(worker, wanted) for wanted in others):
                return worker
        return None  # each free worker holds the problem of another waiting job, which takes it

    def _held_anywhere(self, problem: Hashable | None) -> bool:
        return problem is not None and any(problem in held for held in self._held.values())

    def _hold(self, index: int, problem: Hashable) -> None:
        held = self._held.setdefault(index, deque(maxlen=self._remembered))
        if problem in held:
            held.remove(problem)
        held.append(problem)

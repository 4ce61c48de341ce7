"""The hooks of an observer of a cell's measurement (standard library only: the cell job's
phase clock is one, in a process that loads no NumPy). convlab.measure.observers.standard says how the
runner calls them."""

from __future__ import annotations

from typing import Any, Protocol


class RunView(Protocol):
    """What the hooks see of a cell's run so far (convlab.run.steps.Run is one): the backend, the
    inputs, and the prepared kernel once set up. A protocol, so measurement never imports the runner."""

    backend: Any
    inputs: Any
    prepared: Any


class ResultView(Protocol):
    """What the steps produced, as columns() reads it (convlab.run.steps.Result is one). A failed
    cell has no timing and no verdict."""

    problem: Any
    prepared: Any
    timed: Any
    verified: Any
    copy_gbps: float | None

    @property
    def kernel_ms(self) -> float | None: ...

    @property
    def flops(self) -> int: ...


class Observer:
    """The hooks an observer may take part in; each does nothing unless the observer overrides it."""

    def before(self, step: str, run: RunView) -> None:
        """As ``step`` begins."""

    def after(self, step: str, run: RunView) -> None:
        """Once ``step`` succeeded, still under its guard."""

    def abandon(self) -> None:
        """A step failed: the cell ends; let go of what the observer holds."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        """This observer's row columns: empty where what it reports did not happen."""
        return {}

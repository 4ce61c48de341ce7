"""The hooks of an observer of a cell's measurement (standard library only: the cell job's
phase clock is one, in a process that loads no NumPy). convlab.measure.observers says how the
runner calls them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from convlab.run.steps import Result, Run


class Observer:
    """The hooks an observer may take part in; each does nothing unless the observer overrides it."""

    def before(self, step: str, run: Run) -> None:
        """As ``step`` begins."""

    def after(self, step: str, run: Run) -> None:
        """Once ``step`` succeeded, still under its guard."""

    def abandon(self) -> None:
        """A step failed: the cell ends; let go of what the observer holds."""

    def columns(self, result: Result) -> dict[str, Any]:
        """This observer's row columns: empty where what it reports did not happen."""
        return {}

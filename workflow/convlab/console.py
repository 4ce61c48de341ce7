"""Where a command's output goes. A handler says its lines to a Console instead of printing, so that
the same handler runs in the command line's own process (the process's streams) and in a service
worker (two buffers, sent back to the job that asked). Standard library only.
"""

from __future__ import annotations

import io
import sys

TYPE_CHECKING = False  # typing's flag, without importing typing: every cell job imports this module
if TYPE_CHECKING:
    from typing import TextIO


class Console:
    """A command's standard output (``say``) and standard error (``warn``). Without streams it
    writes to the process's own, looked up at each line (a test may swap them meanwhile)."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._out, self._err = out, err

    @classmethod
    def collecting(cls) -> Console:
        """A console that keeps what it is told, for a worker's reply."""
        return cls(io.StringIO(), io.StringIO())

    def say(self, text: str) -> None:
        """``text`` and a newline on standard output, in one write: two threads' lines never mix."""
        (self._out or sys.stdout).write(f"{text}\n")

    def warn(self, text: str) -> None:
        """``text`` and a newline on standard error (warnings, errors and tracebacks), in one write."""
        (self._err or sys.stderr).write(f"{text}\n")

    def relay(self, out: str, err: str) -> None:
        """Another console's output, verbatim: what a worker's command said, shown by the job."""
        (self._out or sys.stdout).write(out)
        (self._err or sys.stderr).write(err)

    def said(self) -> tuple[str, str]:
        """What a collecting console was told: (standard output, standard error)."""
        return _text(self._out), _text(self._err)


def _text(stream: TextIO | None) -> str:
    return stream.getvalue() if isinstance(stream, io.StringIO) else ""

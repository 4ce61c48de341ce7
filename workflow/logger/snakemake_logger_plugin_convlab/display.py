"""Where the display's text goes: a status line kept on a terminal's bottom row, or plain lines.

The jobs write to the same terminal directly (their `warning:`/`error:` lines, the verdicts of
the Snakefile's onsuccess), without passing through the logger, so a status line drawn where the
cursor is would be cut into by their lines. As apt does, the terminal's scroll region is set to
every row but the last: everything else scrolls above it, and the status line is drawn on the
last row with the cursor saved and restored around it, so that it never moves the cursor the
other writers use. Closing erases the status line and gives the whole screen back to scrolling;
a run killed outright (SIGKILL) cannot, and then `reset` or resizing the window does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol, TextIO

SAVE_CURSOR = "\x1b7"
RESTORE_CURSOR = "\x1b8"
ERASE_LINE = "\x1b[2K"
RESET_SCROLL_REGION = "\x1b[r"
# A terminal this short keeps its rows for the output.
MIN_ROWS = 3


class Display(Protocol):
    redraws: bool  # whether show() draws a status line (else progress is printed as lines)

    def show(self, status: str) -> None:
        """Draw the status line in place of the previous one."""

    def print(self, line: str) -> None:
        """One line of output, kept."""

    def close(self) -> None:
        """Remove the status line; later lines print as plain lines."""


def fd_writer(stream: TextIO) -> Callable[[str], None]:
    """Writes straight to the stream's file descriptor, in one call per text: a line of ours and a
    line another thread is printing through the same Python stream cannot splice into each other.
    A stream with no descriptor (one that captures output in a test) is written as a stream."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        def write_stream(text: str) -> None:
            stream.write(text)
            stream.flush()

        return write_stream
    encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(text: str) -> None:
        data = text.encode(encoding, errors="replace")
        try:
            while data:
                data = data[os.write(fd, data):]
        except OSError:  # the reader went away (a closed pipe): nothing left to show
            pass

    return write


def terminal_rows(stream: TextIO) -> int:
    """The terminal's height, or 0 where the stream is no terminal the display can draw on."""
    try:
        if not stream.isatty() or os.environ.get("TERM") == "dumb":
            return 0
        return os.get_terminal_size(stream.fileno()).lines
    except (AttributeError, OSError, ValueError):
        return 0


class PlainDisplay:
    """Output that is not a terminal (a file, CI, Slurm): lines only, no status line."""

    redraws = False

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write

    def show(self, status: str) -> None:
        pass

    def print(self, line: str) -> None:
        self.write(line + "\n")

    def close(self) -> None:
        pass


class TerminalDisplay:
    """The status line on the terminal's last row, below a scroll region for everything else."""

    redraws = True

    def __init__(self, write: Callable[[str], None], size: Callable[[], os.terminal_size]) -> None:
        self.write = write
        self.size = size
        self.rows = 0  # the terminal's height when the scroll region was set; 0: not set

    def show(self, status: str) -> None:
        try:
            columns, rows = self.size()
        except OSError:  # the terminal went away
            columns, rows = 0, 0
        if rows < MIN_ROWS:
            self.close()
            return
        if rows != self.rows:  # first drawn, or the terminal was resized
            self._reserve_last_row(rows)
        # one column short of the width: a full last row would wrap and scroll the screen
        self.write(f"{SAVE_CURSOR}\x1b[{rows};1H{ERASE_LINE}{status[:max(1, columns - 1)]}{RESTORE_CURSOR}")

    def print(self, line: str) -> None:
        # the cursor is always inside the scroll region: the line scrolls there, above the status
        self.write(line + "\n")

    def close(self) -> None:
        if self.rows:
            self.write(f"{SAVE_CURSOR}\x1b[{self.rows};1H{ERASE_LINE}{RESET_SCROLL_REGION}{RESTORE_CURSOR}")
            self.rows = 0

    def _reserve_last_row(self, rows: int) -> None:
        """Scroll one line up (the cursor is at the start of an empty line: every line before
        ended), make rows 1 to rows-1 the scroll region (setting it homes the cursor: saved and
        restored around it) and go back up to the empty line, now inside the region."""
        self.close()
        self.write(f"\n{SAVE_CURSOR}\x1b[1;{rows - 1}r{RESTORE_CURSOR}\x1b[1A")
        self.rows = rows

"""convlab's Snakemake logger plugin (`--logger convlab`, which profiles/default sets for real
runs): the cells done and the time left instead of a block per job. On a terminal that is one
status line redrawn in place; elsewhere a line at each quarter of the cells. Besides, it prints
the plan in one line, Snakemake's errors in a few lines each and a final line; what the jobs and
the Snakefile print themselves goes to the terminal without passing through here. Snakemake
writes its complete log, job blocks included, to .snakemake/log/ whatever the stream logger.

A dry run keeps Snakemake's own listing: this handler then says it writes to no stream, and
Snakemake adds its default one.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
from logging import LogRecord
from pathlib import Path

from snakemake_interface_logger_plugins.base import LogHandlerBase

from .display import MIN_ROWS, PlainDisplay, TerminalDisplay, fd_writer, terminal_rows
from .reporter import Reporter

# How often the status line is redrawn with nothing else happening: its elapsed time moves on.
TICK_S = 1.0
# Snakemake's logger, to which it adds the handler of its complete log once the workflow is set up.
SNAKEMAKE_LOGGER = "snakemake.logging"
# Where Snakemake keeps its complete logs, relative to where it runs.
LOG_FOLDER = Path(".snakemake") / "log"


def complete_log() -> str | None:
    """The path of Snakemake's complete log; None before it opens one (while it reads the command
    line and the config files) and in a dry run."""
    for handler in logging.getLogger(SNAKEMAKE_LOGGER).handlers:
        if isinstance(handler, logging.FileHandler):
            return handler.baseFilename
    return None


def keep_traceback(text: str) -> str | None:
    """Writes a traceback that no complete log holds into a file of its own beside the complete
    logs, named as Snakemake names them; where it is, or None where it cannot be written."""
    path = LOG_FOLDER / (datetime.datetime.now().isoformat().replace(":", "") + ".traceback.log")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.rstrip() + "\n")
    except OSError:
        return None
    return str(path)


def quiet_about_progress(quiet: object) -> bool:
    """Whether Snakemake's --quiet asked for no progress (its "progress" or "all")."""
    names = {getattr(item, "name", str(item)).lower() for item in quiet or ()}
    return bool(names & {"progress", "all"})


class LogHandler(LogHandlerBase):
    """What Snakemake instantiates for `--logger convlab`; the Reporter decides what to show."""

    # Snakemake's questions to every log handler, whose answers never change: plain class
    # attributes stand for the base's abstract properties
    writes_to_file = False
    has_filter = True
    has_formatter = True
    needs_rulegraph = False

    def __post_init__(self) -> None:
        settings = self.common_settings
        self.passive = bool(getattr(settings, "dryrun", False))
        self.reporter: Reporter | None = None
        if self.passive:
            return
        stream = sys.stdout if getattr(settings, "stdout", False) else sys.stderr
        write = fd_writer(stream)
        if terminal_rows(stream) >= MIN_ROWS:
            display = TerminalDisplay(write, lambda: os.get_terminal_size(stream.fileno()))
        else:
            display = PlainDisplay(write)
        show_progress = not quiet_about_progress(getattr(settings, "quiet", None))
        self.reporter = Reporter(display, show_progress=show_progress, tick_s=TICK_S, complete_log=complete_log,
                                 keep=keep_traceback)

    def emit(self, record: LogRecord) -> None:
        if self.reporter is None:
            return
        try:
            self.reporter.handle(record)
        except Exception:  # a display fault must not stop the run: print it the logging way
            self.handleError(record)

    def close(self) -> None:
        # Snakemake closes its handlers more than once; the reporter's close repeats nothing
        if self.reporter is not None:
            self.reporter.close()
        super().close()

    @property
    def writes_to_stream(self) -> bool:
        return not self.passive


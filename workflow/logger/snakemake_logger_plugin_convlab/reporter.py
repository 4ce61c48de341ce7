"""What a run shows, decided from Snakemake's log records: the plan in one line, the progress
(a status line on a terminal, a line per quarter of the cells elsewhere), Snakemake's errors in a
few lines each, and a final line. Everything else Snakemake logs (per-job blocks, scheduling
notes) stays in the complete log under .snakemake/log/, which Snakemake writes by itself.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable

from snakemake_interface_logger_plugins.common import LogEvent

from .display import Display
from .machinefaults import fault_line, folder_fault, job_signal, signal_words
from .progress import RunProgress

# Snakemake's plain (event-less) info lines that a run still shows: its outcome and where the log is.
SHOWN_INFO = ("Nothing to be done", "Complete log")
# Snakemake's note on Ctrl-C (SIGINT), which stops the jobs running: shown once, as what happens and
# what to do; the jobs it stops are not failures of their own.
INTERRUPTED = "Terminating processes on user request"
INTERRUPTED_LINE = ("stopped (Ctrl-C): the jobs running now are stopped, every complete row is kept; run the same "
                    "snakemake command again to measure the rest")
# Snakemake's note on SIGTERM or SIGINT, repeated as jobs end: shown once, as what happens and what to do.
STOPPING = "Will exit after finishing currently running jobs"
STOPPING_LINE = ("stopping (asked to, by SIGTERM or Ctrl-C): the jobs running now finish and nothing new starts; "
                 "run snakemake again to go on")
# Snakemake's notes before a run starts, never shown. Its other lines before a run are shown: a
# command that runs no jobs (--report, --unlock, --lint) says in them what it did.
STARTUP_NOTES = ("Config file ", "Assuming unrestricted shared filesystem usage", "Building DAG of jobs",
                 "Using shell:", "Group jobs: inactive", "Conda environments: ignored",
                 "Singularity containers: ignored", "Multiple includes of ")
# Snakemake's errors and warnings are cut to this many lines, each to this many characters: the
# complete log has them whole.
MESSAGE_LINES = 4
LINE_CHARS = 200
# Failed jobs listed one line each; past this many, one line says that more failed. A failed
# group of jobs on a cluster reports every job in it.
JOB_ERRORS_SHOWN = 3
# A message's first line that only names the exception ("RuleException:", "WorkflowError:").
EXCEPTION_HEADER = re.compile(r"\w+:")
# A shell command's failure: the job error after it names the rule and its log, the job itself
# printed its `error:` line; this record would only repeat the whole command.
FAILED_COMMAND = re.compile(r"CalledProcessError in |returned non-zero exit status")
# Snakemake's closing error that repeats "a job execution failed" once a job error was shown.
JOBS_FAILED_SUMMARY = "At least one job did not complete successfully."
# How Snakemake's message for an exception outside any rule starts (a missing module, a bad
# command-line value, a bug): the cause is its last line.
TRACEBACK = "Traceback (most recent call last):"


def condensed(message: str, complete_log: bool = True) -> list[str]:
    """A message in at most MESSAGE_LINES lines of at most LINE_CHARS characters, when the complete
    log has it whole; else (Snakemake has not opened its log yet) the message whole."""
    lines = [line.rstrip() for line in message.splitlines() if line.strip()]
    if len(lines) > 1 and EXCEPTION_HEADER.fullmatch(lines[0]):
        lines = lines[1:]
    if not complete_log:
        return lines
    shown = [line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…" for line in lines[:MESSAGE_LINES]]
    if len(lines) > MESSAGE_LINES:
        shown.append(f"  ({len(lines) - MESSAGE_LINES} more lines in the complete log)")
    return shown


def traceback_cause(message: str) -> str | None:
    """A Python traceback's cause: its last line, the exception and what it says; None for a
    message that is no traceback."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines or not any(line.startswith(TRACEBACK) for line in lines):
        return None
    return lines[-1]


def job_error_line(rule: str, logs: list[str], killed_by: str | None = None) -> str:
    where = f"; its log: {', '.join(logs)}" if logs else ""
    if killed_by:
        return f"error: rule {rule} failed: its shell died of {signal_words(killed_by)}{where}"
    return f"error: rule {rule} failed{where}"


def empty_file(path: str) -> bool:
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return True


class Reporter:
    """Turns log records into the display. Records come from Snakemake's log thread; on a
    terminal a ticker thread also redraws the status line each second, for the elapsed time."""

    def __init__(self, display: Display, show_progress: bool = True, clock: Callable[[], float] = time.monotonic,
                 tick_s: float | None = None, complete_log: Callable[[], str | None] = lambda: None,
                 keep: Callable[[str], str | None] = lambda text: None) -> None:
        """``complete_log``: the path of Snakemake's complete log once it has opened one. ``keep``:
        writes a traceback that no complete log holds to a file of its own, and says where (None
        where it cannot)."""
        self.display = display
        self.complete_log = complete_log
        self.keep = keep
        self.show_progress = show_progress
        self.clock = clock
        self.tick_s = tick_s
        self.run: RunProgress | None = None
        self.finished = False
        self.job_errors = 0
        self.stopping = False  # asked to stop (SIGTERM, SIGINT): said once
        self.interrupted = False  # Ctrl-C: the jobs running are stopped, not failed
        self.faults_said: set[str] = set()  # the machine's faults shown: each once
        # the signal that killed the last failed command's shell, said with its job's error
        self.killed_by: str | None = None
        self.lock = threading.RLock()
        self.stop_ticking = threading.Event()
        self.ticker: threading.Thread | None = None

    # -- records -------------------------------------------------------------------------------

    def handle(self, record: logging.LogRecord) -> None:
        with self.lock:
            event = getattr(record, "event", None)
            if event is None:
                self._plain_record(record)
            elif event == LogEvent.RUN_INFO:
                self._plan(getattr(record, "stats", {}) or {})
            elif event == LogEvent.JOB_INFO and self.run:
                self.run.job_started(getattr(record, "jobid", -1), getattr(record, "rule_name", ""))
            elif event == LogEvent.JOB_FINISHED and self.run:
                self.run.job_finished(getattr(record, "job_id", -1))
            elif event == LogEvent.PROGRESS and self.run:
                self.run.jobs_progress(getattr(record, "done", 0), getattr(record, "total", 0))
                self._progressed()
            elif event == LogEvent.JOB_ERROR:
                self._job_error(record)
            elif event == LogEvent.GROUP_ERROR:
                logs = [str(log) for log in getattr(record, "aux_logs", None) or []]
                where = f"; its log: {', '.join(logs)}" if logs else ""
                self.display.print(f"error: group job {getattr(record, 'groupid', '?')} failed{where}")
            elif event == LogEvent.ERROR:
                self._error(record)
            # the other events (job blocks, shell commands, resources, the DAG) stay in the complete log

    def _plain_record(self, record: logging.LogRecord) -> None:
        """Snakemake's lines without an event. Once a run has started: its warnings and errors,
        cut short, and the few notes in SHOWN_INFO. Before (or with no run, as in --lint or
        --report): everything but the start-up notes, errors cut short, warnings whole (a lint)."""
        message = record.getMessage()
        if record.levelno < logging.INFO or not message.strip() or message == "None":
            return
        if record.levelno >= logging.WARNING:
            if (self.interrupted or self.run and self.run.jobs_failed) and message.strip() == JOBS_FAILED_SUMMARY:
                return
            if record.levelno >= logging.ERROR and self._traceback(message):
                return
            whole = self.run is None and record.levelno < logging.ERROR
            lines = message.rstrip().splitlines() if whole else condensed(message, bool(self.complete_log()))
            for line in lines:
                self.display.print(line)
        elif message.startswith(STOPPING):
            # Snakemake says so at each signal and at each job that ends meanwhile: one line
            if not self.stopping:
                self.stopping = True
                self.display.print(STOPPING_LINE)
        elif message.startswith(INTERRUPTED):
            if not self.interrupted:
                self.interrupted = True
                self.display.print(INTERRUPTED_LINE)
        elif message.startswith(SHOWN_INFO) or (self.run is None and not message.startswith(STARTUP_NOTES)):
            self.display.print(message.rstrip())

    def _plan(self, stats: dict[str, int]) -> None:
        self.run = RunProgress.planned(stats, self.clock())
        self.finished = False
        if self.show_progress:
            self.display.print(self.run.plan_line())
        self._draw()
        if self.tick_s and self.show_progress and self.display.redraws and self.ticker is None:
            self.ticker = threading.Thread(target=self._tick, name="convlab-status", daemon=True)
            self.ticker.start()

    def _progressed(self) -> None:
        assert self.run is not None
        if self.run.complete:
            self._finish()
            return
        quartile = self.run.quartile_due()
        if quartile and self.show_progress and not self.display.redraws:
            self.display.print(self.run.status(self.clock()))
        self._draw()

    def _job_error(self, record: logging.LogRecord) -> None:
        if self.interrupted:
            return  # a job Ctrl-C stopped: the interruption's line said so
        if self.run:
            self.run.job_failed()
        self.job_errors += 1
        if self.job_errors <= JOB_ERRORS_SHOWN:
            logs = [str(log) for log in getattr(record, "log", None) or []]
            self.display.print(job_error_line(getattr(record, "rule_name", "?"), logs, self.killed_by))
            # a log the job could not write (a full disk) holds nothing: the machine's fault instead,
            # once, however many jobs it fails
            faults = {folder_fault(log) for log in logs if empty_file(log)} - {None} - self.faults_said
            for fault in sorted(faults):
                self.display.print(fault)
            self.faults_said |= faults
        elif self.job_errors == JOB_ERRORS_SHOWN + 1:
            self.display.print("error: more jobs failed; the complete log lists them all")
        self.killed_by = None
        self._draw()

    def _error(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if getattr(record, "exception", None) == "RuleException" and FAILED_COMMAND.search(message):
            self.killed_by = job_signal(message)
            return
        if (self.interrupted or self.run and self.run.jobs_failed) and JOBS_FAILED_SUMMARY in message:
            return
        if self._traceback(message):
            return
        for line in condensed(message, bool(self.complete_log())):
            self.display.print(line)

    def _traceback(self, message: str) -> bool:
        """A traceback is shown as its cause, one `error:` line that says where the traceback is:
        the complete log, or before Snakemake opened it, a file of its own. Where neither can hold
        it, it follows whole. False for a message that is no traceback."""
        cause = traceback_cause(message)
        if cause is None:
            return False
        where = self.complete_log() or self.keep(message)
        fault = fault_line(cause)
        if fault:  # the machine's fault: what to do, not the program's traceback; once
            if fault not in self.faults_said:
                self.faults_said.add(fault)
                self.display.print(fault)
            return True
        self.display.print(f"error: {cause}" + (f" (its traceback: {where})" if where else ""))
        if not where:
            for line in message.rstrip().splitlines():
                self.display.print(line)
        return True

    # -- output --------------------------------------------------------------------------------

    def _draw(self) -> None:
        if self.run and not self.finished and self.show_progress:
            self.display.show(self.run.status(self.clock()))

    def _tick(self) -> None:
        assert self.tick_s
        while not self.stop_ticking.wait(self.tick_s):
            with self.lock:
                try:
                    self._draw()
                except Exception:  # the records keep the display going; a broken tick just stops
                    return

    def _finish(self) -> None:
        """The status line goes, the final line stays."""
        self.stop_ticking.set()
        self.display.close()
        if self.run and not self.finished:
            self.finished = True
            if self.show_progress:
                self.display.print(self.run.final_line(self.clock()))

    def close(self) -> None:
        with self.lock:
            self._finish()
        if self.ticker is not None and self.ticker is not threading.current_thread():
            self.ticker.join(timeout=2)

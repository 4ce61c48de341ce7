"""Faults of the machine, not of the workflow, as one line that names the path and the fix: a
read-only folder, a full disk, a file-size limit, a cache folder that cannot be written, a process
killed by a signal. The one table of them, for the jobs' commands (an OSError they raise, a child
such as ffmpeg that a signal killed) and for the run's display, which gets them as the last line
of a traceback or Snakemake's words for a killed job. Standard library only: the logger plugin
(workflow/logger) ships this very file, linked, not copied."""

from __future__ import annotations

import os
import re
import signal

# "OSError: [Errno 30] Read-only file system: 'results/x.csv'" and its subclasses' spellings
ERRNO_LINE = re.compile(r"^(?:\w+Error|OSError): \[Errno (\d+)\] ([^:]+)(?:: '([^']*)')?")

ERRNO_FIXES = {
    30: ("is on a read-only file system", "make that folder writable, or run from a writable copy of the checkout"),
    13: ("cannot be written (permission denied)", "give yourself write permission there (chmod -R u+w) and run again"),
    28: ("could not be written: the disk is full",
         "free space on that disk and run again (data/ and the drawings under results/<device>/ can be made "
         "again; its history.sqlite and cells/ hold the measurements: keep them)"),
    27: ("could not be written: larger than this shell's file-size limit",
         "raise the limit (ulimit -f unlimited) and run again"),
    122: ("could not be written: the disk quota is used up", "free space within your quota and run again"),
}
NO_SPACE = (28, 122)

# The folders a run writes, relative to where it runs.
WRITTEN = ("results", "data", ".snakemake", ".")

# Signals with a cause of their own; the rest get the generic sentence. SIGINT and SIGTERM are not
# here: a stop asked for is said once, by the run, not by each process it stops.
SIGNAL_FIXES = {
    "SIGKILL": ("killed from outside: kill, the out-of-memory killer or a batch system's limit",
                "run again; if it recurs, look for the out-of-memory killer in `dmesg` or the job's limits"),
    "SIGXFSZ": ("it wrote past this shell's file-size limit", "raise the limit (ulimit -f unlimited) and run again"),
    "SIGSEGV": ("a crash: a segmentation fault", "run again; if it recurs, the cause is a bug: report it"),
}
ASKED_TO_STOP = ("SIGINT", "SIGTERM")
# Snakemake's words for a job whose shell a signal killed: "... died with <Signals.SIGKILL: 9>."
DIED_WITH = re.compile(r"died with <Signals\.(SIG\w+): \d+>")


def cache_home() -> str:
    return os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")


def machine_fault(errno: int, path: str = "") -> str | None:
    """The one line for an OSError of number ``errno`` on ``path`` that is a fault of the machine,
    or None (a program's own missing file is none)."""
    cache = cache_home()
    if path and os.environ.get("XDG_CACHE_HOME") and (path == cache or path.startswith(cache.rstrip("/") + "/")
                                                      or cache.startswith(path.rstrip("/") + "/")):
        return (f"error: the cache folder XDG_CACHE_HOME={cache} cannot be made or written ({os.strerror(errno)}: "
                f"{path}): point XDG_CACHE_HOME at a folder you can write (export XDG_CACHE_HOME=$HOME/.cache), "
                "or unset it")
    if errno not in ERRNO_FIXES:
        return None
    what, fix = ERRNO_FIXES[errno]
    where = path or (full_folder() if errno in NO_SPACE else unwritable_folder()) or "a file"
    return f"error: {where} {what}: {fix}"


def fault_line(cause: str) -> str | None:
    """The one line for a traceback's last line ``cause`` that is an OSError of the machine, or None."""
    match = ERRNO_LINE.match(cause)
    return machine_fault(int(match.group(1)), match.group(3) or "") if match else None


def unwritable_folder() -> str | None:
    """Where a run writes, the first folder it cannot: for a fault whose message names no path."""
    for folder in WRITTEN:
        if os.path.isdir(folder) and not os.access(folder, os.W_OK):
            return folder + "/"
    return None


def full_folder() -> str | None:
    """Where a run writes, the folder on the disk with the least space left: for a full disk whose
    message names no path (a write, not an open, failed). By the least, not by none: the disk can have
    freed a little since the write failed, or keep blocks for root."""
    free = []
    for order, folder in enumerate(WRITTEN):  # on one disk, the first folder a run writes
        try:
            if os.path.isdir(folder):
                info = os.statvfs(folder)
                free.append((info.f_bavail * info.f_frsize, order, folder + "/"))
        except OSError:
            continue
    return min(free)[2] if free else None


def folder_fault(path: str) -> str | None:
    """The machine's fault that keeps ``path`` from being written, found by looking at its folder
    (a full disk, a folder that cannot be written), or None: for a file that should hold something
    and is empty, such as a failed job's log."""
    folder = os.path.dirname(path) or "."
    while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    try:
        if os.statvfs(folder or ".").f_bavail == 0:
            return machine_fault(28, path)
    except OSError:
        return None
    if not os.access(folder or ".", os.W_OK):
        return machine_fault(13, path)
    return None


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def killed_by(what: str, signum: int) -> str:
    """``what`` (``ffmpeg``, ``this job's process``) died of signal ``signum``: what happened and the fix."""
    return f"{what} died of {signal_words(signal_name(signum))}"


def signal_words(name: str) -> str:
    """A death by the signal called ``name``: what happened and what to do."""
    if name in SIGNAL_FIXES:
        cause, fix = SIGNAL_FIXES[name]
        return f"{name} ({cause}): {fix}"
    return f"{name}: run again"


def job_signal(message: str) -> str | None:
    """The signal that killed a job's shell, from Snakemake's message of its failed command; None
    for a stop asked for (the run says that once)."""
    match = DIED_WITH.search(message)
    return match.group(1) if match and match.group(1) not in ASKED_TO_STOP else None

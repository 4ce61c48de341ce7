"""Faults of the machine, not of the workflow, as one line that names the path and the fix: a
read-only folder, a full disk, a file-size limit, a cache folder that cannot be written. They
reach the terminal as the cause of a traceback (an OSError's last line); this turns that line
into what to do."""

from __future__ import annotations

import os
import re

# "OSError: [Errno 30] Read-only file system: 'results/x.csv'" and its subclasses' spellings
ERRNO_LINE = re.compile(r"^(?:\w+Error|OSError): \[Errno (\d+)\] ([^:]+)(?:: '([^']*)')?")

FIXES = {
    30: ("is on a read-only file system", "make that folder writable, or run from a writable copy of the checkout"),
    13: ("cannot be written (permission denied)", "give yourself write permission there (chmod -R u+w) and run again"),
    28: ("could not be written: the disk is full",
         "free space on that disk (data/ and results/ can be removed and made again) and run again"),
    27: ("could not be written: larger than this shell's file-size limit",
         "raise the limit (ulimit -f unlimited) and run again"),
    122: ("could not be written: the disk quota is used up", "free space within your quota and run again"),
}


# The folders a run writes, relative to where it runs.
WRITTEN = ("results", "data", ".snakemake", ".")


def cache_home() -> str:
    return os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")


def fault_line(cause: str) -> str | None:
    """The one line for an OSError ``cause`` that is a fault of the machine, or None."""
    match = ERRNO_LINE.match(cause)
    if not match:
        return None
    errno, path = int(match.group(1)), match.group(3) or ""
    cache = cache_home()
    if path and os.environ.get("XDG_CACHE_HOME") and (path == cache or path.startswith(cache.rstrip("/") + "/")
                                                      or cache.startswith(path.rstrip("/") + "/")):
        return (f"error: the cache folder XDG_CACHE_HOME={cache} cannot be made or written ({match.group(2)}: {path}): "
                "point XDG_CACHE_HOME at a folder you can write (export XDG_CACHE_HOME=$HOME/.cache), or unset it")
    if errno not in FIXES:
        return None
    what, fix = FIXES[errno]
    return f"error: {path or unwritable_folder() or 'a file'} {what}: {fix}"


def unwritable_folder() -> str | None:
    """Where a run writes, the first folder it cannot: for a fault whose message names no path."""
    for folder in WRITTEN:
        if os.path.isdir(folder) and not os.access(folder, os.W_OK):
            return folder + "/"
    return None

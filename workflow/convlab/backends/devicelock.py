"""One measurement per device at a time, across processes and users: service workers, hand runs,
the benchmark and the device-wide measurements all take the device's lock file around their
timed work, exclusively; untimed work that would disturb them (a warm-up, the compile-ahead) takes
it shared, beside each other.

Within one measurement service, one cell at a time per GPU already holds; the lock also keeps a
hand run, a benchmark or a second service (another checkout, another user) off a GPU that is
measuring.

The lock file is shared by every user of the host, in the temporary directory (/tmp, sticky and
world-writable). Whoever makes it first owns it, so another user must be able to take it
without writing to it or creating it: ``flock`` needs only a descriptor, and a read-only one will
do. Opening an existing file with O_CREAT in a sticky directory is refused to anyone but its
owner where ``fs.protected_regular`` is set, so an existing lock is opened read-only and without
O_CREAT, and a new one is made with O_EXCL and made readable by all whatever the umask.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from convlab.status import UserError

# Readable by every user (so any user can open it to lock), writable by none but its owner.
LOCK_MODE = 0o644


class DeviceLockError(UserError, OSError):
    """The device's lock file exists but cannot be opened (e.g. made unreadable by hand)."""


def lock_path(device_key: str) -> Path:
    """The lock of one device: 'cpu' for the host, 'cuda-<GPU UUID>' for a GPU."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device_key) or "none"
    return Path(tempfile.gettempdir()) / f"convlab-{safe}.lock"


def open_lock(path: Path) -> int:
    """A descriptor of the lock file at ``path`` to flock, made if absent (readable by all)."""
    for _ in range(5):
        try:
            return os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            pass
        except PermissionError as error:
            raise DeviceLockError(f"the device lock {path} cannot be read by this user ({error.strerror}); "
                                  f"its owner can run: chmod a+r {path}") from None
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, LOCK_MODE)
        except FileExistsError:
            continue  # another process made it between our two opens: open theirs
        except OSError as error:
            if error.errno != errno.EEXIST:
                raise
            continue
        os.fchmod(descriptor, LOCK_MODE)  # the umask may have taken read rights away
        return descriptor
    raise DeviceLockError(f"the device lock {path} keeps appearing and vanishing; is something deleting it?")


@contextmanager
def _locked(device_key: str, mode: int) -> Iterator[Path]:
    path = lock_path(device_key)
    descriptor = open_lock(path)
    try:
        fcntl.flock(descriptor, mode)
        try:
            yield path
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


@contextmanager
def exclusive_device(device_key: str) -> Iterator[Path]:
    """The device for timed work: nothing else that holds its lock runs meanwhile."""
    with _locked(device_key, fcntl.LOCK_EX) as path:
        yield path


@contextmanager
def untimed_device(device_key: str) -> Iterator[Path]:
    """The device for untimed work that would disturb timed work (a worker's warm-up, the
    compile-ahead on every core): beside other untimed work, never beside timed work."""
    with _locked(device_key, fcntl.LOCK_SH) as path:
        yield path

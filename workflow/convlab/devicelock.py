"""One measurement per device at a time, across processes: service workers, hand runs, the
benchmark and the device-wide measurements all take the device's lock file around their timed work.

Within one measurement service, one cell at a time per GPU already holds; the lock also keeps a
hand run, a benchmark or a second service (another checkout, say) off a GPU that is measuring.
"""

from __future__ import annotations

import fcntl
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_path(device_key: str) -> Path:
    """The lock of one device: 'cpu' for the host, 'cuda-<GPU UUID>' for a GPU."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device_key) or "none"
    return Path(tempfile.gettempdir()) / f"convlab-{safe}.lock"


@contextmanager
def exclusive_device(device_key: str) -> Iterator[Path]:
    path = lock_path(device_key)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

"""The start lock of a service's files: its first clients start exactly one service under it, and a
service that ends removes its files under it, the lock's own file included. A lock file can be
removed while another process waits on it, so a holder checks, once it holds the lock, that the
file it locked is still the one at the path, and takes the new one otherwise. Standard library
only: a cell job's client imports it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

TYPE_CHECKING = False  # typing's flag, without importing typing: every cell job imports this module
if TYPE_CHECKING:
    from typing import IO


@contextmanager
def start_lock(path: str) -> Iterator[IO]:
    """Hold the start lock at ``path`` (made if missing) for the block; the open lock file."""
    while True:
        handle = open(path, "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            handle.close()
            raise
        if same:
            break
        handle.close()  # removed (and perhaps made again) while this one waited: take the file there now
    try:
        yield handle
    finally:
        handle.close()


def remove_service_files(socket: str, lock: str, others: list[str]) -> bool:
    """Remove a service's ``others`` (its log, its record) and its start lock once it has ended,
    unless a newer service of the same name answers at ``socket`` by then; whether they went."""
    with start_lock(lock):
        if os.path.exists(socket):
            return False
        for path in others:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        os.unlink(lock)  # held: a client waiting on it takes the next file, made anew
    return True

"""What a test session makes once and its tests share (a finished run, a fresh venv), also when
pytest-xdist spreads the tests over worker processes: the first process to need a thing makes it
under a lock in the session's own temporary folder and records it there as JSON; the others wait
for that lock and read the record. Nothing outlives the session's folder."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of the whole session: under xdist, the one its workers' folders are in.
    Call it on the main thread: its first call makes this process's own folder afresh, removing
    whatever is there, so a thread that calls it first can remove a test's folder from under it."""
    own = tmp_path_factory.getbasetemp()
    return own.parent if os.environ.get("PYTEST_XDIST_WORKER") else own


def made_once(root: Path, name: str, make: Callable[[Path], dict]) -> dict:
    """``make(folder)``'s record, made by the first process of the session that asks: ``root`` is
    session_folder()'s, ``folder`` new in it. A make that raises records nothing, and the next
    asker tries again."""
    record = root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.exists():
            return json.loads(record.read_text(encoding="utf-8"))
        folder = root / name
        folder.mkdir(exist_ok=True)
        made = make(folder)
        record.write_text(json.dumps(made), encoding="utf-8")
        return made


def first_worker() -> bool:
    """Whether this process runs the session alone or is xdist's first worker: the one that starts
    the session's long makes ahead of the tests."""
    return os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"

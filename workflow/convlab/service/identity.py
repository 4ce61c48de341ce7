"""Which measurement service a process may use, and where its socket lives (standard library only).

A service is shared only by processes that agree on everything that could change a measurement
or who may see it: the host, the user, the visible GPUs, the Slurm job, the checkout and the
runner code. Their hash names the socket, so a process that differs in any of them never finds
another's service: it starts its own, and the other idles out.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections import namedtuple

from convlab.measure.hostinfo import host_gpus, host_name
from convlab.service.runsocket import IDENTITY_ENV, RUN_CODE_ENV

# Plain paths, not pathlib's, in this module and the client: every cell job reads its identity,
# and importing pathlib is a good part of a job's start.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # workflow/convlab


class RuntimeDirError(RuntimeError):
    """The directory for the service's socket is missing, not ours, or open to others."""


def code_fingerprint(package_dir: str = PACKAGE_DIR) -> str:
    """A hash of all the package's Python sources (convlab.codeversion's hash, over every role):
    an edit anywhere makes a new service."""
    # here, not at the top: a job that a run started has the run's hash (run_code_fingerprint),
    # and codeversion brings pathlib
    from pathlib import Path

    from convlab.codeversion import fingerprint

    return fingerprint(list(Path(package_dir).rglob("*.py")), root=Path(package_dir))


def run_code_fingerprint() -> str:
    """The code's hash for this process's service: the run's (RUN_CODE_ENV) where a run started
    this job, so that every job of a run, on a cluster node too, finds the service of the code the
    run planned with; else computed here."""
    return os.environ.get(RUN_CODE_ENV) or code_fingerprint()


# Named tuples of collections, not dataclasses or typing's: every cell job reads its identity, and
# those modules (dataclasses imports inspect) would be a good part of the job's start.
class Identity(namedtuple("Identity", "host uid python repo code gpus env")):
    """What processes sharing a service agree on: the host, the uid, the interpreter, the checkout,
    the code (code_fingerprint()), the GPUs ('bus: uuid' lines) and the (name, value) pairs of
    IDENTITY_ENV."""

    __slots__ = ()

    @property
    def key(self) -> str:
        text = repr((self.host, self.uid, self.python, self.repo, self.code, self.gpus, self.env))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def describe(self) -> dict:
        return {"host": self.host, "uid": self.uid, "python": self.python, "repo": self.repo, "code": self.code,
                "gpus": list(self.gpus), "env": dict(self.env)}


def current_identity(python: str | None = None) -> Identity:
    """This process's identity; ``python``: that of a process this one starts with that interpreter."""
    return Identity(
        host=host_name(), uid=os.getuid(), python=python or sys.executable, repo=os.path.dirname(os.path.dirname(PACKAGE_DIR)),
        code=run_code_fingerprint(), gpus=tuple(host_gpus()),
        env=tuple((name, os.environ[name]) for name in IDENTITY_ENV if name in os.environ),
    )


def runtime_dir() -> str:
    """A directory only this user can open (0700): CONVLAB_RUNTIME_DIR, else
    $XDG_RUNTIME_DIR/convlab, else /tmp/convlab-<uid>. Refused if another user owns it or
    others may enter it."""
    chosen = os.environ.get("CONVLAB_RUNTIME_DIR")
    if not chosen:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        chosen = os.path.join(xdg, "convlab") if xdg and os.path.isdir(xdg) else f"/tmp/convlab-{os.getuid()}"
    path = chosen
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as error:
        raise RuntimeDirError(f"cannot make the service directory {path}: {error.strerror}") from error
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise RuntimeDirError(f"{path} is not a directory owned by uid {os.getuid()}; remove it or set "
                              "CONVLAB_RUNTIME_DIR to a directory of your own")
    if info.st_mode & 0o077:
        raise RuntimeDirError(f"{path} is open to other users (mode {oct(info.st_mode & 0o777)}); "
                              f"run: chmod 700 {path}")
    return path


class ServicePaths(namedtuple("ServicePaths", "socket start_lock log info")):
    """A service's files (plain paths): its socket, the lock its first clients start it under, its
    log, and its pid and identity (JSON)."""

    __slots__ = ()

    @classmethod
    def for_key(cls, directory: str, key: str) -> ServicePaths:
        return cls(*(os.path.join(directory, f"{key}{suffix}") for suffix in (".sock", ".start.lock", ".log", ".json")))

    @property
    def key(self) -> str:
        """The identity's key that names the files."""
        return os.path.basename(self.socket)[: -len(".sock")]

    @property
    def folder(self) -> str:
        return os.path.dirname(self.socket)

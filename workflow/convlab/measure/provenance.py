"""Where and with what a row was measured."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from functools import lru_cache

from convlab import __version__
from convlab.codeversion import measurement_version
from convlab.measure.hostinfo import host_name
from convlab.paths import REPO_ROOT


@lru_cache(maxsize=1)
def git_commit() -> str:
    """read_git_commit(), once per process."""
    return read_git_commit()


def read_git_commit() -> str:
    """The pipeline's commit, '+dirty' when tracked files differ. Outside a checkout (a copied
    tree on a GPU node, say) CONVLAB_GIT_COMMIT names it, else 'unknown'."""
    try:
        commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("CONVLAB_GIT_COMMIT", "unknown")


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def host_provenance(backend: str) -> dict[str, str]:
    """The host, the checkout's commit, and the hash of the code that measures on ``backend``."""
    return {"host": host_name(), "git_commit": git_commit(), "convlab_version": __version__,
            "code_version": measurement_version(backend)}

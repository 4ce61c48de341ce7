"""One measurement per device at a time, even when Snakemake runs several jobs at once.

Snakemake's ``resources: gpu=1`` serialises GPU jobs only when the run declares a gpu
limit; this node-local lock makes overlapping timings impossible either way.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


def lock_path(backend: str) -> Path:
    device = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] if backend == "cuda" else "host"
    return Path(tempfile.gettempdir()) / f"convlab-{backend}-{device or 'none'}.lock"


@contextmanager
def exclusive_device(backend: str):
    path = lock_path(backend)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

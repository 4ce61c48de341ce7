"""Importing the cuDNN frontend, or one clear line where it is missing (standard library only)."""

from __future__ import annotations

from typing import Any

from convlab.status import KernelFailure


def import_cudnn() -> Any:
    """The cuDNN frontend module. Where it is missing, each cuDNN cell records one clear
    error line (the other kernels of the sweep still run)."""
    try:
        import cudnn
    except ImportError as error:
        raise KernelFailure(
            "cuDNN frontend not importable: pip install -r envs/requirements-cuda13.txt (or -cuda12.txt), "
            f"which installs nvidia-cudnn-frontend and nvidia-cudnn-cuNN ({error})", "setup"
        ) from error
    return cudnn

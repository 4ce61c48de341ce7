"""Shared memory above the default per-block limit.

CUDA gives a block 48 KiB of shared memory unless its kernel opts in (the function attribute
max_dynamic_shared_size_bytes), up to the GPU's sharedMemPerBlockOptin: 227 KiB on Hopper, 163 KiB
on the A100, 99 KiB on Ada. The cuda backend decides here, before the first launch, so that a tile
too large for this GPU is invalid_config with the limit named rather than a driver error.
"""

from __future__ import annotations

from convlab.status import LaunchConfigError

DEFAULT_SHARED_BYTES = 48 * 1024  # per block without opting in, on every GPU CuPy supports


def kib(nbytes: int) -> str:
    return f"{nbytes / 1024:.4g} KiB"


def shared_limit(needed: int, default: int, optin: int) -> tuple[int, bool]:
    """The per-block limit that a launch needing ``needed`` bytes (static + dynamic) runs under,
    and whether it must opt in above ``default`` for it. Raises LaunchConfigError, naming the
    limit, where the GPU allows less. ``optin`` is 0 on GPUs without the opt-in."""
    if needed <= default:
        return default, False
    allowed, name = (optin, "sharedMemPerBlockOptin") if optin > default else (default, "sharedMemPerBlock")
    if needed <= allowed:
        return allowed, True
    raise LaunchConfigError(f"needs {kib(needed)} of shared memory per block; this GPU allows {kib(allowed)} ({name})",
                            "setup", columns={"smem_limit_bytes": allowed})

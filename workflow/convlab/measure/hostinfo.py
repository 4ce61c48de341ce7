"""What this host has: its CPU and the NVIDIA GPUs its driver lists (standard library only, cheap
file reads: the DAG build, the service's identity and the backends all ask)."""

from __future__ import annotations

import os
import socket

# a plain path, not pathlib's: every cell job reads the GPUs for its service's identity, and
# importing pathlib is a good part of a job's start
NVIDIA_PROC = "/proc/driver/nvidia"


def host_name() -> str:
    """This host's name; inside a Slurm job whose node name is not the host name (several
    slurmd on one host), host/node, so that a row says which node measured it."""
    host = socket.gethostname()
    node = os.environ.get("SLURMD_NODENAME", "")
    return f"{host}/{node}" if node and node != host and node != host.split(".")[0] else host


def cpu_name() -> str:
    """The CPU's model name, e.g. 'AMD EPYC 7B13 64-Core Processor'."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    # here, not at the top: a fallback, and every cell job imports this module for its service's identity
    import platform

    return platform.processor() or platform.machine() or "unknown"


def driver_gpus() -> list[tuple[str, dict[str, str]]]:
    """Each GPU the driver lists, by bus id, with the fields of its /proc information file
    ('Model', 'GPU UUID', ...); empty without a driver."""
    gpus = []
    try:
        folder = os.path.join(NVIDIA_PROC, "gpus")
        for bus in sorted(os.listdir(folder)):
            with open(os.path.join(folder, bus, "information"), errors="replace") as handle:
                text = handle.read()
            fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
            gpus.append((bus, {key.strip(): value.strip() for key, value in fields.items()}))
    except OSError:
        pass
    return gpus


def host_gpus() -> list[str]:
    """The GPUs the driver lists, as 'bus: uuid' lines. Together with CUDA_VISIBLE_DEVICES this
    names the visible GPUs; the workers report the UUIDs CUDA itself resolves."""
    return [f"{bus}: {fields.get('GPU UUID', '')}" for bus, fields in driver_gpus()]

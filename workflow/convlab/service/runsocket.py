"""The service a run's cell jobs ask, named once by the run (standard library only, nothing else).

A cell job finds its service by hashing its identity (convlab.service.identity), which takes
hashlib, the GPU list and more modules than the request itself. The run computes that socket once
for its local jobs and hands it to them in their environment with the facts it holds for: the node,
the user, the interpreter a job starts, the run's code hash and every variable of IDENTITY_ENV. A
job whose own facts match uses the socket as is; any other job (another interpreter under
--use-conda, a cluster node, a changed variable) computes its identity as before.
"""

from __future__ import annotations

import os

# Environment that changes what a worker computes or which code it runs. The service's settings
# (idle and cell timeouts) are not here: they do not change a measurement.
# PYTHONPATH is not here: the interpreter, the checkout and the code's hash already say what runs.
# The thread pools' variables (OMP_NUM_THREADS and the like) are not here: Snakemake sets them for
# each job to its own threads, so that a cell job and a report job would find two services, and the
# cpu worker sets its pools' sizes itself (convlab.backends.cpu.CPU_THREADS: the code's hash names it).
IDENTITY_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "SLURM_JOB_ID", "SLURM_STEP_ID", "CUPY_TF32",
                "CUPY_CACHE_DIR", "CONVLAB_EXTRA_KERNELS", "CONVLAB_GIT_COMMIT")
# The code's hash as the run that starts the jobs computed it once: a cell job would otherwise read
# and hash every module of the package to find its service.
RUN_CODE_ENV = "CONVLAB_RUN_CODE"
SOCKET_ENV = "CONVLAB_RUN_SOCKET"
HOLDS_FOR_ENV = "CONVLAB_RUN_SOCKET_FOR"


def facts(python: str) -> str:
    """What a run's socket holds for, as one line: a process with other facts has another
    identity, so another service."""
    parts = [os.uname().nodename, os.environ.get("SLURMD_NODENAME", ""), str(os.getuid()), python,
             os.environ.get(RUN_CODE_ENV, "")]
    parts += [f"{name}={os.environ[name]}" if name in os.environ else name for name in IDENTITY_ENV]
    return "\x1f".join(parts)


def hand_to_jobs(socket_path: str, python: str) -> None:
    """Name the run's service for the jobs it starts with ``python``."""
    os.environ[SOCKET_ENV] = socket_path
    os.environ[HOLDS_FOR_ENV] = facts(python)


def run_socket(python: str) -> str | None:
    """The socket the run named, where it holds for this process (run by ``python``); else None."""
    path = os.environ.get(SOCKET_ENV)
    if not path or os.environ.get(HOLDS_FOR_ENV) != facts(python):
        return None
    return path

"""A one-node Slurm cluster on this machine, for testing the Slurm executor for real.

Needs root (the config must be at /etc/slurm/slurm.conf: the job step plugin clears
SLURM_* variables inside each job, so a SLURM_CONF elsewhere makes every job fail) and the
Debian packages slurmctld, slurmd, slurm-client and munge. An existing slurm.conf that we
did not write is never touched.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

CONF = Path("/etc/slurm/slurm.conf")
GRES = Path("/etc/slurm/gres.conf")
MARKER = "# written by convlab tests/slurm_cluster.py"
PACKAGES = ("slurmctld", "slurmd", "sinfo", "sbatch", "squeue", "munged")


def unavailable_reason() -> str | None:
    """Why a local Slurm cannot be started here, or None when it can."""
    missing = [p for p in PACKAGES if shutil.which(p) is None and not Path(f"/usr/sbin/{p}").exists()]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing): apt-get install -y "
                "--no-install-recommends slurmctld slurmd slurm-client munge")
    if os.geteuid() != 0:
        return "starting slurmctld/slurmd and writing /etc/slurm/slurm.conf needs root"
    if CONF.exists() and MARKER not in CONF.read_text():
        return f"{CONF} belongs to a real Slurm installation: not touching it"
    return None


def _memory_mb() -> int:
    with open("/proc/meminfo") as handle:
        total_kb = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
    return int(total_kb / 1024 * 0.8)


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class LocalSlurm:
    """Start with start(), stop with stop(). One at a time per machine: test runs that
    overlap wait for each other on a lock file instead of rewriting each other's config."""

    def __init__(self) -> None:
        self.state = Path(tempfile.mkdtemp(prefix="convlab-slurm-"))
        self.cpus = os.cpu_count() or 1
        self.started: list[Path] = []
        self._lock = open(Path(tempfile.gettempdir()) / "convlab-slurm.lock", "a")

    def write_config(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        CONF.parent.mkdir(parents=True, exist_ok=True)
        CONF.write_text(f"""{MARKER}
ClusterName=convlab
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={self.state}/state
SlurmdSpoolDir={self.state}/spool
SlurmctldPidFile={self.state}/slurmctld.pid
SlurmdPidFile={self.state}/slurmd.pid
SlurmctldLogFile={self.state}/log/slurmctld.log
SlurmdLogFile={self.state}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
ReturnToService=2
SchedulerType=sched/backfill
NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={_memory_mb()} Gres=gpu:1 State=UNKNOWN
PartitionName=gpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")
        # No File= line and the node drains; /dev/null stands in for the device.
        GRES.write_text(f"{MARKER}\nAutoDetect=off\nNodeName=localhost Name=gpu File=/dev/null\n")

    def start(self, timeout_s: float = 30.0) -> None:
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        if subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True).returncode == 0:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            raise RuntimeError("a slurmctld is already running on this machine: stop it first")
        self.write_config()
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode != 0:
            subprocess.run(["runuser", "-u", "munge", "--", _sbin("munged")], check=True)
            self.started.append(Path("/run/munge/munged.pid"))
        subprocess.run([_sbin("slurmctld")], check=True)
        self.started.append(self.state / "slurmctld.pid")
        subprocess.run([_sbin("slurmd"), "-N", "localhost"], check=True)
        self.started.append(self.state / "slurmd.pid")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.2)
        raise RuntimeError(f"the local Slurm node did not become idle (sinfo: {state!r}); logs in {self.state}/log")

    def stop(self) -> None:
        for pid_file in reversed(self.started):
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and subprocess.run(
                ["pgrep", "-x", "slurmctld"], capture_output=True).returncode == 0:
            time.sleep(0.1)
        for path in (CONF, GRES):
            if path.exists() and MARKER in path.read_text():
                path.unlink()
        shutil.rmtree(self.state, ignore_errors=True)
        fcntl.flock(self._lock, fcntl.LOCK_UN)

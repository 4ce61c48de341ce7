"""A two-node Slurm cluster on this machine, for testing the Slurm executor for real.

Two slurmd run on this host under the node names of NODES, each on its own port, with its own
`gpu` GRES of a GPU model and a node feature of the same name (/dev/null stands in for the
device): Debian's build allows it, since each slurmd finds its port by its node name.

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
# node name -> the GPU model of its gres and its feature
NODES = {"convlab-a": "h100", "convlab-b": "h200"}
FIRST_PORT = 6821


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
        self.started: list[Path] = []
        self._lock = open(Path(tempfile.gettempdir()) / "convlab-slurm.lock", "a")

    def write_config(self) -> None:
        for sub in ("state", "log", *(f"spool/{name}" for name in NODES)):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        # Each node one CPU and half the memory: the jobs that run at once spread over both
        # nodes, and no more of them run than this machine has cores for.
        nodes = "\n".join(
            f"NodeName={name} NodeAddr=127.0.0.1 Port={FIRST_PORT + index} CPUs=1 "
            f"RealMemory={_memory_mb() // len(NODES)} Gres=gpu:{model}:1 Feature={model} State=UNKNOWN"
            for index, (name, model) in enumerate(NODES.items()))
        CONF.parent.mkdir(parents=True, exist_ok=True)
        CONF.write_text(f"""{MARKER}
ClusterName=convlab
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={self.state}/state
SlurmdSpoolDir={self.state}/spool/%n
SlurmctldPidFile={self.state}/slurmctld.pid
SlurmdPidFile={self.state}/slurmd-%n.pid
SlurmctldLogFile={self.state}/log/slurmctld.log
SlurmdLogFile={self.state}/log/slurmd-%n.log
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
# a node whose slurmd is gone is marked down after 10 s, and its batch jobs requeued
SlurmdTimeout=10
JobRequeue=1
SchedulerType=sched/backfill
{nodes}
PartitionName=gpu Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
""")
        # No File= line and the node drains; /dev/null stands in for the device.
        GRES.write_text(f"{MARKER}\nAutoDetect=off\n" + "".join(
            f"NodeName={name} Name=gpu Type={model} File=/dev/null\n" for name, model in NODES.items()))

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
        for name in NODES:
            self.start_node(name)
        self.wait_idle(timeout_s)

    def start_node(self, name: str) -> None:
        subprocess.run([_sbin("slurmd"), "-N", name], check=True)
        self.started.append(self.state / f"slurmd-{name}.pid")

    def node_states(self) -> dict[str, str]:
        listed = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True).stdout
        return dict(line.split() for line in listed.splitlines() if len(line.split()) == 2)

    def wait_idle(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = self.node_states()
            if set(states) == set(NODES) and set(states.values()) == {"idle"}:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the local Slurm nodes did not become idle (sinfo: {states}); logs in {self.state}/log")

    def kill_node(self, name: str) -> list[str]:
        """The node dies: its slurmd and every process of the jobs running on it are killed at
        once (SIGKILL), as when a machine loses power. Returns the ids of those jobs."""
        jobs = subprocess.run(["squeue", "-h", "-w", name, "-t", "RUNNING", "-o", "%i"], capture_output=True,
                              text=True).stdout.split()
        victims = [int((self.state / f"slurmd-{name}.pid").read_text().strip())]
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                environ = (proc / "environ").read_bytes().split(b"\0")
                command = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            job = next((v.split(b"=", 1)[1].decode() for v in environ if v.startswith(b"SLURM_JOB_ID=")), None)
            if job in jobs or any(command.startswith(f"slurmstepd: [{j}".encode()) for j in jobs):
                victims.append(int(proc.name))
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return jobs

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

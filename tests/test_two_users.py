"""Two Unix users on one host (CI runs as root and makes them with useradd): the device lock works
across users whatever their umask and /tmp's protections, and two users' runs on the cpu backend
both complete without their measurements ever overlapping."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
from workflow_helpers import REPO, RESULTS, TINY, copy_repo

pytestmark = pytest.mark.pipeline
USERS = ("convlab-ann", "convlab-bob")
PROTECTED_REGULAR = Path("/proc/sys/fs/protected_regular")


def can_make_users() -> str | None:
    """Why two users cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root to make two Unix users (CI runs as root)"
    for tool in ("useradd", "runuser"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def interpreter_for_others() -> tuple[str, str]:
    """A Python other users can run with this environment's packages: this one where they can
    reach it, else the system's of the same version with this environment's site-packages."""
    packages = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        reachable = subprocess.run(["runuser", "-u", USERS[1], "--", "test", "-x", candidate]).returncode == 0
        if reachable:
            return candidate, packages
    pytest.fail(f"no Python {sys.version_info[0]}.{sys.version_info[1]} that another user can run")


@pytest.fixture(scope="module")
def users():
    reason = can_make_users()
    if reason:
        pytest.skip(reason)
    for user in USERS:
        if subprocess.run(["id", user], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], check=True)
    previous = PROTECTED_REGULAR.read_text().strip() if PROTECTED_REGULAR.exists() else None
    try:  # the strictest setting, where the kernel allows it to be changed here
        PROTECTED_REGULAR.write_text("2\n")
    except OSError:
        pass
    yield USERS
    if previous is not None:
        try:
            PROTECTED_REGULAR.write_text(previous + "\n")
        except OSError:
            pass


@pytest.fixture(scope="module")
def shared_tmp(users):
    """A sticky, world-writable temporary directory, like /tmp, for both users' locks."""
    path = Path("/tmp") / f"convlab-two-users-{uuid.uuid4().hex[:8]}"
    path.mkdir(mode=0o1777)
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_user(user: str, command: list[str], tmp: Path, cwd: Path | None = None, umask: str = "077",
            extra: dict[str, str] | None = None) -> subprocess.Popen:
    python, packages = interpreter_for_others()
    # the rules' jobs call `python`: the same interpreter under that name
    commands = tmp / "bin"
    if not commands.is_dir():
        commands.mkdir(mode=0o755)
        (commands / "python").symlink_to(python)
    home = Path(f"/home/{user}")
    env = {"PATH": f"{commands}:{Path(python).parent}:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp),
           "PYTHONPATH": os.pathsep.join([str((cwd or REPO) / "workflow"), packages]), "LANG": "C.UTF-8",
           **(extra or {})}
    line = " ".join(["umask", umask, "&&", "exec", *[f"'{part}'" for part in [python if c == "python" else c
                                                                             for c in command]]])
    return subprocess.Popen(["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                             "bash", "-c", line], cwd=cwd or "/", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


HOLD = """
import sys, time
from convlab.devicelock import exclusive_device, lock_path
with exclusive_device(sys.argv[1]) as path:
    print(f"taken {time.time():.6f}", flush=True)
    time.sleep(float(sys.argv[2]))
    print(f"released {time.time():.6f}", flush=True)
"""


def test_a_lock_made_by_one_user_under_umask_077_serialises_another_user(users, shared_tmp):
    key = f"cpu-test-{uuid.uuid4().hex[:6]}"
    first = as_user(users[0], ["python", "-c", HOLD, key, "1.5"], shared_tmp)
    time.sleep(0.5)
    second = as_user(users[1], ["python", "-c", HOLD, key, "0.1"], shared_tmp)
    out_first, err_first = first.communicate(timeout=60)
    out_second, err_second = second.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, err_first + err_second
    lock = shared_tmp / f"convlab-{key}.lock"
    assert lock.stat().st_mode & 0o777 == 0o644  # readable by all although its maker's umask is 077
    assert lock.stat().st_uid != os.geteuid()
    released = float(out_first.split("released ")[1].split()[0])
    taken = float(out_second.split("taken ")[1].split()[0])
    assert taken >= released, (out_first, out_second)


def user_repo(user: str, root: Path) -> Path:
    repo = copy_repo(root / user / "repo")
    subprocess.run(["chown", "-R", f"{user}:{user}", str(root / user)], check=True)
    (root / user).chmod(0o755)
    return repo


def test_two_users_runs_on_the_cpu_both_complete_and_never_overlap(users, shared_tmp):
    root = shared_tmp / "checkouts"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    repos = {user: user_repo(user, root) for user in users}
    runs = {user: as_user(user, ["python", "-m", "snakemake", "--cores", "2", "--configfile", TINY],
                          shared_tmp, cwd=repos[user], umask="077" if user == users[0] else "022")
            for user in users}
    for user, run in runs.items():
        out, err = run.communicate(timeout=900)
        assert run.returncode == 0, f"{user}:\n{(out + err)[-4000:]}"
    spans = []
    for user in users:
        summary = pd.read_csv(repos[user] / RESULTS / "summary.csv")
        assert len(summary) > 0 and (summary["status"] == "ok").any()
        spans += [(start, end, user) for start, end in zip(pd.to_datetime(summary["started_at"]),
                                                           pd.to_datetime(summary["finished_at"]))]
    spans.sort()
    overlapping = [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
    assert not overlapping, overlapping[:3]
    assert {user for *_, user in spans} == set(users)

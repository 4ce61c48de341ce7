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
import yaml
from workflow_helpers import REPO, RESULTS, TINY, copy_repo, one_gpu

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
    # this environment's site-packages, and what PYTHONPATH adds (the device machine's extra wheels)
    packages = os.pathsep.join(dict.fromkeys([*filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)),
                                              sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
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
from convlab.backends.devicelock import exclusive_device, lock_path
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
    assert_both_complete_without_overlap(runs, {user: repos[user] / RESULTS for user in users})


def assert_both_complete_without_overlap(runs: dict[str, subprocess.Popen], results: dict[str, Path]) -> None:
    """Both users' runs completed, and no two of their rows' measurement windows overlap."""
    for user, run in runs.items():
        out, err = run.communicate(timeout=900)
        assert run.returncode == 0, f"{user}:\n{(out + err)[-4000:]}"
    spans = []
    for user, folder in results.items():
        summary = pd.read_csv(folder / "summary.csv")
        assert len(summary) > 0 and (summary["status"] == "ok").any()
        spans += [(start, end, user) for start, end in zip(pd.to_datetime(summary["started_at"]),
                                                           pd.to_datetime(summary["finished_at"]))]
    spans.sort()
    overlapping = [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
    print(f"\n{len(spans)} rows of {len(results)} users: {len(overlapping)} overlapping windows, from "
          f"{spans[0][0]} to {spans[-1][1]}; rows per user "
          f"{ {user: sum(1 for *_, u in spans if u == user) for user in results} }")
    assert not overlapping, overlapping[:3]
    assert {user for *_, user in spans} == set(results)


@pytest.mark.gpu
def test_two_users_runs_on_one_gpu_both_complete_and_never_overlap(users, shared_tmp):
    label = "two-users-gpu"
    config = {"backend": "cuda", "device": label, "source_size": 4096,
              "conv2d": {"sizes": [512, 1024], "strides": [1, 2], "kernels": ["direct", "cudnn"]},
              "kernels": {"direct": {"block": [16]}},
              "tiling": {"enabled": False}, "winograd_layers": {"enabled": False}, "gemm": {"enabled": False}}
    root = shared_tmp / "gpu-checkouts"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    repos = {}
    for user in users:
        repo = copy_repo(root / user / "repo")
        for picture in [*(REPO / "data").glob("*.png"), *(REPO / "data").glob("*.json")]:  # no ffmpeg on a device: pictures, records
            (repo / "data").mkdir(exist_ok=True)
            shutil.copy2(picture, repo / "data" / picture.name)
        (repo / "config" / "two-users-gpu.yaml").write_text(yaml.safe_dump(config))
        subprocess.run(["chown", "-R", f"{user}:{user}", str(root / user)], check=True)
        (root / user).chmod(0o755)
        repos[user] = repo
    runs = {user: as_user(user, ["python", "-m", "snakemake", "--cores", "2", "--configfile",
                                 "config/two-users-gpu.yaml", "--", f"results/{label}/summary.csv"],
                          shared_tmp, cwd=repos[user], umask="077" if user == users[0] else "022", extra=one_gpu())
            for user in users}
    assert_both_complete_without_overlap(runs, {user: repos[user] / "results" / label for user in users})


PROBE = """
import json, os, socket, sys
directory, sock, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
for what, attempt in (("list", lambda: os.listdir(directory)),
                      ("connect", lambda: socket.socket(socket.AF_UNIX).connect(sock)),
                      ("read", lambda: open(sock.replace(".sock", ".json")).read()),
                      ("door", lambda: open(sock.replace(".sock", ".door")).read())):
    try:
        attempt()
        print(f"{what}: allowed")
    except PermissionError:
        print(f"{what}: refused")
# the port of the door is on the loopback address, open to every user: without the secret nothing is taken
# (no single quote in this text: the shell line that runs it as the other user quotes it so)
with socket.create_connection(("127.0.0.1", port), timeout=20) as door:
    door.sendall(b"a-guess\\n" + json.dumps({"op": "stop"}).encode() + b"\\n")
    print("at the door:", door.makefile().readline().strip())
"""


def test_no_user_can_reach_another_users_service(users, shared_tmp):
    """User A's service lives in A's 0700 runtime directory: user B can neither list it, read its
    identity or its door's secret, connect to its socket (so B can send it no work and cannot stop
    it), get anything taken at its door's port, nor point CONVLAB_RUNTIME_DIR at it."""
    owner, other = users
    root = shared_tmp / "services"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    repo = user_repo(owner, root)
    directory = Path(f"/tmp/convlab-{int(subprocess.run(['id', '-u', owner], capture_output=True, text=True).stdout)}")
    # the owner's services of the tests before may still idle there: this test's is the new one
    before = set(directory.glob("*.sock"))
    service = as_user(owner, ["python", "-m", "convlab", "serve", "--idle-timeout", "60"], shared_tmp, cwd=repo)
    try:

        def started() -> list[Path]:  # its socket, once its door file is written beside it too
            return [path for path in set(directory.glob("*.sock")) - before
                    if Path(str(path).replace(".sock", ".door")).exists()]

        deadline = time.monotonic() + 60
        while not started() and time.monotonic() < deadline and service.poll() is None:
            time.sleep(0.2)
        sockets = started()
        assert sockets, service.communicate(timeout=5) if service.poll() is not None else "no socket in 60 s"
        assert directory.stat().st_mode & 0o777 == 0o700

        port = Path(str(sockets[0]).replace(".sock", ".door")).read_text().split()[0]
        probe = as_user(other, ["python", "-c", PROBE, str(directory), str(sockets[0]), port], shared_tmp)
        out, err = probe.communicate(timeout=60)
        assert out.split("\n")[:5] == ["list: refused", "connect: refused", "read: refused", "door: refused",
                                       "at the door: refused"], out + err
        hijack = as_user(other, ["python", "-m", "convlab", "serve", "--stop"], shared_tmp, cwd=repo,
                         extra={"CONVLAB_RUNTIME_DIR": str(directory)})
        out, err = hijack.communicate(timeout=60)
        assert "owned by uid" in out + err, out + err
        assert service.poll() is None, "the other user stopped the service"
        stop = as_user(owner, ["python", "-m", "convlab", "serve", "--stop"], shared_tmp, cwd=repo)
        out, err = stop.communicate(timeout=60)
        assert "stopped" in out, out + err
        service.wait(timeout=30)
    finally:
        if service.poll() is None:
            service.kill()

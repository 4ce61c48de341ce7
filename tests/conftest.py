import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
# The tests start thousands of Python processes (Snakemake, its jobs, the service's workers), each in
# a checkout of its own: where the environment forbids bytecode caches (containers often set this),
# every one of them compiles the package again (here 0.55 s against 0.30 s for the run plan's imports).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from cpu_helpers import SIZE  # noqa: E402
from service_helpers import ServiceSandbox  # noqa: E402
from session_share import first_worker, made_once, session_folder  # noqa: E402
from workflow_helpers import (  # noqa: E402
    INSTALL,
    RESULTS,
    TINY,
    FinishedRun,
    copy_finished_run,
    copy_repo,
    shell,
    snakemake,
    snakemake_env,
)

from convlab.backends import get_backend, gpu_visible  # noqa: E402
from convlab.plan.problemcache import PROBLEMS  # noqa: E402

HAS_GPU = gpu_visible()
# Device folders the docs' compare names (tests/test_documented_commands.py): fresh_runs copies its
# first run's summary into the first, its second run's into the second.
EXAMPLE_DEVICES = ("h100-80gb-hbm3", "h200")


# The slow tier's longest files, run first: .ci/run spreads the tier over worker processes a file at
# a time (pytest-xdist's --dist loadfile, --no-loadscope-reorder: files are handed out in this
# order), and a long file handed out last would make the whole tier wait for it alone.
LONGEST_FILES = ("test_slurm.py", "test_documented_commands.py")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: LONGEST_FILES.index(item.path.name) if item.path.name in LONGEST_FILES
               else len(LONGEST_FILES))
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy here: GPU tests run on the device machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"convlab: CUDA GPU visible: {HAS_GPU}"


@pytest.fixture(scope="session")
def backend():
    """The cuda backend, for the GPU tests (CuPy is loaded when a test first asks for it)."""
    return get_backend("cuda")


def finished_record(repo: Path, done: subprocess.CompletedProcess) -> dict:
    return {"repo": str(repo), "args": done.args, "returncode": done.returncode, "stdout": done.stdout,
            "stderr": done.stderr}


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> FinishedRun:
    """The tiny cpu grid run from nothing with --cores 2, once for the whole session: the slow tier's
    tests read it, and each test that changes a checkout works on a copy (copy_finished_run)."""
    def make(folder: Path) -> dict:
        repo = copy_repo(folder / "repo")
        return finished_record(repo, snakemake(repo, 2, timeout=900))

    made = made_once(session_folder(tmp_path_factory), "tiny-run", make)
    return FinishedRun(Path(made["repo"]), subprocess.CompletedProcess(
        made["args"], made["returncode"], made["stdout"], made["stderr"]))


@pytest.fixture(scope="session")
def tiny_report(tiny_run: FinishedRun, tmp_path_factory) -> Path:
    """A copy of the tiny run with `snakemake --report results/report.html` made in it; the
    checkout's path (the report read only)."""
    def make(folder: Path) -> dict:
        repo = copy_finished_run(tiny_run.repo, folder / "repo")
        snakemake(repo, 1, "--report", "results/report.html", timeout=900)
        return {"repo": str(repo)}

    return Path(made_once(session_folder(tmp_path_factory), "tiny-report", make)["repo"])


def install_fresh(folder: Path) -> dict:
    """fresh_install's work: a copy of the checkout in ``folder``, set up with the README's install
    line; the checkout and the environment of a shell in which its venv is activated."""
    repo = copy_repo(folder / "repo")
    env = snakemake_env(repo)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(entry for entry in env["PATH"].split(os.pathsep)
                                  if Path(entry or ".").resolve() != Path(sys.executable).parent.resolve())
    assert INSTALL in (REPO / "README.md").read_text(encoding="utf-8")
    installed = shell(INSTALL, repo, env, timeout=1800)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    venv = repo / ".venv"
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    return {"repo": str(repo), "env": env}


def run_twice(repo: Path, env: dict[str, str]) -> str:
    """fresh_runs' work in fresh_install's checkout; the first run's id."""
    run = f"snakemake --cores 2 --configfile {TINY}"
    for label, edit in zip(EXAMPLE_DEVICES, (False, True)):
        if edit:
            # its launch description: the cpu backend runs a kernel's twin, never its .cu
            with open(repo / "kernels" / "direct.yaml", "a") as description:
                description.write("# an edit that changes no launch\n")
        done = shell(run, repo, env)
        assert done.returncode == 0, done.stderr[-4000:]
        (repo / "results" / label).mkdir()
        shutil.copy(repo / RESULTS / "summary.csv", repo / "results" / label / "summary.csv")
    with sqlite3.connect(repo / RESULTS / "history.sqlite") as database:
        (first_run,) = database.execute("SELECT run_id FROM runs WHERE rows_added > 0 ORDER BY rowid").fetchone()
    return first_run


def installed_once(root: Path) -> tuple[Path, dict[str, str]]:
    made = made_once(root, "documented", install_fresh)
    return Path(made["repo"]), made["env"]


def runs_once(root: Path) -> tuple[Path, dict[str, str], str]:
    repo, env = installed_once(root)
    made = made_once(root, "documented-runs", lambda _: {"first_run": run_twice(repo, env)})
    return repo, env, made["first_run"]


@pytest.fixture(scope="session", autouse=True)
def fresh_ahead(request, tmp_path_factory) -> Iterator[None]:
    """fresh_install's install, then fresh_runs' two runs where a selected test needs them, started on
    a thread as the session begins (by one process where pytest-xdist runs several): they keep about
    one core busy, which the tests before theirs leave free (a run of the workflow at --cores 1 uses
    about one of the two). The fixtures wait for what the thread makes."""
    needed = {name for item in request.session.items for name in ("fresh_install", "fresh_runs")
              if name in item.fixturenames}
    if not needed or not first_worker():
        yield
        return
    with ThreadPoolExecutor(1) as pool:
        # the session's folder found here, on the main thread (session_folder says why)
        pool.submit(runs_once if "fresh_runs" in needed else installed_once, session_folder(tmp_path_factory))
        yield


@pytest.fixture(scope="session")
def fresh_install(fresh_ahead, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the checkout, set up with the README's install line in a venv of its own, and the
    environment of a shell in which that venv is activated: no PYTHONPATH, nothing of the venv
    that runs the tests on PATH. Once for the session: the documented commands and the quick
    start's report use it."""
    return installed_once(session_folder(tmp_path_factory))


@pytest.fixture(scope="session")
def fresh_runs(fresh_install, tmp_path_factory) -> tuple[Path, dict[str, str], str]:
    """Two runs of the tiny cpu grid by the fresh venv's snakemake in fresh_install's checkout (the
    second re-measures one kernel's cells, so that the history holds @previous, and the two
    summaries differ); the first run's id."""
    return runs_once(session_folder(tmp_path_factory))


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """The tracked pipeline files in a temporary directory (a git checkout of its own)."""
    target = copy_repo(tmp_path / "repo")
    (target / "data").mkdir()
    (target / "results").mkdir()
    return target


@pytest.fixture
def image_path(tmp_path: Path) -> Path:
    """A random SIZE x SIZE colour picture, the input of cpu_helpers.cell_for's cells."""
    rng = np.random.default_rng(1)
    path = tmp_path / f"input_{SIZE}.png"
    cv2.imwrite(str(path), rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8))
    return path


@pytest.fixture
def kept():
    """The process's problem cache on, as a service worker has it; off and empty again after."""
    PROBLEMS.clear()
    PROBLEMS.capacity = 4
    yield PROBLEMS
    PROBLEMS.clear()
    PROBLEMS.capacity = 0


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[ServiceSandbox]:
    box = ServiceSandbox(tmp_path, "cpu")
    yield box
    box.close()

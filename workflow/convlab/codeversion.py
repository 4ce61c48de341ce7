"""Which Python code produced a result, as a short hash (standard library only).

Every module of the package belongs to exactly one role below (a test holds that). A rule's
params carry the hash of the roles it depends on, so Snakemake re-runs exactly the jobs whose
code changed: an edit to the runner re-measures every cell of that backend, an edit to a figure
re-renders the report only. Kernels' own files (their .cu and .yaml, a library wrapper, a cpu
twin) are inputs of their cells already, so they are not here.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # workflow/convlab

# Paths relative to the package. A folder ("plan/") takes its modules, save those that another
# role names one by one; a role names a module by file where it differs from its folder's role.
ROLES: dict[str, tuple[str, ...]] = {
    # turns a cell's settings into a row, on either backend
    "measurement": ("status.py", "codeversion.py", "problem/", "measure/", "measure/observers/", "measure/row.py",
                    "plan/", "plan/families/", "run/", "backends/", "pictures/loading.py"),
    "backend:cuda": ("backends/cuda.py", "backends/libraries.py", "backends/librarykernel.py",
                     "backends/cudnnimport.py", "backends/cudagraph.py", "backends/sharedmem.py"),
    "backend:cpu": ("backends/cpu.py", "backends/cpu_twins/__init__.py"),
    # one kernel's wrapper or twin: a file of that kernel (KernelSpec.files)
    "kernel": ("backends/cudnn_conv.py", "backends/fft_conv.py", "backends/ndimage_conv.py", "backends/cpu_twins/"),
    "data": ("pictures/source.py", "pictures/header.py"),
    "summary": ("report/aggregate.py", "measure/row.py", "codeversion.py"),
    # the results database, the verdicts, the history listing and the comparison rule
    "history": ("history/",),
    "report": ("report/",),
    "gallery": ("report/gallery.py",),
    # the benchmark's own measurements (the copy kernels, the targets) around the cells' code
    "benchmark": ("bench/",),
    # runs or serves the code above without changing what it computes; the pipeline benchmark
    # times whole Snakemake runs and measures nothing of the benchmark rule's
    "harness": ("__init__.py", "__main__.py", "atomicfile.py", "paths.py", "console.py", "app/", "app/handlers/",
                "service/", "snakefile/", "pictures/__init__.py", "backends/sharedcount.py", "run/nsightprofile.py",
                "plan/config.py", "plan/devicelabel.py", "plan/runconfig.py", "run/inprocess.py", "run/preview.py",
                "backends/choice.py", "backends/compileblock.py", "savedfiles.py", "pairs/",
                "backends/devicelock.py", "bench/pipeline.py", "bench/pipelinefigures.py", "machinefaults.py",
                "plan/runargs.py"),
}
# Roles that share a module on purpose: the row's format and this hash belong to both.
SHARED = {"measure/row.py", "codeversion.py"}


def _named_by_file() -> dict[str, set[str]]:
    """Each module that a role names one by one, with the roles that name it."""
    named: dict[str, set[str]] = {}
    for role, entries in ROLES.items():
        for entry in entries:
            if not entry.endswith("/"):
                named.setdefault(entry, set()).add(role)
    return named


def role_files(role: str) -> list[Path]:
    """The modules of one role, sorted."""
    named = _named_by_file()
    files: set[Path] = set()
    for entry in ROLES[role]:
        if not entry.endswith("/"):
            files.add(PACKAGE_DIR / entry)
            continue
        for path in (PACKAGE_DIR / entry).glob("*.py"):
            owners = named.get(path.relative_to(PACKAGE_DIR).as_posix(), set())
            if not owners or role in owners:
                files.add(path)
    return sorted(files)


def fingerprint(files: list[Path], root: Path = PACKAGE_DIR) -> str:
    """A hash of the files' names (relative to ``root``) and bytes. A missing file hashes as
    missing, so deleting a module changes the hash too."""
    return fingerprint_contents(file_contents(files, root))


def file_contents(files: list[Path], root: Path = PACKAGE_DIR) -> list[tuple[str, bytes | None]]:
    """Each file's name relative to ``root`` and its bytes (None: missing), in the order the
    fingerprint takes them."""
    return [(str(path.relative_to(root)), path.read_bytes() if path.is_file() else None) for path in sorted(files)]


def fingerprint_contents(contents: list[tuple[str, bytes | None]]) -> str:
    """fingerprint() of files already read: so that a hash kept beside the bytes it was made from
    is the hash of exactly those bytes."""
    digest = hashlib.sha256()
    for name, data in contents:
        digest.update(name.encode() + b"\0")
        digest.update(b"<missing>" if data is None else data)
        digest.update(b"\0")
    return digest.hexdigest()[:12]


@cache
def code_version(*roles: str) -> str:
    """The hash of the modules of ``roles``, once per process: a long-lived process reports the
    code it loaded, not an edit made on disk since."""
    return fingerprint(sorted({path for role in roles for path in role_files(role)}))


def measurement_version(backend: str) -> str:
    """The code that measures a cell on ``backend`` (its kernel's own files aside)."""
    return code_version("measurement", f"backend:{backend}")


def summary_version() -> str:
    return code_version("summary")


def history_version() -> str:
    return code_version("history", "summary")


def report_version() -> str:
    # the report reads its summaries, the results database and the comparison rule through history's modules
    return code_version("report", "history")


def gallery_version(backend: str) -> str:
    return code_version("gallery", "measurement", f"backend:{backend}")


def benchmark_version() -> str:
    """The benchmark runs on cuda only: its own code and the code that measures its cells."""
    return code_version("benchmark", "measurement", "backend:cuda")


def data_version() -> str:
    return code_version("data")

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

# Paths relative to the package; a trailing "/" takes the folder's modules.
ROLES: dict[str, tuple[str, ...]] = {
    # turns a cell's settings into a row, on either backend
    "measurement": ("runner.py", "steps.py", "operands.py", "launch.py", "registry.py", "grid.py", "cell.py",
                    "overrides.py", "pictures.py", "families/",
                    "fftsize.py", "status.py", "row.py", "celljob.py", "codeversion.py", "measure/",
                    "backends/__init__.py", "backends/base.py"),
    "backend:cuda": ("backends/cuda.py", "backends/libraries.py", "backends/librarykernel.py", "backends/cudnnimport.py", "backends/cudagraph.py", "backends/sharedmem.py"),
    "backend:cpu": ("backends/cpu.py", "cpu_twins/__init__.py"),
    # one kernel's wrapper or twin: a file of that kernel (KernelSpec.files)
    "kernel": ("backends/cudnn_conv.py", "backends/fft_conv.py", "backends/ndimage_conv.py", "cpu_twins/"),
    "data": ("data.py",),
    "summary": ("aggregate.py", "row.py", "codeversion.py"),
    # the results database, the verdicts and the history listing
    "history": ("history/",),
    "report": ("report/", "compare.py"),
    "gallery": ("gallery.py",),
    # the benchmark's own measurements (the copy kernels, the targets) around the cells' code
    "benchmark": ("bench.py", "benchgemm.py"),
    # runs or serves the code above without changing what it computes
    "harness": ("__init__.py", "__main__.py", "cli.py", "runargs.py", "config.py", "devicelock.py",
                "inprocess.py", "sharedcount.py", "atomicfile.py", "damaged.py", "runlock.py", "devicelabel.py", "clusternodes.py", "hostinfo.py", "backends/choice.py", "service/"),
}
# Roles that share a module on purpose: the row's format and this hash belong to both.
SHARED = {"row.py", "codeversion.py"}


def role_files(role: str) -> list[Path]:
    """The modules of one role, sorted."""
    files: set[Path] = set()
    for entry in ROLES[role]:
        if entry.endswith("/"):
            files.update(p for p in (PACKAGE_DIR / entry).glob("*.py"))
        else:
            files.add(PACKAGE_DIR / entry)
    if role == "kernel":  # a folder of twins shares its package marker with the cpu backend
        files.discard(PACKAGE_DIR / "cpu_twins" / "__init__.py")
    return sorted(files)


def fingerprint(files: list[Path], root: Path = PACKAGE_DIR) -> str:
    """A hash of the files' names (relative to ``root``) and bytes. A missing file hashes as
    missing, so deleting a module changes the hash too."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"<missing>")
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
    return code_version("report")


def gallery_version(backend: str) -> str:
    return code_version("gallery", "measurement", f"backend:{backend}")


def benchmark_version() -> str:
    """The benchmark runs on cuda only: its own code and the code that measures its cells."""
    return code_version("benchmark", "measurement", "backend:cuda")


def data_version() -> str:
    return code_version("data")

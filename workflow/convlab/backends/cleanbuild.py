"""Source modules compiled in a process of their own, kept by what they were made from, and named by
the machine code they hold.

NVRTC's machine code for one source and one set of options depends on what ran before it in the
same process. In a measurement worker that had built a cuDNN TF32 plan (cuDNN compiles its
runtime engines with NVRTC in the process that asks for them), im2col_gemm.cu compiled to other
machine code than in a fresh process (gemm_basic 4,736 bytes of SASS against 4,352, and 1.3 to
1.5 times slower on an H100 and an H200). A kernel version first measured before such a plan and
its edit measured after it were then called SLOWER for an added comment, side by side in one
process. Compiled here instead, in a process that runs NVRTC alone (convlab.backends.nvrtcbuild),
the same source and options give the same machine code whatever the worker did before, and each
row names that code by its hash (``module_hash``), so that a pair can prove it runs what was
measured.

The store: <store>/<key>.cubin, ``key`` a hash of what decides the machine code (the code, the
options, the architecture, NVRTC's version). A stored cubin that the driver refuses is compiled
again (convlab.backends.cuda).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from convlab.backends.sourcemodule import SourceModule

STORE_ENV = "CONVLAB_MODULE_STORE"
BUILD_TIMEOUT_S = 900.0
# Held while a process compiles into the store: the run's first build (convlab.backends.storebuild)
# and a worker's compile-ahead then never compile the same module twice.
BUILD_LOCK = ".build.lock"


@dataclass(frozen=True)
class Built:
    """A module's machine code on disk, and its hash (the row's ``module_hash``)."""

    path: Path
    binary_hash: str


def store_dir() -> Path:
    """Where compiled modules are kept: CONVLAB_MODULE_STORE, else beside CuPy's own kernel cache."""
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV]).expanduser()
    cupy_cache = Path(os.environ.get("CUPY_CACHE_DIR") or "~/.cupy/kernel_cache").expanduser()
    return cupy_cache.parent / "convlab_modules"


def module_key(module: SourceModule, arch: str, compiler: str) -> str:
    """The store's name for a module: a hash of everything that decides its machine code."""
    text = json.dumps([module.code, list(module.options), arch, compiler], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def binary_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _in_store(candidates: Sequence[tuple[SourceModule, Path]],
              again: frozenset[SourceModule]) -> tuple[dict[SourceModule, Built], list[tuple[SourceModule, Path]]]:
    """The candidates (each with its store path) whose machine code the store holds, and the others."""
    built: dict[SourceModule, Built] = {}
    wanted: list[tuple[SourceModule, Path]] = []
    for module, path in candidates:
        if path.is_file() and module not in again:
            built[module] = Built(path, binary_hash(path))
        else:
            wanted.append((module, path))
    return built, wanted


def build_modules(modules: Sequence[SourceModule], arch: str, compiler: str, threads: int | None = None,
                  again: frozenset[SourceModule] = frozenset(),
                  started: CompilerProcess | None = None) -> tuple[dict[SourceModule, Built], dict[SourceModule, str]]:
    """Each module's machine code, from the store or compiled now in one compiler process (``started``
    ahead, or started here; at most ``threads`` compiles at once); and the modules that did not compile,
    with NVRTC's message. ``again``: modules whose stored code must be compiled anew (the driver refused
    it). ``started`` is ended either way."""
    try:
        return _build_modules(modules, arch, compiler, threads, again, started)
    finally:
        if started is not None:
            started.close()


def _build_modules(modules: Sequence[SourceModule], arch: str, compiler: str, threads: int | None,
                   again: frozenset[SourceModule],
                   started: CompilerProcess | None) -> tuple[dict[SourceModule, Built], dict[SourceModule, str]]:
    store = store_dir()
    built, wanted = _in_store([(module, store / f"{module_key(module, arch, compiler)}.cubin")
                               for module in dict.fromkeys(modules)], again)
    if not wanted:
        return built, {}
    try:
        store.mkdir(parents=True, exist_ok=True)
        lock = open(store / BUILD_LOCK, "a")
    except OSError as error:
        why = (f"the module store {store} cannot be written ({error.strerror or error}): set {STORE_ENV} to a "
               "writable folder")
        return built, dict.fromkeys((module for module, _ in wanted), why)
    with lock:
        # one build at a time: what another process compiled while this one waited is in the store now
        fcntl.flock(lock, fcntl.LOCK_EX)
        meanwhile, wanted = _in_store(wanted, again)
        built.update(meanwhile)
        if not wanted:
            return built, {}
        results, problem = _run_compiler(wanted, arch, threads, started)
    failed: dict[SourceModule, str] = {}
    for index, (module, path) in enumerate(wanted):
        if str(index) in results.get("built", {}) and path.is_file():
            built[module] = Built(path, binary_hash(path))
        else:
            failed[module] = results.get("failed", {}).get(str(index)) or problem or "the compiler process gave nothing"
    return built, failed


def _run_compiler(wanted: list[tuple[SourceModule, Path]], arch: str, threads: int | None,
                  compiler: CompilerProcess | None = None) -> tuple[dict, str | None]:
    """The compiler process (``compiler``, started ahead, or one started now) on ``wanted``; its result, or {}
    and why it gave none."""
    compiler = compiler or CompilerProcess()
    return compiler.run({"arch": arch, "threads": threads,
                         "modules": [{"code": module.code, "options": list(module.options), "path": str(path)}
                                     for module, path in wanted]})


class CompilerProcess:
    """The compiler process (convlab.backends.nvrtcbuild), started before its request is known, so that it
    imports NVRTC's binding while its caller works the request out. It takes one request (run); close() ends
    one that got none."""

    def __init__(self) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="convlab-build-")
        self.result = Path(self._scratch.name) / "result.json"
        self.errors = Path(self._scratch.name) / "stderr.txt"
        # the compiler imports what this process imports, from where this process imports it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry)}
        self.problem: str | None = None
        try:
            with open(self.errors, "w") as errors:
                self.process: subprocess.Popen | None = subprocess.Popen(
                    [sys.executable, "-m", "convlab.backends.nvrtcbuild", "-", str(self.result)],
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors, text=True, env=env)
        except OSError as error:
            self.process, self.problem = None, f"the compiler process did not run: {error}"

    def run(self, request: dict) -> tuple[dict, str | None]:
        """The compiler's result for ``request``, or {} and why it gave none."""
        try:
            if self.process is None:
                return {}, self.problem
            try:
                self.process.communicate(json.dumps(request), timeout=BUILD_TIMEOUT_S)
            except (OSError, subprocess.SubprocessError) as error:
                self.process.kill()
                self.process.wait()
                return {}, f"the compiler process did not run: {error}"
            if self.process.returncode != 0 or not self.result.is_file():
                tail = " ".join(self.errors.read_text(errors="replace").split()[-60:])
                return {}, f"the compiler process failed: {tail or f'exit code {self.process.returncode}'}"
            return json.loads(self.result.read_text()), None
        finally:
            self._scratch.cleanup()

    def close(self) -> None:
        """End it where it got no request (an empty one, which it ends on), and let go of its files."""
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.communicate("", timeout=60)
            except (OSError, subprocess.SubprocessError):
                self.process.kill()
                self.process.wait()
        self._scratch.cleanup()

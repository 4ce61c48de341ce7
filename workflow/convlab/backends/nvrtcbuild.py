"""The compiler process: source modules compiled to machine code by NVRTC in a process that has
run nothing else (convlab.backends.cleanbuild starts it).

    python -m convlab.backends.nvrtcbuild REQUEST.json RESULT.json

REQUEST holds the modules (code, options, the file each cubin goes to), the architecture and the
threads; RESULT gets, per module, its cubin's path or its compile error. REQUEST ``-`` reads it from
standard input: a process started before its request is known imports NVRTC's binding meanwhile.

The compiles run in processes forked from this one once it has imported the binding (``threads``
of them, the longest sources first, each taking the next module as it finishes one): on a
16-core H200 host 160 modules took 4.5-5.4 s so, against 6.1-6.6 s on as many threads of one
process, whose NVRTC calls scale worse. Each cubin is written beside its path and renamed over it,
so that no reader sees half of one.

It imports CuPy's compiler and nothing of the GPU's: no CUDA context, no cuDNN, no other kernel,
which is the point of a process of its own.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import sys
import tempfile
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from convlab.backends.compileahead import usable_cores

# What CuPy's RawModule adds to a module's options (CuPy 13, 14): kept, so that a module compiled here
# is the machine code a RawModule of its code and options would have been
CUPY_RAWMODULE_OPTIONS = ("-ftz=true",)


def _compile_one(entry: dict[str, Any], arch: str) -> str:
    """Compile one module to its cubin file; its path, or raise with NVRTC's log."""
    from cupy.cuda import compiler

    binary, _ = compiler.compile_using_nvrtc(entry["code"], tuple(entry["options"]) + CUPY_RAWMODULE_OPTIONS,
                                             arch=arch)
    target = Path(entry["path"])
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(handle, "wb") as stream:
        stream.write(binary if isinstance(binary, bytes) else binary.encode())
    os.replace(scratch, target)
    return str(target)


def build(request: dict[str, Any]) -> dict[str, Any]:
    """Every module of the request compiled: {"built": {index: path}, "failed": {index: error}}."""
    global _REQUEST
    entries = request["modules"]
    processes = max(1, min(int(request.get("threads") or usable_cores()), len(entries)))
    # the longest sources first (they take the longest to compile), so that none is left to end alone
    order = sorted(range(len(entries)), key=lambda index: -len(entries[index]["code"]))
    _REQUEST = request  # what each forked process compiles from: only an index goes to it
    try:
        if processes == 1:
            outcomes = list(map(_compile_index, order))
        else:
            with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
                futures = [pool.submit(_compile_index, index) for index in order]
                outcomes = [_outcome(index, future) for index, future in zip(order, futures)]
    finally:
        _REQUEST = None
    return {"built": {str(index): path for index, path, _ in outcomes if path is not None},
            "failed": {str(index): error for index, path, error in outcomes if path is None}}


_REQUEST: dict[str, Any] | None = None


def _outcome(index: int, future: Future) -> tuple[int, str | None, str]:
    """A forked compile's outcome; a process that died compiling (NVRTC's own crash) fails its module, and the
    modules it had not reached, with why."""
    try:
        return future.result()
    except BrokenProcessPool as error:
        return index, None, f"the compiler process died compiling: {error}"


def _compile_index(index: int) -> tuple[int, str | None, str]:
    """Module ``index`` of the request compiled: (index, its cubin's path, "") or (index, None, NVRTC's log)."""
    assert _REQUEST is not None
    try:
        return index, _compile_one(_REQUEST["modules"][index], _REQUEST["arch"]), ""
    except Exception as error:  # NVRTC's log, for the cell that needs this module to report
        return index, None, " ".join(str(error).split()) or type(error).__name__


def main(argv: list[str]) -> int:
    request_path, result_path = argv
    # before the request (which a process started ahead waits for) and before the forks, which then
    # find it imported
    try:
        importlib.import_module("cupy.cuda.compiler")
    except ImportError:
        pass  # each module's compile then fails, and its error says why
    text = sys.stdin.read() if request_path == "-" else Path(request_path).read_text()
    if not text.strip():
        return 0  # started ahead, and not needed after all
    result = build(json.loads(text))
    Path(result_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

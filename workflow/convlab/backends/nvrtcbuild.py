"""The compiler process: source modules compiled to machine code by NVRTC in a process that has
run nothing else (convlab.backends.cleanbuild starts it).

    python -m convlab.backends.nvrtcbuild REQUEST.json RESULT.json

REQUEST holds the modules (code, options, the file each cubin goes to), the architecture and the
threads; RESULT gets, per module, its cubin's path or its compile error. The compiles run on a
thread pool (convlab.backends.compileahead): NVRTC releases the GIL and compiles programs on
several threads independently. Each cubin is written beside its path and renamed over it, so that
no reader sees half of one.

It imports CuPy's compiler and nothing of the GPU's: no CUDA context, no cuDNN, no other kernel,
which is the point of a process of its own.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from convlab.backends.compileahead import compile_ahead

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
    entries = request["modules"]
    built: dict[int, str] = {}
    errors: dict[int, str] = {}

    def compile_index(index: int) -> str:
        try:
            return _compile_one(entries[index], request["arch"])
        except Exception as error:  # NVRTC's log, for the cell that needs this module to report
            errors[index] = " ".join(str(error).split()) or type(error).__name__
            raise

    compile_ahead({index: [] for index in range(len(entries))}, built, compile_index, request.get("threads"))
    return {"built": {str(index): path for index, path in built.items()},
            "failed": {str(index): error for index, error in errors.items()}}


def main(argv: list[str]) -> int:
    request_path, result_path = argv
    result = build(json.loads(Path(request_path).read_text()))
    Path(result_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

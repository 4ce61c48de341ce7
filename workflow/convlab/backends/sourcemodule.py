"""A source kernel's module as NVRTC compiles it: its code and options for one cell, and the distinct
modules of a grid's cells.

The options carry the problem's -D defines (so that accumulators can live in registers) and the
description's, so nearly every problem is a module of its own. One function names a cell's module
for both the cell's setup (convlab.backends.cuda) and compiling ahead (compile-kernels), so that
what is compiled ahead is exactly what the cells will ask for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from convlab.plan.cell import Cell
from convlab.plan.families import family
from convlab.plan.launch import problem_names
from convlab.plan.registry import KernelSpec, get_kernel

STANDARD = "--std=c++17"


class SourceModule(NamedTuple):
    """What NVRTC compiles: the source text and the options (its key in every module cache)."""

    code: str
    options: tuple[str, ...]


def source_module(spec: KernelSpec, tunables: dict[str, Any], problem: Any,
                  read: Callable[[Path], str] = Path.read_text) -> SourceModule:
    """The module a cell of ``spec`` (a kernel with a ``source``) compiles. ``read`` reads the
    source file (a grid's modules read each file once)."""
    if spec.source is None:
        raise ValueError(f"kernel {spec.name!r} has no source file")
    defines = {**problem.defines(), **spec.evaluated_defines(problem_names(problem, tunables))}
    return SourceModule(read(spec.source), (STANDARD, *(f"-D{key}={value}" for key, value in defines.items())))


def grid_modules(cells: Iterable[Cell],
                 kernel_of: Callable[[str], KernelSpec] = get_kernel) -> dict[SourceModule, list[str]]:
    """The distinct modules the cells will compile, each with the kernels that use it. Library
    kernels compile nothing, and a cell refused before its setup (a problem its kernel has no code
    for, an unmet ``requires``) compiles nothing either. ``kernel_of``: the version of a cell's
    kernel it runs (default: the registered one)."""
    texts: dict[Path, str] = {}

    def read(path: Path) -> str:
        if path not in texts:
            texts[path] = path.read_text()
        return texts[path]

    modules: dict[SourceModule, list[str]] = {}
    for cell in cells:
        spec = kernel_of(cell.kernel)
        if spec.library or spec.source is None or spec.unsupported_reason(cell.stride, cell.filter_size):
            continue
        problem = family(cell.experiment).problem(cell)
        if spec.unmet(problem_names(problem, cell.tunables)):
            continue
        kernels = modules.setdefault(source_module(spec, cell.tunables, problem, read), [])
        if cell.kernel not in kernels:
            kernels.append(cell.kernel)
    return modules

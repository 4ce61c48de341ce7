"""What the GPU tests share: their pictures, their cells, the settings a cell checks its result
with, and a slow-down to plant in a kernel's source."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

from convlab.codeversion import file_contents, fingerprint_contents
from convlab.history import store
from convlab.history.kernelversions import restore_kernel_version
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.plan.registry import KernelSpec, get_kernel, read_kernel_folder

# The check against float64: the same weights on every run, and each precision's tolerance.
VERIFY = {"seed": 0, "tolerance": {"fp32": 1e-5, "tf32": 5e-3}}
# A few repetitions: these tests check results and refusals, not times.
QUICK_TIMING = {"mode": "warm", "warmup": 1, "min_reps": 3, "max_reps": 6, "batch": 3, "stable_rel": 0.5,
                "budget_s": 0.01, "e2e_reps": 1}


def write_image(path: Path, height: int, width: int) -> Path:
    """A random colour picture of that size (the same for the same size), written as ``path``."""
    rng = np.random.default_rng(height + width)
    cv2.imwrite(str(path), rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    return path


def gpu_cells(kernel: str, size: int, strides: Iterable[int], filter_sizes: Iterable[int] = (3,),
              extra: dict | None = None) -> list[Cell]:
    """The cuda grid's conv2d cells of ``kernel`` at one size (``extra``: the config's `kernels`)."""
    config = validate_config({
        "backend": "cuda",
        "conv2d": {"sizes": [size], "strides": list(strides), "kernels": [kernel], "filter": "random",
                   "filter_sizes": list(filter_sizes)},
        "kernels": extra or {},
        "timing": {"min_reps": 3, "batch": 5, "budget_s": 0.05, "e2e_reps": 1},
        **{family: {"enabled": False} for family in ("tiling", "winograd_layers", "gemm")},
    })
    return build_cells(config, "cuda")


def make_cell(spec: KernelSpec, size: int, stride: int, k: int, out_channels: int, tunables: dict) -> Cell:
    """A conv2d cell of ``spec`` on a square 3-channel picture, a k x k random filter, same padding."""
    return Cell(experiment="conv2d", backend="cuda", kernel=spec.name, size=size, stride=stride, filter_size=k,
                padding=(k - 1) // 2, in_channels=3, out_channels=out_channels, filter="random",
                tunables=tunables, settings=dict(spec.settings), timing=QUICK_TIMING, verify=VERIFY)


def planted_slow_down(size: str, rounds: int, store: str) -> str:
    """Lines of known extra work for every thread, to put into a kernel's source: a chain of ``rounds``
    dependent FMAs on the runtime value ``size``, kept alive by a store to ``store`` that the compiler
    cannot rule out (the chain never reaches -1), so that the outputs are unchanged."""
    return (f"\n    float planted = (float){size};\n"
            f"    for (int i = 0; i < {rounds}; ++i) planted = fmaf(planted, 0.999f, 1.0f);\n"
            f"    if (planted == -1.0f) {store} = planted;\n")


def kept_version(tmp_path: Path, source: str) -> KernelSpec:
    """`direct` with ``source`` as its .cu, kept in a database and restored as a kernel of its own."""
    files = [(path, data if not path.endswith(".cu") else source.encode())
             for path, data in file_contents(get_kernel("direct").files("cuda"), root=REPO_ROOT)]
    kernel_hash = fingerprint_contents(files)
    connection, _ = store.open_for_writing(tmp_path / "history.sqlite")
    store.add_measurements(connection, "host", [], {kernel_hash: files})
    folder = tmp_path / kernel_hash
    name = restore_kernel_version(connection, "direct", kernel_hash, folder)
    connection.close()
    return read_kernel_folder(folder)[name]

"""The libraries each kernel calls, and their installed versions: part of the kernel's identity, so
that an upgrade re-measures exactly the cells of the kernels that call the upgraded library.

The versions are read from the installed packages' metadata (milliseconds, no GPU, no import of
the library), as the DAG is built. A row records the versions the library itself reported when it
ran (driver_version, cudnn_version, cublas_version, ...), and a verdict names the ones that
differ; this is only what decides which cells a plain run measures again. A library that no
package of this environment installs (a system CUDA toolkit, say) has no version here: its
upgrade is named by the rows, and `snakemake --forcerun cell` measures again.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import metadata

# The packages that install each library, in the order they are looked for.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "cuDNN": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn"),
    "cuBLAS": ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"),
    "cuFFT": ("nvidia-cufft", "nvidia-cufft-cu13", "nvidia-cufft-cu12"),
    "NVRTC": ("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu13", "nvidia-cuda-nvrtc-cu12"),
    "CuPy": ("cupy-cuda13x", "cupy-cuda12x", "cupy"),
    "NumPy": ("numpy",),
    "OpenCV": ("opencv-python-headless", "opencv-python", "opencv-contrib-python-headless", "opencv-contrib-python"),
}


@cache
def installed(library: str) -> str:
    """The installed version of ``library`` ('' where no package of this environment installs it)."""
    for name in DISTRIBUTIONS[library]:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return ""


def identity(libraries: Iterable[str]) -> str:
    """The libraries and their versions, as a cell's params carry them (cuDNN=9.19.0.56)."""
    return ";".join(f"{library}={installed(library)}" for library in libraries)

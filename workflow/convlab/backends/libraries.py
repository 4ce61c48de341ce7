"""The library kernels of the cuda backend (cuDNN, cuFFT, ndimage), registered explicitly.

Their modules import CuPy (cudnn_conv as it loads), so they are imported here, when the cuda
backend first asks for them, and never by the cpu backend or by the registry, which knows their
names and files without them (convlab.plan.registry.LIBRARIES).
"""

from __future__ import annotations

from functools import cache

from convlab.backends.librarykernel import LibraryKernel


@cache
def library_kernels() -> dict[str, LibraryKernel]:
    """Each library's kernel by name, made once per process (cuDNN's keeps its handle and plans)."""
    from convlab.backends.cudnn_conv import CudnnConv
    from convlab.backends.fft_conv import FftConv
    from convlab.backends.ndimage_conv import NdimageConv

    return {kernel.library: kernel for kernel in (CudnnConv(), FftConv(), NdimageConv())}

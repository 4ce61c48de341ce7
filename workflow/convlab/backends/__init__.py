"""Backends behind one interface: cuda (CuPy, cuDNN) and cpu (NumPy, OpenCV)."""

from __future__ import annotations

from convlab.backends.base import Backend
from convlab.status import BackendUnavailable


def gpu_visible() -> bool:
    """True when CuPy is installed and sees at least one CUDA device."""
    try:
        import cupy
    except ImportError:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver, no device: CuPy raises its own runtime errors
        return False


def resolve_backend(requested: str) -> str:
    """auto -> cuda when CuPy sees a GPU here, else cpu; cuda and cpu stay as they are. (The
    pipeline chooses with convlab.backends.choice, which also says why.)"""
    if requested == "auto":
        return "cuda" if gpu_visible() else "cpu"
    return requested


def import_backend(name: str) -> None:
    """A backend's modules imported, CuPy's among them, without touching a device: a process started
    ahead of its work (a why's standby replay) pays for them while it waits. Nothing where they
    cannot be imported: get_backend then says why."""
    if name == "cuda":
        try:
            import convlab.backends.cuda  # noqa: F401
        except ImportError:
            pass


def get_backend(name: str) -> Backend:
    """Instantiate a resolved backend, or raise BackendUnavailable with one clear line."""
    if name == "cpu":
        from convlab.backends.cpu import CpuBackend

        return CpuBackend()
    if name == "cuda":
        from convlab.backends.choice import install_hint, visible_gpu_names

        try:
            import cupy
        except ImportError as error:
            if not visible_gpu_names():  # installing CuPy would not help: there is no GPU to use
                raise BackendUnavailable("backend cuda: no NVIDIA GPU is visible on this machine (nvidia-smi lists "
                                         "none, and CuPy is not installed): run it where there is one (the pipeline "
                                         "and `convlab run` measure this CPU with backend: cpu)") from error
            raise BackendUnavailable(f"backend cuda needs CuPy ({error}): {install_hint()}") from error
        try:
            count = cupy.cuda.runtime.getDeviceCount()
            problem = None if count > 0 else "it sees no device"
        except Exception as error:  # no driver, or a CuPy built for another CUDA: CuPy's own errors
            problem = f"{type(error).__name__}: {error}"
        if problem and visible_gpu_names():
            raise BackendUnavailable(
                f"CuPy cannot use the GPU the driver lists ({problem}): reinstall it for this driver, "
                f"{install_hint()}; or set backend: cpu to measure the CPU on purpose")
        if problem:
            raise BackendUnavailable(
                "backend cuda: no CUDA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES, "
                "or use backend: cpu)")
        from convlab.backends.cuda import CudaBackend

        return CudaBackend()
    raise BackendUnavailable(f"unknown backend {name!r} (use auto, cuda or cpu)")

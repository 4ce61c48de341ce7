"""What a library kernel of the cuda backend is (cuDNN, cuFFT, ndimage): the base classes its
wrapper module subclasses. convlab.backends.libraries makes one of each."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from convlab.backends.base import Backend, KernelBuffers, PreparedKernel
from convlab.plan.registry import KernelSpec


class LibraryKernel(ABC):
    """A library's convolution, set up for one cell as a PreparedKernel."""

    library: str  # its name in launch descriptions (library: cudnn)

    def files(self) -> list[Path]:
        """The module it lives in: a file of its cells (the registry's LIBRARIES names it too)."""
        return [Path(inspect.getfile(type(self))).resolve()]

    @abstractmethod
    def prepare(self, backend: Backend, spec: KernelSpec, tunables: dict, settings: dict, problem: Any,
                buffers: KernelBuffers) -> PreparedKernel:
        """Plans, spectra, scratch: the setup; the PreparedKernel runs the library once."""


class ArrayKernel(LibraryKernel):
    """A library kernel written against the backend's array module (cupy, or numpy in tests) that
    takes its operands in one layout only."""

    layout: dict[str, str]

    def prepare(self, backend: Backend, spec: KernelSpec, tunables: dict, settings: dict, problem: Any,
                buffers: KernelBuffers) -> PreparedKernel:
        if dict(spec.layout) != self.layout:
            raise ValueError(f"{spec.description_path}: the {spec.name} kernel needs layout {self.layout}, "
                             f"got {spec.layout}")
        return self.build(backend.xp, problem, buffers)

    @abstractmethod
    def build(self, xp: Any, problem: Any, buffers: KernelBuffers) -> PreparedKernel:
        """The setup with array module ``xp``, and the launcher."""

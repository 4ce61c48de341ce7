"""A cell's operands on the host, and what the runner does with them for each kind of problem:
place them on the device in a kernel's layouts, compute the float64 reference, and bring the
kernel's output into the reference's layout.

Convolutions (conv2d, tiling, winograd_layers) keep the image as HWC (NHWC for a batch) and
the weights as OIHW; GEMM keeps A and B row-major.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.layouts import image_to_layout, output_shape, output_to_hwc, to_layout
from convlab.problem.reference import conv2d_reference, gemm_reference


class Device(Protocol):
    """What operands need of a backend to place themselves: its array module and a copy to it."""

    xp: Any

    def to_device(self, array: np.ndarray) -> Any: ...


@dataclass
class KernelBuffers:
    """Device-resident operands in the kernel's layouts, by the names launch descriptions use:
    ``input`` and ``weights`` for convolutions, ``a`` and ``b`` for GEMM; and the output."""

    inputs: dict[str, Any]
    output: Any

    @classmethod
    def conv(cls, image: Any, weights: Any, output: Any) -> KernelBuffers:
        return cls({"input": image, "weights": weights}, output)

    @property
    def image(self) -> Any:
        return self.inputs["input"]

    @property
    def weights(self) -> Any:
        return self.inputs["weights"]

    def named(self) -> dict[str, Any]:
        return {**self.inputs, "output": self.output}


@dataclass(frozen=True)
class ConvOperands:
    problem: ConvProblem
    image: np.ndarray  # HWC (NHWC for a batch) float32
    weights: np.ndarray  # OIHW float32

    def place(self, backend: Device, layout: dict[str, str]) -> tuple[dict[str, np.ndarray], KernelBuffers]:
        """The operands on the device in the kernel's layouts and a NaN-filled output.
        Returns the host arrays an end-to-end run copies in (the image, in its input layout)."""
        xp = backend.xp
        host_image = image_to_layout(self.image, layout["input"])
        buffers = KernelBuffers.conv(
            image=backend.to_device(host_image),
            weights=backend.to_device(to_layout(self.weights, layout["weights"])),
            output=xp.full(output_shape(self.problem, layout["output"]), np.nan, dtype=xp.float32),
        )
        return {"input": host_image}, buffers

    def reference(self, xp):
        """The float64 reference with array module ``xp`` (numpy on the host, cupy on the GPU)."""
        return conv2d_reference(xp.asarray(self.image), xp.asarray(self.weights), self.problem, xp)

    def comparable_output(self, output, layout: dict[str, str]):
        return output_to_hwc(output, layout["output"])

    def describe(self) -> dict[str, Any]:
        p = self.problem
        return {"H": p.height, "W": p.width, "C_in": p.in_channels, "C_out": p.out_channels,
                "filter_size": p.filter_size, "stride": p.stride, "padding": p.padding,
                "OH": p.out_height, "OW": p.out_width, "batch": p.batch}


@dataclass(frozen=True)
class GemmOperands:
    problem: GemmProblem
    a: np.ndarray  # m x k row-major float32
    b: np.ndarray  # k x n row-major float32

    def place(self, backend: Device, layout: dict[str, str]) -> tuple[dict[str, np.ndarray], KernelBuffers]:
        xp = backend.xp
        p = self.problem
        buffers = KernelBuffers({"a": backend.to_device(self.a), "b": backend.to_device(self.b)},
                                xp.full((p.m, p.n), np.nan, dtype=xp.float32))
        return {"a": self.a, "b": self.b}, buffers

    def reference(self, xp):
        # a float64 8192^3 product takes ~20 ms on a GPU, minutes on a CPU: large sizes use cupy
        return gemm_reference(xp.asarray(self.a), xp.asarray(self.b), xp)

    def comparable_output(self, output, layout: dict[str, str]):
        return output

    def describe(self) -> dict[str, Any]:
        p = self.problem
        return {"gemm_m": p.m, "gemm_n": p.n, "gemm_k": p.k}


Operands = ConvOperands | GemmOperands

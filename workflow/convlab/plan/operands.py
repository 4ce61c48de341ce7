"""A cell's operands on the host, and what the runner does with them for each kind of problem:
place them on the device in a kernel's layouts, compute the float64 reference, and bring the
kernel's output into the reference's layout.

Convolutions (conv2d, tiling, winograd_layers) keep the image as HWC (NHWC for a batch) and
the weights as OIHW; GEMM keeps A and B row-major. Both place themselves the same way (Placing),
through what the cells of their problem share (convlab.plan.problemcache).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import numpy as np

from convlab.plan.problemcache import SharedProblem
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.layouts import image_to_layout, output_shape, output_to_hwc, to_layout
from convlab.problem.reference import conv2d_reference, gemm_reference


class Device(Protocol):
    """What operands need of a backend to place themselves: its array module and a copy to it (a
    cell's copy of a kept master is the array's own copy(), on the device for a device array)."""

    xp: Any

    def to_device(self, array: np.ndarray) -> Any: ...


@dataclass
class KernelBuffers:
    """Device-resident operands in the kernel's layouts, by the names launch descriptions use:
    ``input`` and ``weights`` for convolutions, ``a`` and ``b`` for GEMM; and the output."""

    inputs: dict[str, Any]
    output: Any
    # a kernel's scratch buffers by (name, elements), made by the first kernel that asks: every
    # kernel and version set up on these operands then writes and reads the same scratch, as a
    # buffer's place alone moved a scratch-bound kernel's time by 3 % between two copies of one
    # version side by side (im2col's col, Winograd's transforms, on an H100)
    scratch: dict[tuple[str, int], Any] = field(default_factory=dict)

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


class Placing(ABC):
    """How operands place themselves: each input in the kernel's layout, on the host (what the
    round trip copies in) and on the device (the cell's own copy), and a NaN-filled output."""

    round_trip: tuple[str, ...]  # the inputs an end-to-end run copies in

    @abstractmethod
    def input_layouts(self, layout: dict[str, str]) -> dict[str, str]:
        """Each input's name (as launch descriptions use it) and its layout."""

    @abstractmethod
    def host_input(self, name: str, layout: str) -> np.ndarray:
        """The input on the host in that layout."""

    @abstractmethod
    def output(self, xp: Any, layout: dict[str, str]) -> Any:
        """A NaN-filled output in the kernel's output layout."""

    def place(self, backend: Device, layout: dict[str, str],
              shared: SharedProblem | None = None) -> tuple[dict[str, np.ndarray], KernelBuffers]:
        """The inputs on the device in the kernel's layouts, the cell's own, and a NaN-filled output;
        and the host arrays an end-to-end run copies in. ``shared``: the problem's, where its cells
        share their inputs' masters (none: made for this cell alone)."""
        shared = shared or SharedProblem()
        host, placed = {}, {}
        for name, form in self.input_layouts(layout).items():
            host[name] = shared.host_input(name, form, partial(self.host_input, name, form))
            placed[name] = shared.device_input(name, form, partial(backend.to_device, host[name]), backend.xp)
        return {name: host[name] for name in self.round_trip}, KernelBuffers(placed, self.output(backend.xp, layout))


@dataclass(frozen=True)
class ConvOperands(Placing):
    problem: ConvProblem
    image: np.ndarray  # HWC (NHWC for a batch) float32
    weights: np.ndarray  # OIHW float32

    round_trip = ("input",)  # the image: the weights stay on the device

    def input_layouts(self, layout: dict[str, str]) -> dict[str, str]:
        return {"input": layout["input"], "weights": layout["weights"]}

    def host_input(self, name: str, layout: str) -> np.ndarray:
        return image_to_layout(self.image, layout) if name == "input" else to_layout(self.weights, layout)

    def output(self, xp: Any, layout: dict[str, str]) -> Any:
        return xp.full(output_shape(self.problem, layout["output"]), np.nan, dtype=xp.float32)

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
class GemmOperands(Placing):
    problem: GemmProblem
    a: np.ndarray  # m x k row-major float32
    b: np.ndarray  # k x n row-major float32

    round_trip = ("a", "b")

    def input_layouts(self, layout: dict[str, str]) -> dict[str, str]:
        return {"a": "rowmajor", "b": "rowmajor"}

    def host_input(self, name: str, layout: str) -> np.ndarray:
        return self.a if name == "a" else self.b

    def output(self, xp: Any, layout: dict[str, str]) -> Any:
        return xp.full((self.problem.m, self.problem.n), np.nan, dtype=xp.float32)

    def reference(self, xp):
        # a float64 8192^3 product takes ~20 ms on a GPU, minutes on a CPU: large sizes use cupy
        return gemm_reference(xp.asarray(self.a), xp.asarray(self.b), xp)

    def comparable_output(self, output, layout: dict[str, str]):
        return output

    def describe(self) -> dict[str, Any]:
        p = self.problem
        return {"gemm_m": p.m, "gemm_n": p.n, "gemm_k": p.k}


Operands = ConvOperands | GemmOperands

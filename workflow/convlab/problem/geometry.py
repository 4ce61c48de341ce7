"""A cell's problem as geometry: its shapes, FLOPs and the fewest bytes it must move."""

from __future__ import annotations

from dataclasses import dataclass

FLOAT32_BYTES = 4


@dataclass(frozen=True)
class ConvProblem:
    height: int
    width: int
    in_channels: int
    out_channels: int
    filter_size: int
    stride: int
    padding: int
    # batched problems (CNN layers) carry a leading N axis on input and output; single
    # images (conv2d, tiling) are 3-D arrays
    batch: int = 1
    batched: bool = False

    @property
    def out_height(self) -> int:
        return (self.height + 2 * self.padding - self.filter_size) // self.stride + 1

    @property
    def out_width(self) -> int:
        return (self.width + 2 * self.padding - self.filter_size) // self.stride + 1

    @property
    def flops(self) -> int:
        """Multiply-adds counted as two operations, output positions only (stride honoured)."""
        k = self.filter_size
        return 2 * self.batch * self.out_height * self.out_width * self.out_channels * self.in_channels * k * k

    @property
    def bytes_moved(self) -> int:
        """The fewest bytes a kernel must move: input, weights and output, each once."""
        k = self.filter_size
        elements = (
            self.batch * self.height * self.width * self.in_channels
            + self.out_channels * self.in_channels * k * k
            + self.batch * self.out_height * self.out_width * self.out_channels
        )
        return elements * FLOAT32_BYTES

    def launch_names(self) -> dict[str, int]:
        """The names launch-description expressions may use."""
        return {
            "N": self.batch, "H": self.height, "W": self.width, "C": self.in_channels, "K": self.out_channels,
            "R": self.filter_size, "S": self.filter_size, "stride": self.stride, "pad": self.padding,
            "OH": self.out_height, "OW": self.out_width,
        }

    def defines(self) -> dict[str, int]:
        """Compile-time constants every .cu kernel gets, so accumulators can live in registers."""
        return {"CONV_C": self.in_channels, "CONV_K": self.out_channels,
                "CONV_R": self.filter_size, "CONV_S": self.filter_size}


@dataclass(frozen=True)
class GemmProblem:
    """C (m x n) = A (m x k) @ B (k x n), row-major float32."""

    m: int
    n: int
    k: int

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def bytes_moved(self) -> int:
        return (self.m * self.k + self.k * self.n + self.m * self.n) * FLOAT32_BYTES

    def launch_names(self) -> dict[str, int]:
        return {"M": self.m, "N": self.n, "K": self.k}

    def defines(self) -> dict[str, int]:
        return {}

"""The convolution problem of a cell: its geometry, input image and filter weights."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from convlab.status import UserError

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


class ImageError(UserError, ValueError):
    """The input image cannot be used as a cell's input."""


class PictureCache:
    """Decoded pictures kept by a long-lived measurement worker, keyed by path, size and mtime,
    so that a changed file is read again. Cached arrays are read-only: nothing may write into
    a picture another cell will read."""

    def __init__(self, capacity: int = 0) -> None:
        self.capacity = capacity
        self._pictures: dict[tuple, np.ndarray] = {}

    def get(self, path: Path, read) -> np.ndarray:
        if self.capacity <= 0:
            return read(path)
        info = path.stat()
        key = (str(path.resolve()), info.st_size, info.st_mtime_ns)
        if key not in self._pictures:
            while len(self._pictures) >= self.capacity:
                self._pictures.pop(next(iter(self._pictures)))
            picture = read(path)
            picture.flags.writeable = False
            self._pictures[key] = picture
        return self._pictures[key]


# Off (capacity 0) in one-shot processes; a service worker turns it on.
PICTURES = PictureCache()


def _decode(path: Path) -> np.ndarray:
    import cv2

    pixels = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if pixels is None:
        raise ImageError(f"{path}: OpenCV could not decode this file (truncated or not an image?)")
    return np.ascontiguousarray(pixels, dtype=np.float32) / np.float32(255.0)


def load_image(path: str | Path) -> np.ndarray:
    """Read an 8-bit RGB(BGR) image as float32 HWC in [0, 1], as OpenCV lays it out."""
    path = Path(path)
    if not path.is_file():
        raise ImageError(f"image not found: {path}")
    return PICTURES.get(path, _decode)


def make_weights(kind: str, out_channels: int, in_channels: int, size: int, seed: int) -> np.ndarray:
    """Filter weights in OIHW order.

    laplacian: the seed's edge filter (all ones, centre 1 - size*size) for every
    output/input channel pair; random: uniform [-1, 1) from ``seed``.
    """
    if kind == "laplacian":
        tap = np.ones((size, size), dtype=np.float32)
        tap[size // 2, size // 2] = 1.0 - size * size
        return np.ascontiguousarray(np.broadcast_to(tap, (out_channels, in_channels, size, size)))
    if kind == "random":
        rng = np.random.default_rng(seed)
        return rng.uniform(-1.0, 1.0, (out_channels, in_channels, size, size)).astype(np.float32)
    raise ValueError(f"unknown filter kind {kind!r}")


def to_layout(weights_oihw: np.ndarray, layout: str) -> np.ndarray:
    """Reorder OIHW weights into the layout a kernel declares."""
    if layout == "oihw":
        return np.ascontiguousarray(weights_oihw)
    if layout == "ohwi":
        return np.ascontiguousarray(weights_oihw.transpose(0, 2, 3, 1))
    raise ValueError(f"unknown weight layout {layout!r}")


def image_to_layout(image_hwc: np.ndarray, layout: str) -> np.ndarray:
    """The input image (HWC, or NHWC for a batch) in a kernel's input layout (hwc as loaded, or chw)."""
    if layout == "hwc":
        return np.ascontiguousarray(image_hwc)
    if layout == "chw":
        lead = image_hwc.ndim - 3  # 1 for a batch
        return np.ascontiguousarray(image_hwc.transpose(*range(lead), lead + 2, lead, lead + 1))
    raise ValueError(f"unknown image layout {layout!r}")


def output_shape(problem: ConvProblem, layout: str) -> tuple[int, ...]:
    oh, ow, k = problem.out_height, problem.out_width, problem.out_channels
    lead = (problem.batch,) if problem.batched else ()
    if layout == "hwc":
        return (*lead, oh, ow, k)
    if layout == "chw":
        return (*lead, k, oh, ow)
    raise ValueError(f"unknown output layout {layout!r}")


def output_to_hwc(output, layout: str):
    """A kernel's output viewed as HWC (NHWC for a batch) for comparison with the reference
    (any array module)."""
    if layout == "hwc":
        return output
    lead = output.ndim - 3
    return output.transpose(*range(lead), lead + 1, lead + 2, lead)

"""What each family's cells compute on: the picture or random data and the filter, as host-side
operands that carry the float64 reference (convlab.plan.operands).

Apart from the family modules because it needs NumPy: a Cell names its path through its family, and
costs the standard library only. One entry per family in OPERANDS (a test holds that every family
has one).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from convlab.pictures.loading import load_image
from convlab.plan.cell import Cell
from convlab.plan.families import family
from convlab.plan.families.conv2d import Conv2d
from convlab.plan.families.gemm import Gemm
from convlab.plan.families.tiling import Tiling
from convlab.plan.families.winograd_layers import WinogradLayers
from convlab.plan.operands import ConvOperands, GemmOperands, Operands
from convlab.problem.geometry import ConvProblem
from convlab.problem.weights import make_weights

# A cell and the path of the picture it reads (None where it reads none) -> its operands.
OperandsMaker = Callable[[Cell, str | Path | None], Operands]


def filter_weights(cell: Cell, problem: ConvProblem) -> np.ndarray:
    return make_weights(cell.filter, problem.out_channels, problem.in_channels, problem.filter_size,
                        cell.verify["seed"])


def convolved_picture(cell: Cell, image_path: str | Path | None,
                      view: Callable[[Cell, np.ndarray], np.ndarray]) -> ConvOperands:
    """The cell's convolution of ``view`` of the loaded HWC picture."""
    if image_path is None:
        raise ValueError(f"{cell.path} reads a picture; give its path ({cell.image})")
    picture = view(cell, load_image(image_path))
    if picture.shape[:2] != (cell.size, cell.width or cell.size):
        raise ValueError(f"{image_path} is {picture.shape[1]}x{picture.shape[0]}, the cell needs "
                         f"{cell.size}x{cell.size}")
    problem = family(cell.experiment).problem(cell)
    return ConvOperands(problem, picture, filter_weights(cell, problem))


def whole_picture(cell: Cell, loaded: np.ndarray) -> np.ndarray:
    return loaded


def grey_mosaic(cell: Cell, loaded: np.ndarray) -> np.ndarray:
    """One (grey) channel of the picture, tiled into a mosaic where the cell is larger than the
    largest picture."""
    import cv2  # here: only these cells convert colours, and OpenCV is slow to import

    grey = cv2.cvtColor(loaded, cv2.COLOR_BGR2GRAY)[:, :, None]
    reps = -(-cell.size // grey.shape[0])
    return np.ascontiguousarray(np.tile(grey, (reps, reps, 1))[: cell.size, : cell.size])


def picture_operands(cell: Cell, image_path: str | Path | None) -> ConvOperands:
    return convolved_picture(cell, image_path, whole_picture)


def grey_mosaic_operands(cell: Cell, image_path: str | Path | None) -> ConvOperands:
    return convolved_picture(cell, image_path, grey_mosaic)


def layer_operands(cell: Cell, image_path: str | Path | None) -> ConvOperands:
    """A CNN layer on random activations and a random filter."""
    problem = family(cell.experiment).problem(cell)
    # activations after a ReLU are >= 0: uniform [0, 1), NHWC like a picture batch
    rng = np.random.default_rng(cell.verify["seed"] + 1)
    image = rng.random((problem.batch, problem.height, problem.width, problem.in_channels), dtype=np.float32)
    return ConvOperands(problem, image, filter_weights(cell, problem))


def matrix_operands(cell: Cell, image_path: str | Path | None) -> GemmOperands:
    """Square random matrices A and B."""
    rng = np.random.default_rng(cell.verify["seed"])
    a = rng.uniform(-1.0, 1.0, (cell.size, cell.size)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (cell.size, cell.size)).astype(np.float32)
    return GemmOperands(family(cell.experiment).problem(cell), a, b)


OPERANDS: dict[str, OperandsMaker] = {
    Conv2d.name: picture_operands,
    Tiling.name: grey_mosaic_operands,
    WinogradLayers.name: layer_operands,
    Gemm.name: matrix_operands,
}


def load_operands(cell: Cell, image_path: str | Path | None = None) -> Operands:
    """Host-side operands of a cell: its picture, or random data drawn from verify.seed."""
    return OPERANDS[cell.experiment](cell, image_path)

"""Edge maps: one kernel's output at one size, saved as an image a person can look at."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from convlab.backends import get_backend
from convlab.backends.base import KernelBuffers
from convlab.grid import Cell
from convlab.measure import problem as problem_mod
from convlab.registry import get_kernel
from convlab.runner import problem_of


def to_edge_image(output_hwc: np.ndarray) -> np.ndarray:
    """|response| scaled so the 99.5th percentile is white: edges bright, flat regions dark."""
    magnitude = np.abs(output_hwc.astype(np.float64))
    scale = np.percentile(magnitude, 99.5) or 1.0
    return (np.clip(magnitude / scale, 0.0, 1.0) * 255).astype(np.uint8)


def render_edge_map(cell: Cell, image_path: str | Path, out: str | Path) -> None:
    import cv2

    spec = get_kernel(cell.kernel)
    problem = problem_of(cell)
    image = problem_mod.load_image(image_path)
    weights = problem_mod.make_weights(cell.filter, problem.out_channels, problem.in_channels,
                                       problem.filter_size, cell.verify["seed"])
    backend = get_backend(cell.backend)
    layout = backend.layout_for(spec)
    xp = backend.xp
    with backend.guard("gallery"):
        buffers = KernelBuffers(
            image=backend.to_device(problem_mod.image_to_layout(image, layout["input"])),
            weights=backend.to_device(problem_mod.to_layout(weights, layout["weights"])),
            output=xp.full(problem_mod.output_shape(problem, layout["output"]), np.nan, dtype=xp.float32),
        )
        prepared = backend.prepare(spec, cell.tunables, cell.settings, problem, buffers)
        prepared.run()
        backend.synchronize()
    output = problem_mod.output_to_hwc(backend.to_host(buffers.output), layout["output"])
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(out), to_edge_image(output)):
        raise OSError(f"could not write {out}")

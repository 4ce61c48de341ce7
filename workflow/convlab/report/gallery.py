"""Edge maps: one kernel's output at one size, saved as an image a person can look at."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from convlab.atomicfile import write_bytes_atomically
from convlab.backends import get_backend
from convlab.backends.devicelock import exclusive_device
from convlab.plan.cell import Cell
from convlab.problem.layouts import output_to_hwc
from convlab.run.steps import load_inputs


def to_edge_image(output_hwc: np.ndarray) -> np.ndarray:
    """|response| scaled so the 99.5th percentile is white: edges bright, flat regions dark."""
    magnitude = np.abs(output_hwc.astype(np.float64))
    scale = np.percentile(magnitude, 99.5) or 1.0
    return (np.clip(magnitude / scale, 0.0, 1.0) * 255).astype(np.uint8)


def render_edge_map(cell: Cell, image_path: str | Path, out: str | Path) -> None:
    """Run the cell's kernel once (no timing) and write |output| as an 8-bit image."""
    import cv2

    inputs = load_inputs(cell, image_path)
    backend = get_backend(cell.backend)
    layout = backend.layout_for(inputs.spec)
    # its kernel run must not overlap a cell's timing on the same device
    with exclusive_device(backend.device_key()), backend.guard("gallery"):
        _, buffers = inputs.operands.place(backend, layout)
        prepared = backend.prepare(inputs.spec, cell.tunables, cell.settings, inputs.problem, buffers)
        prepared.run()
        backend.synchronize()
    output = output_to_hwc(backend.to_host(buffers.output), layout["output"])
    encoded, png = cv2.imencode(".png", to_edge_image(output))
    if not encoded:
        raise OSError(f"could not encode the edge map for {out}")
    write_bytes_atomically(out, png.tobytes())

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
from convlab.status import CellFailure


def to_edge_image(output_hwc: np.ndarray) -> np.ndarray:
    """|response| scaled so the 99.5th percentile is white: edges bright, flat regions dark."""
    magnitude = np.abs(output_hwc.astype(np.float64))
    scale = np.percentile(magnitude, 99.5) or 1.0
    return (np.clip(magnitude / scale, 0.0, 1.0) * 255).astype(np.uint8)


def failure_image(size: int, text: str) -> np.ndarray:
    """A dark square of ``size`` with ``text`` written on it, wrapped to its width: the gallery's
    place of a kernel that did not run, which says why."""
    import cv2

    image = np.full((size, size), 40, dtype=np.uint8)
    scale = max(size / 640, 0.3)
    (sample, height), _ = cv2.getTextSize("abcdefghij", cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
    width = max(int((size - 8) / (sample / 10)), 8)
    step = height + max(int(8 * scale), 3)
    for index, line in enumerate(wrapped(text, width)[: max((size - 4) // step, 1)]):
        cv2.putText(image, line, (4, step * (index + 1)), cv2.FONT_HERSHEY_SIMPLEX, scale, 230, 1, cv2.LINE_AA)
    return image


def wrapped(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces or slashes where it can be,
    and inside a longer word where it must."""
    pieces = [piece for word in text.split() for piece in word.replace("/", "/ ").split()]
    lines, line = [], ""
    for piece in pieces:
        while len(piece) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(piece[:width])
            piece = piece[width:]
        joined = f"{line}{piece}" if line.endswith("/") else f"{line} {piece}".strip()
        if line and len(joined) > width:
            lines.append(line)
            line = piece
        else:
            line = joined
    return [*lines, line] if line else lines


def render_edge_map(cell: Cell, image_path: str | Path, out: str | Path) -> str | None:
    """Run the cell's kernel once (no timing) and write |output| as an 8-bit image. A kernel that does
    not run (a compile error, an unsupported problem) gets an image that says so instead, and its
    reason is returned: its cells record the failure in their rows, and the run goes on."""
    import cv2

    inputs = load_inputs(cell, image_path)
    backend = get_backend(cell.backend)
    layout = backend.layout_for(inputs.spec)
    failed = None
    try:
        # its kernel run must not overlap a cell's timing on the same device
        with exclusive_device(backend.device_key()), backend.guard("gallery"):
            _, buffers = inputs.operands.place(backend, layout)
            prepared = backend.prepare(inputs.spec, cell.tunables, cell.settings, inputs.problem, buffers)
            prepared.run()
            backend.synchronize()
    except CellFailure as failure:
        failed = f"{failure.status}: {' '.join(failure.reason.split())}"
    if failed is None:
        picture = to_edge_image(output_to_hwc(backend.to_host(buffers.output), layout["output"]))
    else:
        picture = failure_image(cell.size, f"{cell.kernel}: no edge map. {failed}")
    encoded, png = cv2.imencode(".png", picture)
    if not encoded:
        raise OSError(f"could not encode the edge map for {out}")
    write_bytes_atomically(out, png.tobytes())
    return failed

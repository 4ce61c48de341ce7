"""The pictures cells read: decoded once with OpenCV as float32 HWC, and kept by a long-lived
measurement worker."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from convlab.status import UserError


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

    def clear(self) -> None:
        self._pictures.clear()


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

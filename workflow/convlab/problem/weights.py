"""The filter weights of a convolution cell."""

from __future__ import annotations

import numpy as np


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

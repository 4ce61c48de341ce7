"""convlab: run the CUDA 2D-convolution lab's cells and check each one against float64.

Nothing is imported here: every cell job imports this package first, and its start is part of
every cell's cost (the checkout's paths are convlab.paths)."""

__version__ = "0.1.0"

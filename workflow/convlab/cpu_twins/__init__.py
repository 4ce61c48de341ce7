"""CPU twins: NumPy/OpenCV versions of the kernels' algorithms.

Each module exposes IMPLEMENTATION (a label for the row), weights_from(weights, layout)
and convolve(image_hwc, weights, problem, out_hwc), which writes every output element.
"""

"""CPU twins: NumPy/OpenCV versions of the kernels' algorithms.

Each module exposes IMPLEMENTATION (a label for the row) and
convolve(image_hwc, weights_oihw, problem, out_hwc), which writes every output element
(or raises convlab.status.UnsupportedCell).
"""

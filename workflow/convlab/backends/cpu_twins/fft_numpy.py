"""FFT convolution with numpy.fft on HWC data (cpu twin of the fft kernel).

A CNN "convolution" is a cross-correlation: out[y, x] = sum padded[y + i, x + j] * g[i, j].
By the correlation theorem that is irfft2(rfft2(padded) * conj(rfft2(g))) on an FFT grid at
least as large as the padded image (rounded up to a 2^a 3^b 5^c 7^d size): the circular
wrap-around then only reaches positions whose window leaves the padded image, which are not
outputs. Every position is computed (full resolution) and the strided ones are kept. All
float32 / complex64, like cuFFT. A twin has no setup step, so the filter spectra are
computed inside each call here (the GPU kernel computes them once, at setup).
"""

from __future__ import annotations

import numpy as np

from convlab.problem.fftsize import fast_len
from convlab.problem.geometry import ConvProblem

IMPLEMENTATION = "numpy.fft rfft2 (pocketfft, float32), full resolution then strided slice (cpu twin of fft)"


def convolve(image_hwc: np.ndarray, weights_oihw: np.ndarray, problem: ConvProblem,
             out_hwc: np.ndarray) -> None:
    p, s = problem.padding, problem.stride
    h, w, c = problem.height, problem.width, problem.in_channels
    oh, ow = problem.out_height, problem.out_width
    shape = (fast_len(h + 2 * p), fast_len(w + 2 * p))
    # conj(rfft2(g)) of every (k, c) filter on the FFT grid: (K, C, n1, n2 // 2 + 1)
    spectra = np.conj(np.fft.rfft2(np.asarray(weights_oihw, dtype=np.float32), s=shape, axes=(-2, -1)))
    padded = np.zeros((c,) + shape, dtype=np.float32)
    padded[:, p : p + h, p : p + w] = np.asarray(image_hwc, dtype=np.float32).transpose(2, 0, 1)
    spectrum = np.fft.rfft2(padded, axes=(-2, -1))  # (C, n1, n2r)
    product = spectra[:, 0] * spectrum[0]  # the per-(k, c) products summed over C: (K, n1, n2r)
    for ci in range(1, c):
        product += spectra[:, ci] * spectrum[ci]
    full = np.fft.irfft2(product, s=shape, axes=(-2, -1))  # (K, n1, n2), every position
    out_hwc[...] = full[:, 0 : s * (oh - 1) + 1 : s, 0 : s * (ow - 1) + 1 : s].transpose(1, 2, 0)

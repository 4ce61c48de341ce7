"""FFT convolution through cupy.fft (cuFFT): rfft2 of the zero-padded input, per-channel-pair
products with the filter spectra summed over C, irfft2, then the strided positions kept.

A CNN "convolution" is a cross-correlation, out[y, x] = sum padded[y + i, x + j] * g[i, j],
so the filter spectra are conj(rfft2(g)) (correlation theorem). The FFT grid is the padded
image rounded up to a 2^a 3^b 5^c 7^d size; circular wrap-around then only reaches
positions whose window leaves the padded image, which are never outputs. There is no stride
in this formulation: every position is computed and the strided ones are sliced out.

Setup (prepare) computes the K*C filter spectra and allocates the padded input; run() does
the input FFT, the products, the inverse FFT and the slice into buffers.output. The array
module is ``backend.xp``, so the module also runs with numpy in place of cupy.
"""

from __future__ import annotations

from typing import Any

from convlab.backends.base import KernelBuffers, PreparedKernel
from convlab.backends.librarykernel import ArrayKernel
from convlab.problem.fftsize import fast_len
from convlab.problem.geometry import ConvProblem

LAYOUT = {"input": "chw", "weights": "oihw", "output": "chw"}


def _library_version(xp) -> str:
    try:
        return f"cuFFT {xp.cuda.cufft.getVersion()}"
    except Exception:  # numpy in place of cupy, or no version query
        return getattr(xp, "__name__", "xp")


class FftConv(ArrayKernel):
    library = "cupy_fft"
    layout = LAYOUT

    def build(self, xp: Any, problem: ConvProblem, buffers: KernelBuffers) -> PreparedKernel:
        p, s = problem.padding, problem.stride
        c, h, w = problem.in_channels, problem.height, problem.width
        oh, ow = problem.out_height, problem.out_width
        shape = (fast_len(h + 2 * p), fast_len(w + 2 * p))
        axes = (-2, -1)

        # Setup: filter spectra (K, C, n1, n2 // 2 + 1) complex64, and the zero-bordered input
        # plane whose interior run() overwrites.
        weights = xp.asarray(buffers.weights, dtype=xp.float32)
        spectra = xp.conj(xp.fft.rfft2(weights, s=shape, axes=axes)).astype(xp.complex64)
        padded = xp.zeros((c,) + shape, dtype=xp.float32)
        interior = padded[:, p : p + h, p : p + w]
        rows = slice(0, s * (oh - 1) + 1, s)
        cols = slice(0, s * (ow - 1) + 1, s)

        def run() -> None:
            interior[...] = buffers.image
            spectrum = xp.fft.rfft2(padded, axes=axes)  # (C, n1, n2r)
            product = spectra[:, 0] * spectrum[0]        # summed over C: (K, n1, n2r)
            for ci in range(1, c):
                product += spectra[:, ci] * spectrum[ci]
            full = xp.fft.irfft2(product, s=shape, axes=axes)  # (K, n1, n2): every position
            buffers.output[...] = full[:, rows, cols]

        return PreparedKernel(run, {
            "implementation": "cupy.fft rfft2 (cuFFT), full resolution then strided slice",
            "engine": f"{_library_version(xp)}, FFT grid {shape[0]}x{shape[1]}",
            "fft_shape": f"{shape[0]}x{shape[1]}",
            "spectra_bytes": int(spectra.nbytes),
        })

"""The library kernels (cupy.fft, ndimage) with NumPy/SciPy standing in for CuPy.

On the GPU the same code runs with backend.xp = cupy (tests/test_gpu_kernels.py); here the
algorithm, padding, stride slicing and in-place output are checked without a GPU, and each
wrapper lives in the file its cells depend on.
"""

import numpy as np
import pytest

from convlab.backends.base import KernelBuffers
from convlab.backends.fft_conv import FftConv
from convlab.backends.ndimage_conv import NdimageConv
from convlab.plan.registry import LIBRARIES, library_file, load_registry
from convlab.problem.geometry import ConvProblem
from convlab.problem.reference import conv2d_reference
from convlab.problem.verify import compare
from convlab.problem.weights import make_weights


class NumpyBackend:
    xp = np


@pytest.mark.parametrize("kernel,wrapper", [("fft", FftConv), ("ndimage", NdimageConv)])
@pytest.mark.parametrize("height,width", [(257, 130), (31, 17)])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_library_module_matches_reference(kernel, wrapper, height, width, stride, k):
    if kernel == "ndimage":
        pytest.importorskip("scipy.ndimage", reason="scipy stands in for cupyx.scipy.ndimage here")
    spec = load_registry()[kernel]
    rng = np.random.default_rng(height + stride + k)
    image = rng.random((height, width, 3), dtype=np.float32)
    weights = make_weights("random", 3, 3, k, seed=k)
    problem = ConvProblem(height, width, 3, 3, k, stride, (k - 1) // 2)
    output = np.full((3, problem.out_height, problem.out_width), np.nan, dtype=np.float32)
    buffers = KernelBuffers.conv(np.ascontiguousarray(image.transpose(2, 0, 1)), weights, output)
    prepared = wrapper().prepare(NumpyBackend(), spec, {}, dict(spec.settings), problem, buffers)
    prepared.run()
    assert buffers.output is output  # written in place, not rebound
    verdict = compare(output.transpose(1, 2, 0), conv2d_reference(image, weights, problem, np), 1e-5)
    assert verdict.passed, verdict.reason
    assert prepared.info["implementation"]


@pytest.mark.parametrize("kernel,wrapper", [("fft", FftConv), ("ndimage", NdimageConv)])
def test_a_library_kernel_lives_in_the_file_its_cells_depend_on(kernel, wrapper):
    spec = load_registry()[kernel]
    assert wrapper.library == spec.library
    assert wrapper().files() == [library_file(spec.library)] == spec.files("cuda")[-1:]


def test_the_cuda_backend_registers_every_library_the_registry_knows():
    pytest.importorskip("cupy", reason="the cuDNN wrapper imports CuPy")
    from convlab.backends.libraries import library_kernels

    kernels = library_kernels()
    assert sorted(kernels) == sorted(LIBRARIES)
    assert all(kernel.files() == [library_file(name)] for name, kernel in kernels.items())

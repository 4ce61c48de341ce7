"""The float64 reference itself, against a brute-force loop written straight from the definition."""

import numpy as np
import pytest

from convlab.problem.geometry import ConvProblem
from convlab.problem.reference import conv2d_reference


def brute_force(image, weights, stride, padding):
    h, w, c = image.shape
    k_out, _, r, s = weights.shape
    oh = (h + 2 * padding - r) // stride + 1
    ow = (w + 2 * padding - s) // stride + 1
    out = np.zeros((oh, ow, k_out))
    for y in range(oh):
        for x in range(ow):
            for k in range(k_out):
                total = 0.0
                for i in range(r):
                    for j in range(s):
                        iy, ix = y * stride - padding + i, x * stride - padding + j
                        if 0 <= iy < h and 0 <= ix < w:
                            total += float(np.dot(image[iy, ix, :].astype(np.float64), weights[k, :, i, j]))
                out[y, x, k] = total
    return out


@pytest.mark.parametrize("height,width,k,stride,padding", [
    (7, 7, 3, 1, 1), (9, 6, 3, 2, 1), (10, 13, 5, 3, 2), (8, 8, 3, 2, 0), (5, 11, 1, 1, 0),
])
def test_reference_matches_definition(height, width, k, stride, padding):
    rng = np.random.default_rng(height * 100 + width)
    image = rng.random((height, width, 3), dtype=np.float32)
    weights = rng.uniform(-1, 1, (4, 3, k, k)).astype(np.float32)
    problem = ConvProblem(height, width, 3, 4, k, stride, padding)
    got = conv2d_reference(image, weights, problem, np)
    assert got.dtype == np.float64
    assert got.shape == (problem.out_height, problem.out_width, 4)
    np.testing.assert_allclose(got, brute_force(image, weights, stride, padding), rtol=1e-12, atol=1e-12)

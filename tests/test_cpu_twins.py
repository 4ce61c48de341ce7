"""Every cpu twin against the float64 reference: strides 1-3, odd and non-square sizes, random weights."""

import importlib

import numpy as np
import pytest

from convlab.plan.registry import load_registry
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.reference import conv2d_reference, gemm_reference
from convlab.problem.verify import compare
from convlab.status import UnsupportedCell

TWINS = sorted({spec.cpu_twin: spec for spec in load_registry().values()
                 if spec.cpu_twin and spec.experiments != ("gemm",)}.items())
GEMM_TWINS = sorted({spec.cpu_twin for spec in load_registry().values() if spec.cpu_twin and spec.experiments == ("gemm",)})


@pytest.mark.parametrize("twin_name,spec", TWINS, ids=[name for name, _ in TWINS])
@pytest.mark.parametrize("height,width", [(257, 130), (64, 64), (31, 17)])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("k", [3, 5])
def test_twin_matches_reference(twin_name, spec, height, width, stride, k):
    twin = importlib.import_module(f"convlab.backends.cpu_twins.{twin_name}")
    rng = np.random.default_rng(stride * 7 + k)
    image = rng.random((height, width, 3), dtype=np.float32)
    weights = rng.uniform(-1, 1, (3, 3, k, k)).astype(np.float32)
    problem = ConvProblem(height, width, 3, 3, k, stride, (k - 1) // 2)
    out = np.full((problem.out_height, problem.out_width, 3), np.nan, dtype=np.float32)
    if spec.unsupported_reason(stride, k):
        with pytest.raises(UnsupportedCell):
            twin.convolve(image, weights, problem, out)
        return
    twin.convolve(image, weights, problem, out)
    verdict = compare(out, conv2d_reference(image, weights, problem, np), tolerance=1e-5)
    assert verdict.passed, verdict.reason
    assert verdict.max_rel_err < 1e-5


@pytest.mark.parametrize("twin_name", GEMM_TWINS)
@pytest.mark.parametrize("m,n,k", [(257, 130, 31), (1, 1, 1), (64, 65, 66)])
def test_gemm_twin_matches_float64(twin_name, m, n, k):
    twin = importlib.import_module(f"convlab.backends.cpu_twins.{twin_name}")
    rng = np.random.default_rng(m + n + k)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    out = np.full((m, n), np.nan, dtype=np.float32)
    twin.multiply(a, b, GemmProblem(m, n, k), out)
    verdict = compare(out, gemm_reference(a, b, np), tolerance=1e-5)
    assert verdict.passed, verdict.reason

"""The float64 check on the host: what it counts, and the kept scale giving the same verdict."""

import numpy as np
import pytest

from convlab.problem.verify import compare, reference_scale


def reference_and_output() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    reference = rng.uniform(0.5, 1.0, (16, 12, 3))
    return reference, (reference * (1 + rng.uniform(-1e-7, 1e-7, reference.shape))).astype(np.float32)


def test_a_close_output_passes_with_its_errors():
    reference, output = reference_and_output()
    verdict = compare(output, reference, 1e-5)
    assert verdict.passed and verdict.nonfinite == 0 and verdict.reason == ""
    assert 0 < verdict.max_rel_err < 2e-7 and 0 < verdict.rel_l2_err <= verdict.max_rel_err


def test_unwritten_values_are_counted_and_count_as_zero_in_the_errors():
    reference, output = reference_and_output()
    output[2, 3, 1] = np.nan
    output[5, 5, 0] = np.inf
    verdict = compare(output, reference, 1e-5)
    assert not verdict.passed and verdict.nonfinite == 2
    assert verdict.reason == f"2 of {output.size} output values are NaN/inf (not written, or overflow)"
    largest = max(reference[2, 3, 1], reference[5, 5, 0]) / np.abs(reference).max()
    assert verdict.max_rel_err == pytest.approx(largest, rel=1e-6)


def test_the_kept_scale_gives_the_verdict_the_reference_gives():
    reference, output = reference_and_output()
    output[4, 4, 2] += 0.25
    scale = reference_scale(reference)
    assert scale.max_abs == np.abs(reference).max() and scale.norm == pytest.approx(np.linalg.norm(reference))
    assert compare(output, reference, 1e-5, np, scale) == compare(output, reference, 1e-5)
    assert "exceeds tolerance" in compare(output, reference, 1e-5).reason


def test_a_zero_reference_or_a_wrong_shape_never_passes():
    reference, output = reference_and_output()
    zero = compare(output, np.zeros_like(reference), 1e-5)
    assert not zero.passed and "all zeros" in zero.reason
    wrong = compare(output[:, :, :2], reference, 1e-5)
    assert not wrong.passed and "shape" in wrong.reason

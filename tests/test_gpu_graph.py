"""Timing mode graph on a real GPU (marker gpu): a launch-bound kernel timed from a CUDA graph of
many launches comes out below the one-launch event floor, a run that cannot be captured is
timed per launch and says so, and a graph-timed cell is still verified against float64."""

from dataclasses import replace

import pytest
from gpu_helpers import gpu_cells, write_image

from convlab.measure.timing import GRAPH_MS, measure
from convlab.run.runner import run_cell

TIMING = {"mode": "warm", "warmup": 3, "min_reps": 20, "max_reps": 400, "batch": 20, "stable_rel": 0.01,
          "budget_s": 1.0, "e2e_reps": 1}
GRAPH = {**TIMING, "mode": "graph"}
EMPTY_KERNEL = 'extern "C" __global__ void convlab_test_empty() {}'


def empty_launch():
    import cupy

    kernel = cupy.RawKernel(EMPTY_KERNEL, "convlab_test_empty")
    return lambda: kernel((1,), (32,), ())


@pytest.mark.gpu
def test_a_graph_times_a_tiny_kernel_below_the_event_floor(backend):
    run = empty_launch()
    events = measure(run, backend.time_batch, TIMING, backend.capture_graph)
    graph = measure(run, backend.time_batch, GRAPH, backend.capture_graph)
    assert events.applied == "warm" and events.launches is None
    assert graph.applied == "graph", graph.fallback
    print(f"empty kernel: {events.median_ms * 1e3:.2f} us per launch with events, "
          f"{graph.median_ms * 1e3:.3f} us from a graph of {graph.launches}")
    assert 0 < graph.median_ms < events.median_ms
    assert graph.launches * graph.median_ms >= 0.5 * GRAPH_MS  # one replay lasts about a millisecond
    assert graph.reps >= TIMING["min_reps"]


@pytest.mark.gpu
def test_a_cublas_call_is_timed_per_launch_and_the_stream_recovers(backend):
    import cupy

    a = cupy.ones((64, 64), dtype=cupy.float32)
    out = cupy.empty_like(a)
    refused = measure(lambda: cupy.matmul(a, a, out=out), backend.time_batch, GRAPH, backend.capture_graph)
    assert refused.mode == "graph" and refused.applied == "warm" and refused.launches is None
    assert "graph capture refused" in refused.fallback and "cuBLAS" in refused.fallback, refused.fallback
    assert refused.median_ms > 0
    # the capture was ended: the stream takes the next graph, and cuBLAS still computes
    assert not backend._graph_stream.is_capturing()
    assert measure(empty_launch(), backend.time_batch, GRAPH, backend.capture_graph).applied == "graph"
    cupy.matmul(a, a, out=out)
    assert float(out[3, 5]) == 64.0


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["direct", "conv_floor_nchw", "tiled_output"])
def test_a_graph_timed_cell_is_verified_against_float64(tmp_path, kernel):
    image = write_image(tmp_path / "in.png", 256, 256)
    for cell in gpu_cells(kernel, 256, [1, 2])[:2]:
        row = run_cell(replace(cell, timing={**cell.timing, "mode": "graph"}), image)
        assert row["status"] == "ok", (cell.path, row["reason"])
        assert row["max_rel_err"] < 1e-5 and row["nonfinite"] == 0
        assert row["timing_mode"] == row["timing_applied"] == "graph", row["timing_fallback"]
        assert row["graph_launches"] >= 1 and row["kernel_ms"] > 0 and row["timing_fallback"] is None


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["cudnn", "fft", "ndimage", "im2col_cublas"])
def test_library_kernels_in_graph_mode_are_verified_and_say_how_they_were_timed(tmp_path, kernel):
    """cuDNN's handle follows the capture's stream, cuFFT and CuPy launch on it; cuBLAS refuses
    capture (CuPy raises), so im2col_cublas is timed per launch. Either way the row says which."""
    image = write_image(tmp_path / "in.png", 256, 256)
    (cell,) = gpu_cells(kernel, 256, [1])[:1]
    row = run_cell(replace(cell, timing={**cell.timing, "mode": "graph"}), image)
    assert row["status"] == "ok", row["reason"]
    assert row["max_rel_err"] < 1e-5 and row["kernel_ms"] > 0
    print(f"{kernel}: {row['timing_applied']} {row['graph_launches']} {row['timing_fallback']}")
    if kernel == "im2col_cublas":
        assert row["timing_applied"] == "warm" and "cuBLAS" in row["timing_fallback"]
        assert row["graph_launches"] is None
    else:
        assert row["timing_applied"] in ("graph", "warm")
        assert (row["timing_applied"] == "graph") == (row["timing_fallback"] is None) == (row["graph_launches"] is not None)


@pytest.mark.gpu
def test_the_benchs_copy_kernel_does_the_multiply_adds_it_is_given(backend):
    import cupy
    import numpy as np

    from convlab.bench import floor as bench

    source = cupy.full(4 * 1000, 2.0, dtype=cupy.float32)
    for fmas, want in ((0, 2.0), (3, 2.0 * (0.5 + 0.51 + 0.52))):
        target = cupy.zeros_like(source)
        kernel = cupy.RawKernel(bench.COPY_KERNEL, "convlab_copy", options=(f"-DFMAS_PER_FLOAT={fmas}",))
        kernel((4,), (256,), (source, target, cupy.int64(1000)))
        np.testing.assert_allclose(cupy.asnumpy(target), want, rtol=1e-6)
        timed = bench.time_copy_kernel(backend, 1 << 20, GRAPH, fmas)
        assert timed.applied == "graph" and timed.median_ms > 0, timed.fallback

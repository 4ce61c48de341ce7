"""A kernel's stages on a real GPU (marker gpu): a run long enough to have its stages timed within
its own repeats gives each stage about the time it takes timed alone, and the stages add up to the run."""

import pytest
from gpu_helpers import gpu_cells, write_image

from convlab.measure.timing import STAGES_IN_RUN_MS, time_stages_alone
from convlab.run.steps import launch, load_inputs, place, set_up, time_kernel, verify_output


@pytest.mark.gpu
def test_a_long_runs_stages_from_its_own_repeats_agree_with_each_stage_timed_alone(tmp_path, backend):
    image = write_image(tmp_path / "in.png", 128, 128)
    cell = gpu_cells("im2col_gemm_row", 128, [1])[0]  # im2col, then a GEMM of one thread per row: ~3 ms
    inputs = load_inputs(cell, image)
    placed = place(backend, inputs, backend.layout_for(inputs.spec))
    prepared = set_up(backend, inputs, placed)
    launch(backend, prepared)
    timing = time_kernel(backend, inputs, prepared)
    assert timing.median_ms >= STAGES_IN_RUN_MS and timing.stages_in_run
    assert [name for name, _ in timing.stage_ms] == ["im2col", "gemm"]
    # the run's time is its stages' with an event between them: a microsecond or so more
    assert sum(ms for _, ms in timing.stage_ms) == pytest.approx(timing.median_ms, rel=0.02)
    alone = dict(time_stages_alone(prepared.kernel.stages, backend.time_batch, cell.timing))
    print("stages in the run:", dict(timing.stage_ms), "alone:", alone)
    for name, ms in timing.stage_ms:
        assert abs(ms - alone[name]) <= 0.1 * alone[name] + 0.005, (name, ms, alone[name])
    # the output the stages left is still the convolution
    placed.buffers.output.fill(float("nan"))
    prepared.kernel.run()
    assert verify_output(backend, inputs, placed).status == "ok"

"""The cuda backend on a real GPU (marker gpu: skipped, with the reason, where none is visible)."""

import pytest
from gpu_helpers import gpu_cells, write_image

from convlab.backends import get_backend, gpu_visible
from convlab.run.runner import run_cell
from convlab.status import BackendUnavailable


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["direct", "cudnn"])
@pytest.mark.parametrize("size", [64, 257])
def test_kernel_correct_for_strides_and_filters(tmp_path, kernel, size):
    image = write_image(tmp_path / "in.png", size, size)
    cells = gpu_cells(kernel, size, [1, 2, 3], [3, 5, 7])
    assert cells
    for cell in cells:
        row = run_cell(cell, image)
        assert row["status"] == "ok", (cell.path, row["reason"])
        assert row["max_rel_err"] < 1e-5, cell.path
        assert row["kernel_ms"] > 0 and row["device"] and row["compute_capability"]


@pytest.mark.gpu
def test_64x64_block_is_invalid_config_not_a_time(tmp_path):
    """Seed 001 table 4 reported ~0.003 ms for a 4096-thread block that never ran."""
    image = write_image(tmp_path / "in.png", 128, 128)
    (cell,) = gpu_cells("direct", 128, [1], extra={"direct": {"block": [64]}})
    row = run_cell(cell, image)
    assert row["status"] == "invalid_config"
    assert "CUDA_ERROR" in row["reason"] or "invalid" in row["reason"].lower()
    assert row.get("kernel_ms") is None


@pytest.mark.gpu
def test_cold_mode_runs_and_is_recorded(tmp_path):
    image = write_image(tmp_path / "in.png", 512, 512)
    (cell,) = gpu_cells("direct", 512, [1], extra={"direct": {"block": [16]}})
    warm = run_cell(cell, image)
    cold = run_cell(type(cell)(**{**cell.__dict__, "timing": {**cell.timing, "mode": "cold"}}), image)
    assert warm["status"] == cold["status"] == "ok"
    assert warm["timing_mode"] == "warm" and cold["timing_mode"] == "cold"
    assert cold["reps"] >= 3 and cold["kernel_ms"] > 0


@pytest.mark.gpu
def test_cudnn_records_both_engines(tmp_path):
    image = write_image(tmp_path / "in.png", 256, 256)
    for cell in gpu_cells("cudnn", 256, [1]):
        row = run_cell(cell, image)
        assert row["status"] == "ok", row["reason"]
        assert row["engine"] and row["engine_heuristic"]
        assert row["setup_ms"] > 0


@pytest.mark.gpu
def test_a_cudnn_cell_replayed_with_its_engine_builds_that_plan_alone(tmp_path):
    from convlab.run.counterreplay import as_timed
    from convlab.run.steps import load_inputs, place, set_up

    image = write_image(tmp_path / "in.png", 256, 256)
    backend = get_backend("cuda")
    for cell in gpu_cells("cudnn", 256, [1]):
        engine = run_cell(cell, image)["engine"]
        replayed = run_cell(as_timed(cell, engine), image)
        assert replayed["status"] == "ok" and replayed["max_rel_err"] < 1e-5, replayed["reason"]
        assert replayed["engine"] == engine
        inputs = load_inputs(as_timed(cell, engine), image)
        prepared = set_up(backend, inputs, place(backend, inputs, backend.layout_for(inputs.spec)))
        assert prepared.kernel.info["engine"] == engine and prepared.kernel.info["plans_usable"] == 1
        # an engine the list does not have: the search runs, as for a cell of its own
        assert run_cell(as_timed(cell, "no such engine"), image)["status"] == "ok"


@pytest.mark.skipif(gpu_visible(), reason="checks the error given where no GPU is visible")
def test_forcing_cuda_without_a_gpu_is_one_clear_error():
    with pytest.raises(BackendUnavailable) as error:
        get_backend("cuda")
    message = str(error.value)
    assert "\n" not in message
    assert "CuPy" in message or "no CUDA GPU" in message

"""Shared memory above the default 48 KiB per block, without a GPU: the cuda backend's decision
(opt in, or invalid_config naming the GPU's limit), the row it leaves, and the count of the
default grid's cells that need the opt-in (computed from the launch descriptions)."""

import pytest
from cpu_helpers import cell_for

from convlab.app.cli import main
from convlab.backends.cpu import CpuBackend
from convlab.backends.sharedcount import cell_shared_bytes, large_shared_cells
from convlab.backends.sharedmem import DEFAULT_SHARED_BYTES, shared_limit
from convlab.paths import DEFAULT_CONFIG
from convlab.plan.cell import Cell
from convlab.plan.config import load_config
from convlab.plan.grid import build_cells
from convlab.plan.registry import get_kernel
from convlab.run.runner import run_cell
from convlab.status import LaunchConfigError

HOPPER_OPTIN = 227 * 1024


def test_a_block_within_the_default_does_not_opt_in():
    assert shared_limit(DEFAULT_SHARED_BYTES, DEFAULT_SHARED_BYTES, HOPPER_OPTIN) == (DEFAULT_SHARED_BYTES, False)


def test_a_block_above_the_default_opts_in_up_to_the_gpus_limit():
    assert shared_limit(50_700, DEFAULT_SHARED_BYTES, HOPPER_OPTIN) == (HOPPER_OPTIN, True)
    assert shared_limit(HOPPER_OPTIN, DEFAULT_SHARED_BYTES, HOPPER_OPTIN) == (HOPPER_OPTIN, True)


def test_a_block_above_the_opt_in_limit_is_refused_naming_it():
    with pytest.raises(LaunchConfigError) as refused:
        shared_limit(260 * 1024, DEFAULT_SHARED_BYTES, HOPPER_OPTIN)
    assert refused.value.status == "invalid_config"
    assert refused.value.reason == ("needs 260 KiB of shared memory per block; this GPU allows 227 KiB "
                                    "(sharedMemPerBlockOptin)")
    assert refused.value.columns == {"smem_limit_bytes": HOPPER_OPTIN}


def test_a_gpu_without_the_opt_in_keeps_the_default():
    with pytest.raises(LaunchConfigError, match=r"allows 48 KiB \(sharedMemPerBlock\)"):
        shared_limit(50_700, DEFAULT_SHARED_BYTES, 0)


def test_the_refused_cell_is_invalid_config_with_the_limit_in_its_row(image_path):
    class SmallTileLimit(CpuBackend):
        def prepare(self, spec, cell_tunables, settings, problem, buffers):
            shared_limit(260 * 1024, DEFAULT_SHARED_BYTES, HOPPER_OPTIN)

    row = run_cell(cell_for("direct"), image_path, backend=SmallTileLimit())
    assert row["status"] == "invalid_config" and "this GPU allows 227 KiB" in row["reason"]
    assert row["smem_limit_bytes"] == HOPPER_OPTIN
    assert row["kernel_ms"] is None and row["setup_ms"] is None


def tiled_cell(kernel: str, stride: int, block: int = 32, channels: int = 3) -> Cell:
    return Cell(experiment="conv2d", backend="cuda", kernel=kernel, size=128, stride=stride, filter_size=3,
                padding=1, in_channels=channels, out_channels=channels, filter="laplacian", tunables={"block": block})


@pytest.mark.parametrize("kernel,stride,block,channels,expected", [
    ("tiled_output", 2, 32, 3, 3 * 65 * 65 * 4),  # (31 * 2 + 3)^2 floats per channel: 49.5 KiB
    ("tiled_output", 3, 32, 3, 3 * 96 * 96 * 4),
    ("tiled_cached", 2, 32, 3, 3 * 64 * 64 * 4),  # exactly 48 KiB: no opt-in
    ("tiled_input", 1, 16, 1, 16 * 16 * 4),
    ("direct", 2, 32, 3, 0),  # no shared memory
])
def test_shared_bytes_come_from_the_launch_description(kernel, stride, block, channels, expected):
    assert cell_shared_bytes(tiled_cell(kernel, stride, block, channels), get_kernel(kernel)) == expected


def test_the_default_grid_count_of_cells_above_48_kib():
    config = load_config(DEFAULT_CONFIG)
    large = large_shared_cells(build_cells(config, "cuda"))
    kinds = {(cell.experiment, cell.kernel, cell.variant, cell.stride) for cell, _ in large}
    # block 32 of tiled_output at strides 2 and 3, of tiled_cached at stride 3, per conv2d size;
    # sgemm_pipelined's three 16-deep stages (73 KiB) per gemm size
    assert kinds == {("conv2d", "tiled_output", "block~32", 2), ("conv2d", "tiled_output", "block~32", 3),
                     ("conv2d", "tiled_cached", "block~32", 3), ("gemm", "sgemm_pipelined", "bk~16_bm~256_nstages~3", 0)}
    assert len(large) == 3 * len(config["conv2d"]["sizes"]) + len(config["gemm"]["sizes"])
    assert all(DEFAULT_SHARED_BYTES < need <= HOPPER_OPTIN for _, need in large)


def test_the_command_prints_the_count(capsys):
    cells = build_cells(load_config(DEFAULT_CONFIG), "cuda")
    count = len(large_shared_cells(cells))
    assert main(["shared-memory"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{count} of {len(cells)} cells need more than 48 KiB")
    assert f"{count} of them fit in 227 KiB" in lines[0] and len(lines) == 1 + count

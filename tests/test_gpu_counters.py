"""Hardware counters on a real GPU (marker gpu) through Nsight Compute: a copy's DRAM bytes are
its buffers' sizes, one cell of each family gets counters through the `counters` step, and a cell
whose counters cannot be read stays ok with the reason."""

from __future__ import annotations

import sys

import pandas as pd
import pytest
from gpu_helpers import write_image

from convlab.measure.ncureport import METRICS, by_cell, cell_counters
from convlab.plan.grid import build_cells
from convlab.plan.gridfile import save_grid
from convlab.run.nsightprofile import ncu_command, run_profiled

# The input read from DRAM once, up to partly used sectors at the picture's edges
READ_ONCE = 1.05
# Far larger than L2 (50 MB), so that what is still in L2 when the copy ends (written bytes that
# never reach DRAM in the count) is under 2 % of it.
COPY_MIB = 4096
COPY = f"""
import cupy
from convlab.backends import get_backend
backend = get_backend("cuda")
copy = cupy.ElementwiseKernel("float32 x", "float32 y", "y = x", "convlab_test_copy")
source = cupy.ones({COPY_MIB} << 18, dtype=cupy.float32)
target = cupy.empty_like(source)
copy(source, target)
with backend.profiled(0):
    copy(source, target)
"""


@pytest.fixture
def ncu():
    if ncu_command() is None:
        pytest.skip("no Nsight Compute (ncu) on PATH here")


@pytest.mark.gpu
def test_a_copys_dram_bytes_are_its_buffers_sizes(tmp_path, backend, ncu):
    profiled = run_profiled([sys.executable, "-c", COPY], tmp_path, METRICS)
    assert not profiled.reason, profiled.reason
    (kernels,) = by_cell(profiled.launches).values()
    counters = cell_counters(kernels)
    buffer = COPY_MIB << 20
    print(f"copy of {COPY_MIB} MiB: read {counters['dram_read_bytes']:.4g} B, wrote {counters['dram_write_bytes']:.4g} B")
    assert counters["dram_read_bytes"] == pytest.approx(buffer, rel=0.02)
    assert counters["dram_write_bytes"] == pytest.approx(buffer, rel=0.02)
    assert counters["profiled_kernels"] == 1


def measured_grid(tmp_path, monkeypatch):
    """One measured cell of each family (conv2d, tiling, winograd_layers, gemm) in a results folder."""
    from convlab.measure.row import write_row_atomically
    from convlab.plan.config import validate_config
    from convlab.run.runner import run_cell

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONVLAB_SERVICE", "off")
    (tmp_path / "data").mkdir()
    write_image(tmp_path / "data" / "input_256.png", 256, 256)
    config = validate_config({
        "backend": "cuda", "source_size": 256,
        "conv2d": {"sizes": [256], "strides": [1], "kernels": ["direct"]},
        # two conv2d cells of one problem: the one-pass replay shares its operands between them
        "kernels": {"direct": {"block": [8, 16]}, "sgemm_shared": {}},
        "tiling": {"sizes": [256], "filter_sizes": [3], "kernels": ["direct"]},
        "winograd_layers": {"layers": [[3, 12, 12, 4]], "batches": [1], "kernels": ["winograd_batched"]},
        "gemm": {"sizes": [256], "kernels": ["sgemm_shared"]},
        "timing": {"min_reps": 3, "batch": 5, "budget_s": 0.05, "e2e_reps": 1}})
    cells = build_cells(config, "cuda", "gpu")
    for cell in cells:
        write_row_atomically(run_cell(cell, cell.image or None), cell.path)
    return config, cells


def run_counters(tmp_path, config):
    from convlab.app.cli import main

    out = tmp_path / "results" / "gpu" / "counters.csv"
    grid = save_grid(config, build_cells(config, "cuda", "gpu"), "gpu", tmp_path)
    assert main(["counters", "--results", str(tmp_path / "results" / "gpu"), "--backend", "cuda", "--device", "gpu",
                 "--grid", str(grid), "--out", str(out)]) == 0
    return pd.read_csv(out, keep_default_na=False)


@pytest.mark.gpu
def test_one_cell_of_each_family_gets_counters_and_an_unreadable_one_its_reason(tmp_path, monkeypatch, backend, ncu):
    config, cells = measured_grid(tmp_path, monkeypatch)
    table = run_counters(tmp_path, config)
    print(table[["experiment", "kernel", "dram_read_bytes", "dram_write_bytes", "top_stall", "counters_reason"]])
    assert sorted(set(table["experiment"])) == ["conv2d", "gemm", "tiling", "winograd_layers"]
    assert (table["counters_reason"] == "").all(), table["counters_reason"].tolist()
    # inputs are read from DRAM (the caches are flushed before each pass); these small outputs stay in L2
    assert (pd.to_numeric(table["dram_read_bytes"]) > 0).all()
    # the second profile reads the stalls of the cells the findings speak for: one per family here
    # (each family's cells are one kernel on one problem; its fastest variant speaks for them)
    stalled = table[table["top_stall"] != ""]
    assert sorted(stalled["experiment"]) == ["conv2d", "gemm", "tiling", "winograd_layers"], table["top_stall"]
    assert (pd.to_numeric(stalled["top_stall_ratio"]) > 0).all()
    assert (pd.to_numeric(table["achieved_occupancy_pct"]) > 0).all()
    # The direct kernel reads each input byte from DRAM once (the halo its blocks share hits in L2),
    # the second cell of the problem from its own copy of the kept input as the first from its own,
    # and writes at least each output byte into L2. Only the reads are bounded above: the L2 write
    # count, partly used sectors included, varies from run to run: on H100s, three runs of the
    # default grid counted 1.34 to 2.06 times the output for this kernel at 256², block 8, stride 2,
    # and 1.010 times the input read each time.
    directs = [cell for cell in cells if cell.kernel == "direct" and cell.experiment == "conv2d"]
    assert len(directs) == 2
    for direct in directs:
        row = pd.read_csv(direct.path).iloc[0]
        counted = table.loc[table["cell"] == direct.path].iloc[0]
        inputs = float(row["H"] * row["W"] * row["C_in"] * 4)
        outputs = float(row["OH"] * row["OW"] * row["C_out"] * 4)
        read, written = float(counted["dram_read_bytes"]), float(counted["l2_write_bytes"])
        print(f"{direct.variant} at 256²: read {read / inputs:.3f} × the input, wrote {written / outputs:.3f} × the "
              f"output into L2")
        assert 0.99 <= read / inputs <= READ_ONCE
        assert written >= outputs
    (tmp_path / "results" / "gpu" / "counters" / "kept.csv").unlink()
    monkeypatch.setenv("CONVLAB_NCU", str(tmp_path / "no-ncu-here"))
    refused = run_counters(tmp_path, config)
    assert len(refused) == len(table)
    assert refused["counters_reason"].str.startswith("Nsight Compute").all()

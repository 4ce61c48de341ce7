"""Hardware counters without a GPU: Nsight Compute's raw page split into cells by the markers, a
cell's columns, the reason every cell gets where there are none (the cpu backend, no ncu, no
permission), and findings computed from planted counter rows."""

from __future__ import annotations

import json
import os
import stat

import pandas as pd
import pytest

from convlab.measure.ncureport import (
    COLUMNS,
    METRICS,
    STALL_METRICS,
    by_cell,
    cell_counters,
    cell_range,
    parse_raw_csv,
    speaking_cells,
)
from convlab.plan.families import problem_key
from convlab.plan.grid import build_cells
from convlab.plan.gridfile import save_grid
from convlab.report.counterfindings import findings_lines, load_counters

HEAD = ["ID", "Process ID", "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg", "Kernel Name",
        "Block Size", "Grid Size", *METRICS, *STALL_METRICS[1:]]


def raw_page(kernels: list[tuple[str, int | None, dict[str, str]]], units: dict[str, str] | None = None) -> str:
    """A raw CSV page as `ncu --import R --csv --page raw` prints it (collected with --nvtx): header,
    units, a row per kernel, each with the NVTX range it ran in."""
    units = units or {}
    lines = [HEAD, ["", "", "", "", "", "", *(units.get(m, "") for m in HEAD[6:])]]
    for index, (name, cell, values) in enumerate(kernels):
        ranges = f'11269  "<default domain>:{cell_range(cell)}:none:none:none:none:none:none" ' if cell is not None else ""
        lines.append([str(index), "1", ranges.replace('"', '""'), name, "(256, 1, 1)", "(64, 1, 1)",
                      *(values.get(m, "") for m in HEAD[6:])])
    return "==PROF== Disconnected\n" + "\n".join(",".join(f'"{v}"' for v in line) for line in lines) + "\n"


def kernel(ms: str, read: str, write: str, stall: str = "long_scoreboard", occupancy: str = "50",
           l2_sectors: str = "100", l2_read_sectors: str = "") -> dict[str, str]:
    return {"gpu__time_duration.sum": ms, "dram__bytes_read.sum": read, "dram__bytes_write.sum": write,
            "lts__t_sectors_srcunit_tex_op_write.sum": l2_sectors, "lts__t_sectors_srcunit_tex_op_read.sum": l2_read_sectors,
            "sm__warps_active.avg.pct_of_peak_sustained_active": occupancy,
            f"smsp__warps_issue_stalled_{stall}.sum": "950", "smsp__warps_issue_stalled_barrier.sum": "100",
            "smsp__issue_active.sum": "100"}


def test_the_nvtx_ranges_split_the_report_into_cells_and_a_cells_kernels_add_up():
    page = raw_page([
        ("im2col", 0, kernel("1.0", "1,000", "3000", occupancy="20", l2_read_sectors="100,000")),
        ("gemm", 0, kernel("3.0", "2000", "1000", stall="math_pipe_throttle", occupancy="60",
                           l2_read_sectors="150,000")),
        ("outside", None, kernel("9.0", "9", "9")),
        ("direct", 2, kernel("2.0", "5", "1")),
    ], units={"dram__bytes_read.sum": "Kbyte"})
    cells = by_cell(parse_raw_csv(page))
    assert sorted(cells) == [0, 2] and [k.name for k in cells[0]] == ["im2col", "gemm"]
    first = cell_counters(cells[0])
    assert first["dram_read_bytes"] == 3_000_000  # Kbyte, summed over both kernels
    assert first["dram_write_bytes"] == 4000 * 1000 / 1000
    assert first["achieved_occupancy_pct"] == pytest.approx((20 * 1 + 60 * 3) / 4)  # weighted by each kernel's time
    # the reads L2 served: 8 MB read from it, 3 MB of them from DRAM
    assert first["l2_hit_pct"] == pytest.approx(100 * (1 - 3_000_000 / (250_000 * 32)))
    # stalls over both kernels' issued instructions: 950 each on two reasons, against 200 on barriers
    assert first["top_stall"] == "long_scoreboard" and first["top_stall_ratio"] == pytest.approx(950 / 200)
    assert first["profiled_kernels"] == 2 and first["counters_reason"] == ""
    # DRAM's write count ends with the kernels; what they wrote into L2 reaches DRAM in time
    assert first["l2_write_bytes"] == 2 * 100 * 32
    assert first["dram_traffic_bytes"] == 3_000_000 + max(4000, 6400)
    assert cell_counters(cells.get(1, [])) == {"counters_reason": "no kernel of the cell's run was profiled"}
    assert set(first) <= set(COLUMNS)
    assert cell_counters(cells[2])["l2_hit_pct"] is None  # no read sectors counted: no rate
    # a kernel whose reads all came from DRAM (more than L2 counted: partly written sectors) hit 0 %
    alone = cell_counters([*by_cell(parse_raw_csv(raw_page([("k", 0, kernel("1", "9000", "0", l2_read_sectors="10"))])))
                           .values()][0])
    assert alone["l2_hit_pct"] == 0.0


def test_the_findings_speak_for_each_kernels_fastest_variant_at_its_smallest_stride():
    rows = [{"experiment": "conv2d", "kernel": "direct", "size": 256, "stride": 2, "kernel_ms": "0.001"},
            {"experiment": "conv2d", "kernel": "direct", "size": 256, "stride": 1, "kernel_ms": "0.009"},
            {"experiment": "conv2d", "kernel": "direct", "size": 256, "stride": 1, "kernel_ms": "0.005"},
            {"experiment": "conv2d", "kernel": "direct", "size": 512, "stride": 1, "kernel_ms": "nan"},
            {"experiment": "conv2d", "kernel": "cudnn", "size": 256, "stride": 1, "kernel_ms": "0.004"},
            {"experiment": "conv2d", "kernel": "direct", "size": 512, "stride": 3, "kernel_ms": "0.02"},
            {"experiment": "conv2d", "kernel": "direct", "size": "x"},
            {"experiment": "gemm", "kernel": "sgemm_shared", "size": 256, "stride": "", "kernel_ms": "0.01"},
            {"experiment": "winograd_layers", "kernel": "winograd", "C_in": 3, "H": 8, "W": 8, "C_out": 4, "batch": 1,
             "size": "", "stride": 1, "kernel_ms": "0.01"},
            {"experiment": "winograd_layers", "kernel": "winograd", "C_in": 64, "H": 8, "W": 8, "C_out": 4, "batch": 1,
             "size": "", "stride": 1, "kernel_ms": "0.01"}]
    # by kernel then problem; an unmeasured one never chosen; a GEMM without a stride, each layer its own
    assert speaking_cells(rows, problem_key) == [4, 2, 5, 7, 8, 9]


def test_a_page_that_is_not_ncus_is_refused_in_one_line():
    from convlab.measure.ncureport import ReportError

    with pytest.raises(ReportError, match="header row"):
        parse_raw_csv("==ERROR== something went wrong\n")


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A cuda grid of three cells with planted ok rows (no GPU needed: nothing is measured)."""
    from convlab.measure.row import build_row, write_row_atomically
    from convlab.plan.config import validate_config

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONVLAB_SERVICE", "off")
    config = validate_config({"backend": "cuda", "conv2d": {"sizes": [64], "strides": [1, 2, 3], "kernels": ["direct"]},
                              "kernels": {"direct": {"block": [16]}}, "tiling": {"enabled": False},
                              "winograd_layers": {"enabled": False}, "gemm": {"enabled": False}})
    cells = build_cells(config, "cuda", "h100")
    for index, cell in enumerate(cells):
        values = {"experiment": cell.experiment, "kernel": cell.kernel, "variant": cell.variant, "backend": "cuda",
                  "size": cell.size, "stride": cell.stride, "filter_size": cell.filter_size,
                  "status": "ok" if index < 2 else "wrong", "kernel_ms": 1.0, "kernel_ms_iqr": 0.01, "reps": 20,
                  "max_rel_err": 1e-7, "tolerance": 1e-4, "flops": 1000, "gflops": 0.001, "device": "H100",
                  "code_version": "abc", "gpu_uuid": "GPU-a", "git_commit": "c0ffee",
                  "started_at": "2026-11-26T10:00:00", "finished_at": "2026-11-26T10:00:01",
                  "engine": "eng28" if index == 0 else "", **({"reason": "planted"} if index >= 2 else {})}
        write_row_atomically(build_row([values]), cell.path)
    return tmp_path, config


def run_counters(folder, config, backend: str = "cuda"):
    from convlab.app.cli import main

    out = folder / "results" / "h100" / "counters.csv"
    grid = save_grid(config, build_cells(config, backend, "h100"), "h100", folder)
    code = main(["counters", "--results", str(folder / "results" / "h100"), "--backend", backend, "--device", "h100",
                 "--grid", str(grid), "--out", str(out)])
    return code, pd.read_csv(out, keep_default_na=False)


def fake_ncu(folder, said: str, exit_code: int):
    script = folder / "ncu"
    script.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


PROFILING_NCU = """#!{python}
import json, sys
from pathlib import Path
argv = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(argv) + "\\n")
metrics = argv[argv.index("--metrics") + 1] if "--metrics" in argv else ""
# "profiled": its notes, a line per kernel and pass, then the planted page, into its log file
plan = json.loads(Path(argv[argv.index("--plan") + 1]).read_text())
with open({log!r}, "a") as log:
    log.write(json.dumps({{"engines": [item["engine"] for item in plan]}}) + "\\n")
page = {pages!r}["stall" if "stalled" in metrics else "one"]
notes = "==PROF== Profiling \\"direct\\" - 0: 0%....50%....100% - 1 pass\\n" * page.count('"direct"')
Path(argv[argv.index("--log-file") + 1]).write_text(notes + page)
"""


def test_the_step_reads_each_cells_counters_and_the_stalls_of_those_the_findings_speak_for(lab, monkeypatch):
    import sys

    folder, config = lab
    one_pass = {m: v for m, v in kernel("0.5", "4000", "1000").items() if m in METRICS}
    pages = {"one": raw_page([("direct", 0, one_pass), ("direct", 1, {**one_pass, "dram__bytes_read.sum": "8000"})]),
             "stall": raw_page([("direct", 0, kernel("0.5", "", "", stall="wait")),
                                ("direct", 1, kernel("0.5", "", "", stall="barrier"))])}
    script = folder / "ncu"
    script.write_text(PROFILING_NCU.format(python=sys.executable, log=str(folder / "ncu.log"), pages=pages))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CONVLAB_NCU", str(script))
    code, table = run_counters(folder, config)
    assert code == 0 and list(table["dram_read_bytes"]) == [4000, 8000]
    assert (table["counters_reason"] == "").all()
    # the stall counters: of the fastest cell at the smallest stride only (both ran 1.0 ms), in a second profile
    assert list(table["top_stall"]) == ["wait", ""] and float(table["top_stall_ratio"][0]) == pytest.approx(950 / 100)
    said = [json.loads(line) for line in (folder / "ncu.log").read_text().splitlines()]
    calls = [line for line in said if isinstance(line, list)]
    # each replayed cell runs the engine its timed run chose (its row's)
    assert [line["engines"] for line in said if isinstance(line, dict)] == [["eng28", ""], ["eng28"]]
    assert [c[c.index("--metrics") + 1] for c in calls] == [",".join(METRICS), ",".join(STALL_METRICS)]
    # each profile's own Nsight Compute prints its page, of the metrics it collected: none is started to print it
    assert all(c[c.index("--csv"):c.index("--csv") + 5] == ["--csv", "--page", "raw", "--print-units", "base"]
               for c in calls)
    # with every cell's stalls asked for, the kept cell that lacks them is read again, and nothing else
    _, table = run_counters(folder, {**config, "counter_stalls": "every"})
    assert list(table["top_stall"]) == ["wait", "wait"]  # the second cell is the first of that profile
    said = [json.loads(line) for line in (folder / "ncu.log").read_text().splitlines()]
    assert [line["engines"] for line in said if isinstance(line, dict)][2:] == [[""], [""]]
    _, again = run_counters(folder, {**config, "counter_stalls": "every"})
    assert list(again["top_stall"]) == ["wait", "wait"]
    assert len((folder / "ncu.log").read_text().splitlines()) == len(said)  # all kept: no profile


@pytest.mark.parametrize("said, exit_code, reason", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters", 1,
     "no permission to read GPU counters (ERR_NVGPUCTRPERM)"),
    ("==ERROR== the profiler crashed", 3, "Nsight Compute failed (exit 3): ==ERROR== the profiler crashed"),
])
def test_counters_that_cannot_be_read_leave_every_ok_cell_ok_with_the_reason(lab, monkeypatch, capsys, said,
                                                                               exit_code, reason):
    folder, config = lab
    monkeypatch.setenv("CONVLAB_NCU", str(fake_ncu(folder, said, exit_code)))
    code, table = run_counters(folder, config)
    assert code == 0 and len(table) == 2  # the two ok cells; the wrong one has no counters to read
    assert table["counters_reason"].str.startswith(reason).all()
    assert (table["dram_read_bytes"] == "").all()
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "2 of 2 ok cells have none" in warnings[0]


def test_no_ncu_and_the_cpu_backend_are_reasons_too(lab, monkeypatch):
    folder, config = lab
    monkeypatch.setenv("CONVLAB_NCU", "")
    monkeypatch.setenv("PATH", str(folder))  # no ncu there
    _, table = run_counters(folder, config)
    assert table["counters_reason"].str.startswith("Nsight Compute (ncu) is not on PATH").all()
    os.remove(folder / "results" / "h100" / "counters" / "kept.csv")  # the reasons were not kept anyway
    _, table = run_counters(folder, config, backend="cpu")
    assert (table["counters_reason"] == "no hardware counters on the cpu backend").all()


def planted_table(tmp_path) -> pd.DataFrame:
    """A summary of four cells and their counters: at the floor, traffic-heavy, a GEMM, a slow one."""
    rows = [("conv_floor_nchw", "conv2d", 4096, 0.075, 201_326_592, 0.2e9, 1.02, 3.0),
            ("cudnn", "conv2d", 4096, 0.25, 201_326_592, 0.2e9, 3.1, 0.8),
            ("sgemm_pipelined", "gemm", 4096, 2.8, 201_326_592, 137e9, 1.5, 49_000.0),
            ("direct", "conv2d", 256, 0.005, 1_572_864, 14e6, 1.0, 2.8)]
    summary, counters = [], []
    for index, (kernel, experiment, size, ms, minimal, flops, ratio, gflops) in enumerate(rows):
        check = f"c{index}"
        summary.append({"row_check": check, "experiment": experiment, "kernel": kernel, "variant": "v", "size": size,
                        "stride": 1, "status": "ok", "kernel_ms": ms, "bytes": minimal, "flops": flops,
                        "gflops": gflops})
        counters.append({"cell": f"cell{index}", "row_check": check, "dram_read_bytes": minimal * ratio * 0.5,
                         "dram_write_bytes": minimal * ratio * 0.1, "l2_write_bytes": minimal * ratio * 0.5,
                         "dram_traffic_bytes": minimal * ratio, "top_stall": "long_scoreboard",
                         "smem_bank_conflicts": 12.0 if experiment == "gemm" else "", "fma_pipe_pct": 80.0,
                         "counters_reason": ""})
    pd.DataFrame(summary).to_csv(tmp_path / "summary.csv", index=False)
    pd.DataFrame(counters).to_csv(tmp_path / "counters.csv", index=False)
    return load_counters(tmp_path / "summary.csv", tmp_path / "counters.csv")


def test_findings_name_each_kernels_bottleneck_from_its_counters(tmp_path):
    lines = findings_lines(planted_table(tmp_path), copy_gbps=3000.0, sgemm_gflops=50_000.0)
    by_kernel = {line.split(" ")[0]: line for line in lines}
    assert by_kernel["conv_floor_nchw"] == (
        "conv_floor_nchw (v) at 4096², stride 1 moves 1.02 × the fewest bytes at 91% of copy bandwidth and 0% of the "
        "SGEMM ceiling: memory-bound, at the limit; its warps wait most on global memory (long "
        "scoreboard).")
    assert "moves 3.10 × the fewest bytes at 83% of copy bandwidth" in by_kernel["cudnn"]
    assert "memory-bound, on 3.1 × the traffic it needs: fewer bytes would be faster" in by_kernel["cudnn"]
    assert "98% of the SGEMM ceiling: compute-bound" in by_kernel["sgemm_pipelined"]
    assert "12 shared-memory bank conflicts, FMA pipe 80 % busy" in by_kernel["sgemm_pipelined"]
    assert "at 256², stride 1 moves 1.00 × the fewest bytes at 10% of copy bandwidth" in by_kernel["direct"]
    assert "bound by neither roof: latency" in by_kernel["direct"]


def test_where_seed_002_argues_about_traffic_the_counters_page_answers_with_each_tiling_kernels_finding(tmp_path):
    from convlab.report.counterfindings import counters_page, seed_traffic_lines

    summary, counters = [], []
    for index, (kernel, size, k, ms, ratio) in enumerate([("direct", 4096, 9, 2.0, 1.01), ("tiled_input", 4096, 9, 1.0, 1.0),
                                                          ("tiled_input", 4096, 3, 0.3, 1.0), ("tiled_input", 1024, 9, 0.1, 1.0),
                                                          ("tiled_cached", 4096, 9, 1.5, 1.02)]):
        check, minimal = f"t{index}", 4096 * 4096 * 8
        summary.append({"row_check": check, "experiment": "tiling", "kernel": kernel, "variant": "v", "size": size,
                        "stride": 1, "filter_size": k, "status": "ok", "kernel_ms": ms, "bytes": minimal,
                        "flops": 2 * k * k * size * size, "gflops": 2 * k * k * size * size / ms / 1e6})
        counters.append({"cell": f"c{index}", "row_check": check, "dram_traffic_bytes": minimal * ratio,
                         "top_stall": "barrier", "counters_reason": ""})
    pd.DataFrame(summary).to_csv(tmp_path / "summary.csv", index=False)
    pd.DataFrame(counters).to_csv(tmp_path / "counters.csv", index=False)
    table = load_counters(tmp_path / "summary.csv", tmp_path / "counters.csv")
    ((argument, found),) = seed_traffic_lines(table, copy_gbps=3000.0, sgemm_gflops=50_000.0)
    assert argument.startswith("Seed 002 computes the basic kernel's intensity as 0.25 FLOP per byte")
    assert [line.split(" at ")[0] for line in found] == ["direct (v)", "tiled_cached (v)", "tiled_input (v)"]
    assert all("at 4096², 9×9 filter moves" in line for line in found)
    assert "tiled_cached (v) at 4096², 9×9 filter moves 1.02 × the fewest bytes" in found[1]
    assert "its warps wait most on __syncthreads barriers" in found[1]
    page = counters_page(table, [], "h100", [(argument, found)])
    assert "Where a seed argues about traffic" in page and "9×9 filter" in page
    # no tiling cell with counters: no such section
    assert seed_traffic_lines(table[table["experiment"] == "conv2d"], 3000.0, 50_000.0) == []

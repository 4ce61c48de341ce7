"""The line under a FASTER or SLOWER verdict that says why (cpu, no GPU): its wording from stored
hardware counts (an H200's own report of two versions of a kernel, one with a chain of 40 FMAs a
thread), the counts kept in paired.csv and the verdict CSV, the history page's step, and a verdict
without counts where Nsight Compute is missing or the backend has none: said once, all else as
without a why; and the standby (Nsight Compute and the replay started before their pairs are
known), through a stand-in for Nsight Compute that waits for the plan as the replay does."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import subprocess
import sys
import time

import pandas as pd
import pytest

from convlab.history.pairfile import PairRow, read_pairs, write_pairs
from convlab.history.store import Measurement
from convlab.history.verdictrule import SLOWER, Ratio
from convlab.history.verdicts import CSV_COLUMNS, csv_text, judge, summary_lines
from convlab.history.whyline import why_line
from convlab.measure.ncureport import by_cell, parse_raw_csv
from convlab.measure.whycounters import WHY_METRICS, side_counts
from convlab.pairs.comparewhy import ComparisonWhy, with_why_columns
from convlab.pairs.whyprofile import Explained, WhyProfiler, explain, with_why
from convlab.plan.cell import Cell
from convlab.report.historypage import verdict_note
from convlab.run.whyreplay import PairToExplain, Version

# `ncu --import … --csv --page raw --print-units base` of a kernel launched twice in the ranges
# convlab-cell-0 and convlab-cell-1, on an H200 (Nsight Compute 2025.3): the second launch runs a
# chain of 40 dependent FMAs in each of its 1,048,576 threads.
H200_REPORT = '''"ID","Process ID","Process Name","Host Name","thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg","Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum","launch__occupancy_limit_registers","launch__registers_per_thread","launch__thread_count","lts__t_bytes.sum","sm__maximum_warps_per_active_cycle_pct","sm__warps_active.avg.pct_of_peak_sustained_active","smsp__inst_executed.sum","smsp__issue_active.sum","smsp__sass_thread_inst_executed_op_fadd_pred_on.sum","smsp__sass_thread_inst_executed_op_ffma_pred_on.sum","smsp__sass_thread_inst_executed_op_fmul_pred_on.sum","smsp__warps_issue_stalled_barrier.sum","smsp__warps_issue_stalled_lg_throttle.sum","smsp__warps_issue_stalled_long_scoreboard.sum","smsp__warps_issue_stalled_math_pipe_throttle.sum","smsp__warps_issue_stalled_mio_throttle.sum","smsp__warps_issue_stalled_not_selected.sum","smsp__warps_issue_stalled_short_scoreboard.sum","smsp__warps_issue_stalled_wait.sum"
"","","","","","","","","","","","","","byte","byte","ns","byte","byte","block","register/thread","thread","byte","%","%","inst","cycle","inst","inst","inst","warp","warp","warp","warp","warp","warp","warp","warp"
"0","583","python3.12","127.0.0.1","583  ""<default domain>:convlab-cell-0:none:none:none:none:none:none"" ","","k","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","4,198,400","0","4,960","0","0","16","16","1,048,576","13,417,440","100","67.72","884,736","910,527","1,048,576","0","0","0","0","22,382,237","138,828","1,754,079","795,502","3,055,529","2,023,327"
"1","583","python3.12","127.0.0.1","583  ""<default domain>:convlab-cell-1:none:none:none:none:none:none"" ","","k","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","4,198,400","0","5,504","0","0","16","16","1,048,576","13,466,976","100","73.48","3,080,192","3,105,652","1,048,576","41,943,040","0","0","0","6,448,527","1,968,845","1,556,844","13,752,763","2,302,695","10,137,324"
'''
THRESHOLD = 0.02
CELL = "results/x/cells/cuda/conv2d/kernel~direct/size~1024_stride~1_k~3/block~16.csv"


def stored_sides() -> tuple[dict, dict]:
    ranges = by_cell(parse_raw_csv(H200_REPORT, WHY_METRICS))
    return side_counts(ranges[0]), side_counts(ranges[1])


def test_the_counts_of_each_side_come_from_its_range_in_the_report():
    previous, new = stored_sides()
    assert new["fma_per_thread"] - previous["fma_per_thread"] == 40
    assert (previous["instructions"], new["instructions"]) == (884_736, 3_080_192)
    assert previous["registers"] == new["registers"] == 16 and previous["threads"] == 1_048_576
    assert previous["dram_read_bytes"] == new["dram_read_bytes"] == 4_198_400
    assert previous["profiled_ms"] == pytest.approx(0.00496) and new["local_bytes"] == 0
    assert (previous["top_stall"], new["top_stall"]) == ("long_scoreboard", "not_selected")


def test_the_line_names_what_moved_most_first_with_its_numbers():
    assert why_line(*stored_sides()) == (
        "why: instructions executed +248 % (FMA +40 a thread); DRAM bytes same; registers 16 → 16, occupancy 68 % → "
        "73 %; top stall long_scoreboard → not_selected")


BASE = {"instructions": 1e7, "fma_per_thread": 80.0, "threads": 1e6, "dram_read_bytes": 2e8, "dram_write_bytes": 2.6e8,
        "l2_bytes": 8e8, "local_bytes": 0.0, "registers": 32.0, "occupancy_pct": 84.0, "theoretical_occupancy_pct": 100.0,
        "top_stall": "lg_throttle"}


@pytest.mark.parametrize("change, line", [
    ({"dram_read_bytes": 4.013e8, "l2_bytes": 1.3e9, "instructions": 1.13e7},
     "why: DRAM bytes +44 % (read +201.3 MB); instructions executed +13 %; registers 32 → 32; L2 traffic +62 %"),
    ({"registers": 63.0, "occupancy_pct": 43.0, "theoretical_occupancy_pct": 50.0, "instructions": 1.01e7},
     "why: registers 32 → 63, occupancy 84 % → 43 % (at most 100 % → 50 %); instructions executed same; "
     "DRAM bytes same"),
    ({"local_bytes": 3.2e7, "registers": 255.0},
     "why: local memory (spills) +32.0 MB; instructions executed same; DRAM bytes same; registers 32 → 255, "
     "occupancy 84 % → 84 %"),
    ({}, "why: instructions executed same; DRAM bytes same; registers 32 → 32"),
])
def test_each_kind_of_change_is_named(change, line):
    assert why_line(BASE, {**BASE, **change}) == line


def test_no_counts_no_line():
    assert why_line({}, BASE) == "" and why_line(BASE, {}) == ""


def paired(why: str = "", previous: dict | None = None, new: dict | None = None) -> PairRow:
    return PairRow(CELL, "direct", "old", "new", ratio=Ratio(1.09, 1.08, 1.10, 14), why=why,
                   why_previous=previous or {}, why_new=new or {})


def test_the_counts_are_kept_in_paired_csv_and_in_the_verdict_csv(tmp_path):
    previous, new = stored_sides()
    row = paired(why_line(previous, new), previous, new)
    write_pairs(tmp_path / "paired.csv", [row])
    back = read_pairs(tmp_path / "paired.csv")[CELL]
    assert back.why == row.why and back.why_new["fma_per_thread"] == new["fma_per_thread"]
    assert back.why_previous["top_stall"] == "long_scoreboard" and back.why_new["registers"] == 16
    judged = judge(new_measurement(), previous_measurement(), None, back, threshold=THRESHOLD)
    assert judged.verdict == SLOWER and judged.why == row.why
    (record,) = csv.DictReader(io.StringIO(csv_text([judged])))
    assert list(record) == list(CSV_COLUMNS)
    assert record["why"] == row.why
    assert float(record["why_fma_per_thread_new"]) - float(record["why_fma_per_thread_previous"]) == 40
    assert record["why_instructions_previous"] == "884736.0"
    assert verdict_note(record).endswith(f"14 rounds; {row.why}")
    lines = summary_lines([judged], "x", "r2", "details.csv")
    kernel = next(i for i, line in enumerate(lines) if line.startswith("  direct"))
    assert lines[kernel + 1] == f"    {row.why} [size~1024_stride~1_k~3/block~16]"


def previous_measurement() -> Measurement:
    return Measurement(row_check="p", run_id="r1", cell=CELL, experiment="conv2d", kernel="direct", variant="block~16",
                       status="ok", kernel_ms=1.0, kernel_ms_iqr=0.01, finished_at="", git_commit="",
                       code_version="v", kernel_hash="old", spec_hash="c", gpu_uuid="g", row_json="{}")


def new_measurement() -> dict:
    return {"cell": CELL, "experiment": "conv2d", "kernel": "direct", "variant": "block~16", "status": "ok",
            "kernel_ms": 1.09, "kernel_ms_iqr": 0.01, "code_version": "v", "kernel_hash": "new", "spec_hash": "c",
            "gpu_uuid": "g", "row_json": "{}"}


def a_pair() -> PairToExplain:
    cell = Cell(experiment="conv2d", backend="cuda", kernel="direct", size=64, stride=1, filter_size=3, padding=1,
                in_channels=3, out_channels=4, filter="random", tunables={"block": 16})
    return PairToExplain(cell, None, Version("direct", "/nowhere"), Version("direct"))


@pytest.mark.parametrize("backend, environment, reason", [
    ("cuda", {"PATH": "/nonexistent"}, "Nsight Compute (ncu) is not on PATH"),
    ("cuda", {"CONVLAB_NCU": "/nonexistent/ncu"}, "Nsight Compute (/nonexistent/ncu) could not be started"),
    ("cpu", {}, "no hardware counters on the cpu backend"),
])
def test_without_counts_the_verdict_says_why_once_and_stands(monkeypatch, backend, environment, reason):
    monkeypatch.delenv("CONVLAB_NCU", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert explain([a_pair()], backend).reason.startswith(reason)
    same = PairRow("results/x/cells/same.csv", "direct", "old", "new", ratio=Ratio(1.0, 0.995, 1.005, 9))
    rows, explained = with_why([paired(), same], {CELL: a_pair(), same.cell: a_pair()}, WhyProfiler(backend),
                               THRESHOLD)
    assert explained.reason.startswith(reason)
    assert rows[0].why.startswith(f"why: not read: {reason}") and rows[1].why == ""  # SAME: nothing to explain
    judged = judge(new_measurement(), previous_measurement(), None, rows[0], threshold=THRESHOLD)
    assert judged.verdict == SLOWER
    lines = summary_lines([judged, judged], "x", "r2", "details.csv")
    said = [line for line in lines if "why" in line]
    assert said == [f"  why: not read for 2 cells: {rows[0].why.removeprefix('why: not read: ')}"], lines


# Nsight Compute's stand-in: says when it started, waits for its plan (as a standby replay does),
# then prints the stored H200 page into its log file, as `ncu --csv --page raw --log-file` does.
STAND_IN = """#!{python}
import json, os, sys, time
from pathlib import Path
argv = sys.argv[1:]
with open({said!r}, "a") as said:
    said.write(json.dumps({{"pid": os.getpid(), "standby": "--wait-for-plan" in argv}}) + "\\n")
plan = Path(argv[argv.index("--plan") + 1])
while not plan.is_file():
    time.sleep(0.01)
Path(argv[argv.index("--reasons") + 1]).write_text("{{}}")
Path(argv[argv.index("--log-file") + 1]).write_text({page!r})
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    script = tmp_path / "ncu"
    script.write_text(STAND_IN.format(python=sys.executable, said=str(tmp_path / "said"), page=H200_REPORT))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CONVLAB_NCU", str(script))
    return tmp_path / "said"


def started(said) -> list[dict]:
    return [json.loads(line) for line in said.read_text().splitlines()] if said.is_file() else []


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_standby_started_ahead_explains_the_pairs_it_is_given_and_close_ends_it(stand_in):
    profiler = WhyProfiler("cuda")
    profiler.ready()
    profiler.ready()  # one standby at a time
    deadline = time.monotonic() + 10
    while not started(stand_in) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started(stand_in)[0]["standby"] and len(started(stand_in)) == 1
    explained = profiler.explain([a_pair()])
    assert explained.pairs[0].line == why_line(*stored_sides())
    assert len(started(stand_in)) == 1  # the standby replayed them: no Nsight Compute started for them
    profiler.ready()  # the next one, for the next pairs
    folder, process = profiler.standby.folder, profiler.standby.process.process
    profiler.close()
    assert process.poll() is not None and gone(process.pid)
    assert not folder.exists() and profiler.standby is None


def test_without_a_running_standby_the_pairs_get_a_profile_of_their_own(stand_in):
    profiler = WhyProfiler("cuda")
    assert profiler.explain([a_pair()]).pairs[0].line == why_line(*stored_sides())
    assert [entry["standby"] for entry in started(stand_in)] == [False]
    profiler.ready()
    profiler.standby.process.process.kill()  # a standby that died is replaced, not waited on
    profiler.standby.process.process.wait()
    assert profiler.explain([a_pair()]).pairs[0].line == why_line(*stored_sides())
    assert [entry["standby"] for entry in started(stand_in)][-1] is False
    two = profiler.explain([a_pair(), a_pair()])  # the page holds the first pair's ranges only
    assert two.pairs[0].line and two.pairs[1].reason == "a version's kernels were not profiled"


def test_a_standby_replay_whose_starter_has_gone_leaves_without_touching_the_gpu(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    plan = tmp_path / "plan.json"
    result = subprocess.run([sys.executable, "-m", "convlab", "why-replay", "--plan", str(plan), "--reasons",
                             str(tmp_path / "reasons.json"), "--wait-for-plan", "--parent", str(dead.pid)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "no plan came" in result.stdout and not (tmp_path / "reasons.json").exists()
    assert (tmp_path / "plan.json.ready").is_file() and "Traceback" not in result.stderr


def test_compares_table_gets_each_explained_cells_line_and_both_sides_counts():
    previous, new = stored_sides()
    table = pd.DataFrame({"verdict": ["SLOWER", "SAME", "FASTER"]}, index=[4, 7, 9])
    found = ComparisonWhy({4: Explained(why_line(previous, new), previous, new), 9: Explained(reason="no versions")})
    explained = with_why_columns(table, found)
    assert list(explained["why"]) == [why_line(previous, new), "", "why: not read: no versions"]
    assert explained.loc[4, "why_instructions_a"] == 884_736 and explained.loc[4, "why_instructions_b"] == 3_080_192
    assert explained.loc[4, "why_top_stall_b"] == "not_selected" and explained.loc[9, "why_instructions_a"] == ""
    assert found.explained == 1
    assert "why_instructions_b" in pd.read_csv(io.StringIO(explained.to_csv(index=False))).columns

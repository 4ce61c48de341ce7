"""python -m convlab compare A B: two result sets cell by cell, on small synthetic summaries."""

import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import convlab

from convlab.history.compare import CompareError, compare_sets, kernel_lines
from convlab.history.verdictpolicy import DRIFT_FLOOR, LAUNCH_BOUND_FLOOR
from convlab.history.verdictrule import FASTER, MISSING, SAME, SLOWER, UNCLEAR, verdict
from convlab.measure.row import COLUMNS
from convlab.report.comparepage import compare_paths

REPO = Path(__file__).resolve().parents[1]


def _row(kernel: str = "direct", size: int = 256, stride: int = 1, ms: float = 1.0, spread: float = 0.02,
         experiment: str = "conv2d", status: str = "ok", **values) -> dict:
    """One summary row: the cell, and a median with its min, max and IQR (relative ``spread``)."""
    row = dict.fromkeys(COLUMNS, math.nan)
    row.update(experiment=experiment, kernel=kernel, variant="default", backend="cuda", size=size, batch=1,
               H=size, W=size, C_in=3, C_out=3, filter_size=3, stride=stride, padding=1, status=status,
               kernel_ms=ms, kernel_ms_min=ms * (1 - spread), kernel_ms_max=ms * (1 + 2 * spread),
               kernel_ms_iqr=ms * spread, reps=30, device="NVIDIA H100 80GB HBM3", git_commit="abc123",
               code_version="c0de")
    if status != "ok":
        row.update(kernel_ms=math.nan, kernel_ms_min=math.nan, kernel_ms_max=math.nan, kernel_ms_iqr=math.nan,
                   reason="a reason")
    row.update(values)
    return row


def _summary(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def _cells() -> list[dict]:
    """Four conv2d direct cells and two cudnn cells, all about 1 ms with a 2 % spread."""
    return ([_row("direct", size, stride) for size in (256, 512) for stride in (1, 2)]
            + [_row("cudnn", size, 1, ms=0.5) for size in (256, 512)])


def _scaled(row: dict, factor: float) -> dict:
    return {**row, **{k: row[k] * factor for k in ("kernel_ms", "kernel_ms_min", "kernel_ms_max", "kernel_ms_iqr")}}


def _verdicts(table: pd.DataFrame) -> dict:
    return {(r.kernel, r.size, r.stride): r.verdict for r in table.itertuples()}


def test_identical_sets_are_all_same():
    table = compare_sets(_summary(_cells()), _summary(_cells()), DRIFT_FLOOR)
    assert len(table) == 6
    assert set(table["verdict"]) == {SAME}
    assert (table["ratio"] == 1.0).all()


@pytest.mark.parametrize("factor, expected", [(2.0, SLOWER), (0.5, FASTER)])
def test_one_cell_twice_as_slow_or_fast_is_called_so_and_the_others_are_same(factor, expected):
    b = _cells()
    b[1] = _scaled(b[1], factor)
    table = compare_sets(_summary(_cells()), _summary(b), DRIFT_FLOOR)
    verdicts = _verdicts(table)
    assert verdicts.pop(("direct", "256", "2")) == expected
    assert set(verdicts.values()) == {SAME}
    changed = table.loc[table["verdict"] == expected].iloc[0]
    assert changed["ratio"] == pytest.approx(factor)
    # the interval: where a rerun with nothing changed would put the ratio (the floor each side)
    assert (changed["ratio_low"], changed["ratio_high"]) == pytest.approx(
        (factor / (1 + changed["floor"]), factor * (1 + changed["floor"])))


def test_a_change_within_a_wide_spread_is_unclear():
    a, b = _cells(), _cells()
    a[0] = _row("direct", 256, 1, spread=0.30)
    b[0] = _scaled(_row("direct", 256, 1, spread=0.30), 1.15)
    table = compare_sets(_summary(a), _summary(b), DRIFT_FLOOR)
    assert _verdicts(table)[("direct", "256", "1")] == UNCLEAR
    assert (table["verdict"] == SAME).sum() == 5


def test_verdict_rule():
    # within the floor: SAME, whatever the spread
    assert verdict(1.0, 0.01, 1.07, 0.01, DRIFT_FLOOR)[0] == SAME
    assert verdict(1.0, 0.5, 1.07, 0.5, DRIFT_FLOOR)[0] == SAME
    # beyond the floor and twice the noise: a change, in either direction, judged symmetrically
    assert verdict(1.0, 0.01, 1.10, 0.01, DRIFT_FLOOR)[0] == SLOWER
    assert verdict(1.0, 0.01, 1 / 1.10, 0.01, DRIFT_FLOOR)[0] == FASTER
    # beyond the floor but within a moderate noise: SAME (nvbench's rule); within twice it: UNCLEAR
    assert verdict(1.0, 0.12, 1.12, 0.12 * 1.12, DRIFT_FLOOR)[0] == SAME
    assert verdict(1.0, 0.08, 1.15, 0.08 * 1.15, DRIFT_FLOOR)[0] == UNCLEAR
    # an unknown spread cannot clear a change beyond the floor
    assert verdict(1.0, math.nan, 1.5, 0.01, DRIFT_FLOOR)[0] == UNCLEAR
    # launch-bound kernels get the wider floor; --floor moves the drift floor
    assert verdict(0.005, 0.0001, 0.0057, 0.0001, DRIFT_FLOOR)[:3:2] == (SAME, LAUNCH_BOUND_FLOOR)
    assert verdict(0.005, 0.0001, 0.0057, 0.0001, DRIFT_FLOOR, own_floor=True)[0] == SLOWER
    assert verdict(0.5, 0.005, 0.57, 0.005, DRIFT_FLOOR)[0] == SLOWER
    assert verdict(1.0, 0.01, 1.10, 0.01, 0.12)[0] == SAME
    word, ratio, floor, noise = verdict(2.0, 0.04, 3.0, 0.06, DRIFT_FLOOR)
    assert (word, ratio, floor, noise) == (SLOWER, 1.5, DRIFT_FLOOR, pytest.approx(math.hypot(0.02, 0.02)))


def test_cells_in_one_set_only_are_missing_with_no_ratio():
    a, b = _cells(), _cells()
    del b[0]
    b.append(_row("direct", 1024, 1))
    table = compare_sets(_summary(a), _summary(b), DRIFT_FLOOR, labels=("main", "branch"))
    missing = table[table["verdict"] == MISSING]
    assert sorted(missing["note"]) == ["only in branch", "only in main"]
    assert missing["ratio"].isna().all()
    assert (table["verdict"] == SAME).sum() == 5


def test_cells_not_ok_in_either_set_get_their_statuses_not_a_ratio():
    a, b = _cells(), _cells()
    b[0] = _row("direct", 256, 1, status="wrong", kernel_ms=1.0)
    a[1] = _row("direct", 256, 2, status="oom")
    b[1] = _row("direct", 256, 2, status="oom")
    table = compare_sets(_summary(a), _summary(b), DRIFT_FLOOR)
    verdicts = _verdicts(table)
    assert verdicts[("direct", "256", "1")] == "ok/wrong"
    assert verdicts[("direct", "256", "2")] == "oom/oom"
    assert table.loc[~table["verdict"].isin([SAME]), "ratio"].isna().all()


def test_cells_match_across_backends_and_number_formats():
    b = _summary([{**r, "backend": "cpu", "device": "AMD EPYC"} for r in _cells()])
    b["size"] = b["size"].astype(str)  # "256" in one file, 256.0 in the other
    table = compare_sets(_summary(_cells()), b, DRIFT_FLOOR)
    assert len(table) == 6 and set(table["verdict"]) == {SAME}


def test_kernel_lines_give_the_geomean_and_counts_per_kernel_and_overall():
    b = _cells()
    b[0] = _scaled(b[0], 2.0)
    del b[5]  # a cudnn cell missing in B
    lines = kernel_lines(compare_sets(_summary(_cells()), _summary(b), DRIFT_FLOOR))
    assert lines == [
        "conv2d cudnn: geomean B/A 1.00 over 1 cells; 0 FASTER, 0 SLOWER, 1 SAME, 0 UNCLEAR; 1 MISSING",
        f"conv2d direct: geomean B/A {2 ** 0.25:.2f} over 4 cells; 0 FASTER, 1 SLOWER, 3 SAME, 0 UNCLEAR",
        f"overall: geomean B/A {2 ** 0.2:.2f} over 5 cells; 0 FASTER, 1 SLOWER, 4 SAME, 0 UNCLEAR; 1 MISSING",
    ]


def test_a_rerun_with_a_few_percent_of_noise_is_same(tmp_path):
    """A realistic summary (times from microseconds to tens of milliseconds, spreads from tight to
    wide), every cell moved by up to ±3 %, as a rerun of the same code moves it."""
    rng = np.random.default_rng(7)
    rows = []
    for index in range(400):
        ms = float(10 ** rng.uniform(-2.5, 1.5))
        spread = float(10 ** rng.uniform(-2.5, -0.5))
        rows.append(_row(f"k{index % 8}", 64 * (1 + index // 8), 1, ms=ms, spread=spread))
    rerun = [_scaled(row, 1 + rng.uniform(-0.03, 0.03)) for row in rows]
    for row in rerun:  # the spread is measured again too
        row["kernel_ms_iqr"] *= rng.uniform(0.7, 1.3)
    verdicts = compare_sets(_summary(rows), _summary(rerun), DRIFT_FLOOR)["verdict"]
    assert (verdicts == SAME).mean() >= 0.95
    assert verdicts.isin([SAME, UNCLEAR]).all()


def _write(tmp_path: Path, name: str, rows: list[dict]) -> Path:
    path = tmp_path / name / "summary.csv"
    path.parent.mkdir(parents=True)
    _summary(rows).to_csv(path, index=False)
    return path


def compare(*args: str) -> subprocess.CompletedProcess:
    return convlab("compare", *args, timeout=120)


def test_cli_on_two_folders_prints_the_report_and_writes_csv_and_html(tmp_path):
    b = _cells()
    b[2] = _scaled(b[2], 2.0)
    b = [{**row, "git_commit": "def456", "device": "NVIDIA A100-SXM4-40GB"} for row in b]
    _write(tmp_path, "h100", _cells())
    _write(tmp_path, "a100", b)
    result = compare(str(tmp_path / "h100"), str(tmp_path / "a100"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "NVIDIA H100 80GB HBM3" in out and "NVIDIA A100-SXM4-40GB" in out
    assert "abc123" in out and "def456" in out and "c0de" in out
    assert "conv2d direct: geomean B/A 1.19 over 4 cells; 0 FASTER, 1 SLOWER, 3 SAME, 0 UNCLEAR" in out
    assert "overall:" in out
    csv = tmp_path / "h100" / "compare_h100_vs_a100.csv"
    table = pd.read_csv(csv)
    assert len(table) == 6 and (table["verdict"] == SLOWER).sum() == 1
    page = csv.with_suffix(".html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "SLOWER" in page and "NVIDIA A100-SXM4-40GB" in page


def test_floor_option_and_explicit_outputs(tmp_path):
    b = _cells()
    b[0] = _scaled(b[0], 1.10)
    a_csv, b_csv = _write(tmp_path, "a", _cells()), _write(tmp_path, "b", b)
    out, page = tmp_path / "cmp.csv", tmp_path / "cmp.html"
    report = compare_paths(a_csv, b_csv, 0.12, out, page)
    assert "overall: geomean B/A 1.02 over 6 cells; 0 FASTER, 0 SLOWER, 6 SAME, 0 UNCLEAR" in report
    assert out.is_file() and page.is_file() and (pd.read_csv(out)["verdict"] == SAME).all()
    assert "overall: geomean B/A 1.02 over 6 cells; 0 FASTER, 1 SLOWER, 5 SAME" in compare_paths(a_csv, b_csv, DRIFT_FLOOR, out, page)


def test_a_set_measuring_one_cell_twice_is_refused(tmp_path):
    with pytest.raises(CompareError, match="more than once"):
        compare_sets(_summary(_cells() + _cells()[:1]), _summary(_cells()), DRIFT_FLOOR)


@pytest.mark.parametrize("case, starts", [
    ("missing", "error: "),
    ("folder without a summary", "error: "),
    ("not a summary", "error: "),
    ("no common cells", "error: A"),
    ("bad floor", "error: --floor"),
    ("the floor's old name", "error: --threshold is now --floor"),
])
def test_bad_input_is_one_error_line_and_exit_2(tmp_path, case, starts):
    a = _write(tmp_path, "A", _cells())
    args = [str(a)]
    if case == "missing":
        args.append(str(tmp_path / "nowhere.csv"))
    elif case == "folder without a summary":
        (tmp_path / "empty").mkdir()
        args.append(str(tmp_path / "empty"))
    elif case == "not a summary":
        (tmp_path / "other.csv").write_text("x,y\n1,2\n")
        args.append(str(tmp_path / "other.csv"))
    elif case == "no common cells":
        args.append(str(_write(tmp_path, "B", [_row("direct", 4096, 1)])))
    elif case == "bad floor":
        args += [str(a), "--floor", "5"]
    else:
        args += [str(a), "--threshold", "0.1"]
    result = compare(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr


@pytest.mark.parametrize("b_uuid, expected", [
    ("GPU-1111", "A and B ran on the same GPU board: GPU-1111"),
    ("GPU-2222", "A and B ran on different GPU boards (GPU-1111 vs GPU-2222): a difference may be the boards'"),
])
def test_the_report_says_whether_both_sets_ran_on_the_same_board(tmp_path, b_uuid, expected):
    _write(tmp_path, "first", [{**row, "gpu_uuid": "GPU-1111"} for row in _cells()])
    _write(tmp_path, "second", [{**row, "gpu_uuid": b_uuid} for row in _cells()])
    result = compare(str(tmp_path / "first"), str(tmp_path / "second"))
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_a_change_between_two_cpu_sets_is_unconfirmed_and_a_gpu_one_is_not():
    """The cpu backend shares its host: a 50 % slow-down there is UNCLEAR with its note, so that
    --fail-on slower does not fail on it; the same between two GPU sets is SLOWER."""
    on_gpu = compare_sets(_summary(_cells()), _summary([_scaled(r, 1.5) for r in _cells()]), DRIFT_FLOOR)
    cpu = [{**r, "backend": "cpu"} for r in _cells()]
    on_cpu = compare_sets(_summary(cpu), _summary([_scaled(r, 1.5) for r in cpu]), DRIFT_FLOOR)
    assert set(on_gpu["verdict"]) == {"SLOWER"}
    assert set(on_cpu["verdict"]) == {"UNCLEAR"}
    assert set(on_cpu["note"]) == {"unconfirmed SLOWER: the cpu backend shares its host"}
    # a GPU that throttled while it measured one side is no quiet host either
    throttled = compare_sets(_summary(_cells()), _summary([{**_scaled(r, 1.5), "throttled": "yes"} for r in _cells()]),
                             DRIFT_FLOOR)
    assert set(throttled["verdict"]) == {"UNCLEAR"}
    assert set(throttled["note"]) == {"unconfirmed SLOWER: B measured while the GPU throttled (its clock or a "
                                      "slowdown reason, in the row's telemetry)"}
    # so is the baseline: a slow-down of the baseline is not a speed-up of B
    disturbed = compare_sets(_summary([{**_scaled(r, 2.0), "gpu_neighbours": 1} for r in _cells()]),
                             _summary(_cells()), DRIFT_FLOOR, labels=("run1", "run2"))
    assert set(disturbed["verdict"]) == {"UNCLEAR"}
    assert set(disturbed["note"]) == {"unconfirmed FASTER: run1 measured while other processes used the GPU"}
    waited = compare_sets(_summary([{**_scaled(r, 2.0), "phase_ms": "lock_wait=250.0;place=1.0"} for r in _cells()]),
                          _summary(_cells()), DRIFT_FLOOR)
    assert set(waited["note"]) == {"unconfirmed FASTER: A measured while another process measured on this GPU"}


def test_the_gate_passes_a_slow_down_measured_beside_another_process_with_its_warning(tmp_path):
    beside = _cells()
    beside[2] = {**_scaled(beside[2], 2.0), "gpu_neighbours": 1, "gpu_neighbour_names": "4242 python3"}
    _write(tmp_path, "before", _cells())
    _write(tmp_path, "after", beside)
    result = compare(str(tmp_path / "before"), str(tmp_path / "after"), "--fail-on", "slower")
    assert result.returncode == 0, result.stderr
    assert "1 UNCLEAR" in result.stdout and "0 SLOWER" in result.stdout
    assert result.stderr.strip() == ("warning: 1 cells were timed while other processes used the GPU: their "
                                     "FASTER/SLOWER are UNCLEAR, and --fail-on slower does not fail on them")
    alone = _cells()
    alone[2] = _scaled(alone[2], 2.0)
    _write(tmp_path, "alone", alone)
    assert compare(str(tmp_path / "before"), str(tmp_path / "alone"), "--fail-on", "slower").returncode == 1

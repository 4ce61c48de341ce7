"""Paired re-measurement: the interleaved rounds and their interval on synthetic versions of known
speed (power and false-alarm rate), the verdict of an interval, and a paired cell's verdict line."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from convlab.history.pairfile import PairRow, read_pairs, write_pairs
from convlab.history.store import Measurement
from convlab.history.verdictrule import FASTER, SAME, SLOWER, UNCLEAR, Ratio, verdict_of_interval
from convlab.history.verdicts import CSV_COLUMNS, CellVerdict, csv_records, judge, summary_lines
from convlab.measure.interleave import MIN_ROUNDS, SYSTEMATIC, Side, bootstrap_interval, interleave, round_orders

THRESHOLD = 0.02
PRECISION = THRESHOLD / 4


class Device:
    """Two versions on one synthetic device: each run's time is the version's own times a drift
    both share (clocks, temperature: it moves between rounds) times its own noise."""

    def __init__(self, seed: int, run_noise: float = 0.03, drift: float = 0.01) -> None:
        self.rng = np.random.default_rng(seed)
        self.run_noise, self.drift = run_noise, drift
        self.level = 1.0

    def side(self, ms: float, clock: float | None = None) -> Side:
        def sample(n: int) -> tuple[list[float], float | None]:
            # the shared drift wanders between batches: what a run-to-run comparison cannot tell apart
            self.level *= math.exp(self.rng.normal(0, self.drift))
            noise = np.exp(self.rng.normal(0, self.run_noise, n))
            return list(ms * self.level * noise), clock
        return Side(sample)


def verdict_for(shift: float, seed: int) -> str:
    device = Device(seed)
    result = interleave(device.side(0.05), device.side(0.05 * (1 + shift)), PRECISION, budget_s=5.0)
    return verdict_of_interval(result.low, result.high, THRESHOLD)


def test_nothing_changed_is_same_in_at_least_99_percent_of_pairs():
    verdicts = [verdict_for(0.0, seed) for seed in range(200)]
    assert verdicts.count(SAME) >= 198
    assert verdicts.count(SLOWER) + verdicts.count(FASTER) <= 2


# A change of 1.5 thresholds sits where the interval (a quarter threshold each side, plus the
# systematic term) still touches the threshold now and then: about 92 % of 500 synthetic pairs find
# it; from 2.5 thresholds on, all do.
@pytest.mark.parametrize("shift, word, found", [(0.03, SLOWER, 88), (0.05, SLOWER, 95), (0.10, SLOWER, 95),
                                                (-0.05, FASTER, 95)])
def test_a_change_of_known_size_is_found_in_most_pairs(shift, word, found):
    verdicts = [verdict_for(shift, seed) for seed in range(100)]
    assert verdicts.count(word) >= found
    assert verdicts.count(SAME) == 0 and verdicts.count(FASTER if word == SLOWER else SLOWER) == 0


def test_the_ratio_and_its_interval_hold_the_true_change():
    device = Device(7)
    result = interleave(device.side(0.05), device.side(0.05 * 1.04), PRECISION, budget_s=5.0)
    assert result.low < 1.04 < result.high
    assert result.stop == "precise" and result.rounds >= MIN_ROUNDS
    assert (result.high / result.low) ** 0.5 - 1 <= math.hypot(PRECISION, SYSTEMATIC) * 1.2
    assert (result.high / result.low) ** 0.5 - 1 >= SYSTEMATIC  # never narrower than what rounds cannot see


def test_a_clock_that_differs_between_the_versions_is_compared_in_cycles():
    """The new version ran at a 10 % lower clock and took 1/0.9 as long: the same cycles."""
    device = Device(3, drift=0.0)
    result = interleave(device.side(1.0, clock=1980.0), device.side(1.0 / 0.9, clock=1782.0), PRECISION, 5.0)
    assert result.clock_normalised
    assert result.low <= 1.0 <= result.high
    plain = interleave(device.side(1.0), device.side(1.0 / 0.9), PRECISION, 5.0)
    assert not plain.clock_normalised and plain.low > 1.1


def test_a_disturbance_with_a_cycle_of_four_batches_is_no_difference_between_two_equal_versions():
    """Every batch at places 0 and 3 of each four runs 4 % slower (something in the process or the
    GPU that repeats with the batches): a strict alternation of which version goes first would put
    one version on those places every round and call it SLOWER."""
    batches = [0]

    def side(ms: float) -> Side:
        def sample(n: int) -> tuple[list[float], float | None]:
            place = batches[0] % 4
            batches[0] += 1
            return [ms * (1.04 if place in (0, 3) else 1.0)] * n, None
        return Side(sample)

    result = interleave(side(0.05), side(0.05), PRECISION, budget_s=5.0)
    assert verdict_of_interval(result.low, result.high, THRESHOLD) in (SAME, UNCLEAR)
    assert abs(math.log(result.ratio)) < 0.01


def test_the_order_of_the_rounds_is_balanced_and_not_a_cycle():
    orders = round_orders()
    firsts = [next(orders) for _ in range(200)]
    assert all(firsts[i] != firsts[i + 1] for i in range(0, 200, 2))  # each block: one of each order
    blocks = firsts[::2]
    assert blocks.count(True) not in (0, 100)
    assert any(blocks[i] == blocks[i + 1] for i in range(99)) and any(blocks[i] != blocks[i + 1] for i in range(99))
    assert firsts == [next(iter_) for iter_ in [round_orders()] for _ in range(200)]  # seeded: the same each time


def test_the_budget_stops_a_noisy_pair_with_a_wide_interval():
    device = Device(11, run_noise=0.3)
    result = interleave(device.side(1.0), device.side(1.0), PRECISION, budget_s=0.0)
    assert result.stop == "budget" and result.rounds == 3
    assert verdict_of_interval(result.low, result.high, THRESHOLD) == UNCLEAR


def test_the_bootstrap_is_reproducible_and_few_values_get_students_width():
    logs = list(np.random.default_rng(0).normal(0.01, 0.002, 40))
    assert bootstrap_interval(logs) == bootstrap_interval(logs)
    low, high = bootstrap_interval(logs)
    assert low < 0.01 < high
    few_low, few_high = bootstrap_interval(logs[:4])
    assert few_high - few_low > high - low
    assert bootstrap_interval([0.01]) == (-math.inf, math.inf)


@pytest.mark.parametrize("low, high, word", [
    (1.025, 1.035, SLOWER), (0.96, 0.97, FASTER), (0.99, 1.01, SAME), (1.01, 1.03, UNCLEAR), (0.97, 0.99, UNCLEAR)])
def test_the_verdict_of_an_interval(low, high, word):
    assert verdict_of_interval(low, high, THRESHOLD) == word


def previous_measurement(kernel_hash: str = "old") -> Measurement:
    return Measurement(row_check="p", run_id="r1", cell="results/x/cells/c.csv", experiment="conv2d", kernel="direct",
                       variant="b16", status="ok", kernel_ms=1.0, kernel_ms_iqr=0.01, finished_at="", git_commit="",
                       code_version="v", kernel_hash=kernel_hash, spec_hash="c", gpu_uuid="g", row_json="{}")


def new_measurement(kernel_hash: str = "new") -> dict:
    return {"cell": "results/x/cells/c.csv", "experiment": "conv2d", "kernel": "direct", "variant": "b16",
            "status": "ok", "kernel_ms": 1.3, "kernel_ms_iqr": 0.01, "code_version": "v", "kernel_hash": kernel_hash,
            "spec_hash": "c", "gpu_uuid": "g", "row_json": '{"backend": "cpu"}'}


def test_a_paired_cell_is_judged_by_its_interval_even_on_a_busy_host(tmp_path):
    """The run-to-run ratio here is x1.30, on the cpu backend (whose FASTER/SLOWER is otherwise
    UNCLEAR); the pair says x1.031 [1.025, 1.037]."""
    pair = PairRow("results/x/cells/c.csv", "direct", "old", "new", ratio=Ratio(1.031, 1.025, 1.037, 12))
    write_pairs(tmp_path / "paired.csv", [pair, PairRow("other.csv", "fft", "a", "b", note="a library kernel")])
    pairs = read_pairs(tmp_path / "paired.csv")
    assert pairs["results/x/cells/c.csv"] == pair and not pairs["other.csv"].measured
    judged = judge(new_measurement(), previous_measurement(), None, pairs["results/x/cells/c.csv"],
                   threshold=THRESHOLD)
    assert (judged.verdict, judged.ratio.value, judged.ratio.low, judged.ratio.high, judged.ratio.rounds) == (
        SLOWER, 1.031, 1.025, 1.037, 12)
    assert judged.unconfirmed is None
    unpaired = judge(new_measurement(), previous_measurement(), None, None, threshold=THRESHOLD)
    assert unpaired.verdict == UNCLEAR and unpaired.unconfirmed
    line = summary_lines([judged], "x", "r2", "details.csv")[1]
    assert "1 SLOWER; time x1.031 [1.025, 1.037] (geomean new/previous, 1 paired); changed: kernel files" in line
    assert read_pairs(tmp_path / "missing.csv") == {}


def test_the_cells_to_pair_are_those_whose_kernel_files_changed_since_a_kept_version(tmp_path, monkeypatch):
    """Run 1 records the cells with their kernel files; run 2 re-measures them after an edit (the
    kernel hash planted): each is a candidate, a source kernel's previous version is restored as a
    kernel of its own, a library kernel's says why it cannot run again."""
    from convlab.history import record as record_module
    from convlab.history.kernelversions import VersionUnavailable
    from convlab.history.pairing import candidates, restore_previous
    from convlab.history.record import record
    from convlab.measure.row import build_row, write_row_atomically
    from convlab.measure.rowjournal import keep_unrecorded
    from convlab.plan.config import validate_config
    from convlab.plan.grid import build_cells
    from convlab.plan.registry import read_kernel_folder

    monkeypatch.chdir(tmp_path)
    config = validate_config({"backend": "cuda", "conv2d": {"sizes": [64], "strides": [1], "kernels": ["direct", "cudnn"]},
                              "kernels": {"direct": {"block": [16]}, "cudnn": {"plan": ["heuristic"]}},
                              "tiling": {"enabled": False}, "winograd_layers": {"enabled": False},
                              "gemm": {"enabled": False}})
    cells = build_cells(config, "cuda", "testgpu")
    results = tmp_path / "results" / "testgpu"

    def measure(run_id: str) -> None:
        for cell in cells:
            values = {"experiment": cell.experiment, "kernel": cell.kernel, "variant": cell.variant, "backend": "cuda",
                      "size": cell.size, "stride": cell.stride, "filter_size": cell.filter_size, "status": "ok",
                      "kernel_ms": 1.0, "kernel_ms_iqr": 0.01, "reps": 20, "max_rel_err": 1e-7, "tolerance": 1e-4,
                      "flops": 1000, "gflops": 0.001, "device": "H100", "code_version": "abc", "gpu_uuid": "GPU-a",
                      "git_commit": "c0ffee", "started_at": f"2026-11-2{run_id[-1]}T10:00:00",
                      "finished_at": f"2026-11-2{run_id[-1]}T10:00:01"}
            write_row_atomically(build_row([values]), cell.path)
            keep_unrecorded(cell.path, run_id)

    assert candidates(results, cells, "run-1") == ([], None)  # no database yet: a first run pairs nothing
    measure("run-1")
    record(results, cells, "testgpu", THRESHOLD, run_id="run-1")
    measure("run-2")
    found, connection = candidates(results, cells, "run-2")
    assert found == [] and connection is not None  # nothing was edited
    connection.close()
    real = record_module.KernelHashes.__call__
    monkeypatch.setattr(record_module.KernelHashes, "__call__",
                        lambda self, kernel, backend: "edited" + real(self, kernel, backend)[:6])
    found, connection = candidates(results, cells, "run-2")
    try:
        assert sorted(c.cell.kernel for c in found) == ["cudnn", "direct"]
        assert all(c.kernel_hash.startswith("edited") and c.previous_ms == 1.0 for c in found)
        direct = next(c for c in found if c.cell.kernel == "direct")
        folder, name = restore_previous(connection, direct, tmp_path / "versions")
        assert name == f"direct@{direct.previous_hash}"
        assert read_kernel_folder(folder)[name].stages[0]["function"] == "conv2d_direct_hwc"
        with pytest.raises(VersionUnavailable, match="only those run again"):
            restore_previous(connection, next(c for c in found if c.cell.kernel == "cudnn"), tmp_path / "versions")
        assert candidates(results, cells, "run-1")[0] == []  # another run's rows are not this run's to pair
    finally:
        connection.close()


def test_the_pair_step_writes_an_empty_file_where_nothing_can_be_paired(tmp_path, monkeypatch):
    """No database yet (a first run), and pairing turned off: no device is touched (this machine
    may have none) and the record step reads an empty file."""
    monkeypatch.setenv("CONVLAB_SERVICE", "off")  # in this process: the service's cuda worker needs CuPy
    from convlab.app.cli import main
    from convlab.plan.config import validate_config
    from convlab.plan.grid import build_cells
    from convlab.plan.gridfile import save_grid

    for verdicts in ({}, {"paired": False}):
        config = validate_config({"backend": "cuda", "verdicts": verdicts})
        out = tmp_path / "paired.csv"
        grid = save_grid(config, build_cells(config, "cuda", "h100"), "h100", tmp_path)
        assert main(["pair", "--results", str(tmp_path / "results"), "--backend", "cuda", "--device", "h100",
                     "--grid", str(grid), "--run-id", "run-1", "--out", str(out)]) == 0
        assert read_pairs(out) == {} and out.read_text().startswith("cell,kernel,previous_hash")


def history_page(folder: Path, judged: CellVerdict) -> str:
    """The history page of the device folder ``folder`` whose latest run's verdicts (its latest.csv, as the
    record step writes it) are ``judged`` alone: the page's text."""
    from convlab.report.historypage import write_history_page

    latest = folder / "latest.csv"
    with open(latest, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_records([judged]))
    write_history_page(folder, latest, folder / "history.png", folder / "history.html")
    return (folder / "history.html").read_text()


def test_the_history_page_shows_a_paired_cells_interval_and_how_it_was_measured(tmp_path):
    pair = PairRow("results/x/cells/c.csv", "direct", "old", "new", ratio=Ratio(1.031, 1.025, 1.037, 12))
    judged = judge(new_measurement(), previous_measurement(), None, pair, threshold=THRESHOLD)
    folder = tmp_path / "h200"  # results/<device>: no database there yet
    folder.mkdir()
    page = history_page(folder, judged)
    assert "1.031 [1.025, 1.037]" in page
    assert "paired: side by side with the previous version, 12 rounds" in page
    # a verdict, a name or a number is never broken inside; the cell's path breaks after a slash
    assert "white-space:nowrap" in page and "overflow-wrap:anywhere" not in page
    assert '<td class="wrap">results/<wbr>x/<wbr>cells/<wbr>c.csv</td>' in page


def test_a_pair_of_the_same_machine_code_is_same_without_rounds_and_says_so(tmp_path):
    pair = PairRow("results/x/cells/c.csv", "direct", "old", "new", ratio=Ratio(1.0, 1.0, 1.0, 0), stop="same_code")
    write_pairs(tmp_path / "paired.csv", [pair])
    judged = judge(new_measurement(), previous_measurement(), None,
                   read_pairs(tmp_path / "paired.csv")["results/x/cells/c.csv"], threshold=THRESHOLD)
    assert (judged.verdict, judged.ratio.value, judged.ratio.rounds) == (SAME, 1.0, 0)
    line = summary_lines([judged], "x", "r2", "details.csv")[1]
    assert "1 SAME; time x1.000 [1.000, 1.000] (geomean new/previous, 1 the same machine code)" in line
    assert ("the same machine code as the previous version, launched alike: not timed again"
            in history_page(tmp_path, judged))


def test_the_same_machine_code_launched_otherwise_is_not_the_same_code():
    from dataclasses import replace

    from convlab.backends.base import PreparedKernel
    from convlab.plan.registry import get_kernel
    from convlab.run.paired import same_code
    from convlab.run.steps import Prepared

    def prepared(module_hash, launch="k: grid (4, 4, 1) block (16, 16, 1) smem 0 regs 32"):
        return Prepared(PreparedKernel(lambda: None, {"module_hash": module_hash, "launch": launch}), 0.0)

    spec = get_kernel("direct")
    assert same_code(prepared("abc"), spec, prepared("abc"), spec)
    assert not same_code(prepared("abc"), spec, prepared("abd"), spec)
    assert not same_code(prepared(None), spec, prepared(None), spec)  # compiles nothing: timed
    assert not same_code(prepared("abc"), spec, prepared("abc", "k: grid (8, 4, 1) block (16, 16, 1) smem 0 regs 32"),
                         spec)
    assert not same_code(prepared("abc"), spec, prepared("abc"), replace(spec, defines={**spec.defines, "X": 1}))
    assert not same_code(prepared("abc"), spec, prepared("abc"), replace(spec, tunables={"block": [8]}))

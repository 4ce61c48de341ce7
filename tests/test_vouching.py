"""Only measurements the lab can vouch for, without a GPU: a disturbed baseline never makes a
FASTER or SLOWER by the history's rule, a pair stands where the previous row cannot be the measure of
its version, and both sides of a pair are sampled alike, near the graph line too."""

from __future__ import annotations

import csv
import io
import json

import pytest

from convlab.backends.base import PreparedKernel
from convlab.history.pairfile import PairRow, read_pairs, write_pairs
from convlab.history.store import Measurement
from convlab.history.verdictrule import FASTER, SAME, UNCLEAR, Ratio
from convlab.history.verdicts import judge, summary_lines
from convlab.history.vouching import NEIGHBOURED, THROTTLED, doubt, why_unvouched
from convlab.measure.interleave import PairedResult, interleave
from convlab.pairs.pairmeasure import recorded_side
from convlab.pairs.selfcheck import SelfCheck, SelfCheckCell
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.run.paired import GRAPH_BELOW_MS, PairRefused, Recorded, prove_same_speed, sides
from convlab.run.steps import Prepared

THRESHOLD = 0.02  # config verdicts.threshold's default
CLEAN = {"backend": "cuda", "gpu_neighbours": 0, "throttled": "no", "phase_ms": "lock_wait=0.2;place=1.0"}


def kept(ms: float, row: dict) -> Measurement:
    return Measurement(row_check="p", run_id="run1", cell="c", experiment="conv2d", kernel="sgemm_naive", variant="v",
                       status="ok", kernel_ms=ms, kernel_ms_iqr=0.001 * ms, finished_at="t", git_commit="g",
                       code_version="v", kernel_hash="old", spec_hash="c", gpu_uuid="GPU-1",
                       row_json=json.dumps(row))


def fresh(ms: float, row: dict) -> dict:
    return {"cell": "c", "experiment": "conv2d", "kernel": "sgemm_naive", "variant": "v", "status": "ok",
            "kernel_ms": ms, "kernel_ms_iqr": 0.001 * ms, "kernel_hash": "new", "code_version": "v",
            "spec_hash": "c", "gpu_uuid": "GPU-1", "input_hash": "", "row_json": json.dumps(row)}


@pytest.mark.parametrize("disturbed, reason", [
    ({**CLEAN, "gpu_neighbours": 1, "gpu_neighbour_names": "4242 python3"}, NEIGHBOURED),
    ({**CLEAN, "throttled": "yes"}, THROTTLED),
    ({**CLEAN, "phase_ms": "lock_wait=900.0;place=1.0"}, "another process measured on this GPU"),
])
def test_a_disturbed_baseline_never_makes_a_faster_by_the_historys_rule(disturbed, reason):
    """The previous row ran 2.4 times slower beside a busy process; the clean new row is not called
    2.4 times faster against it."""
    judged = judge(fresh(1.0, CLEAN), kept(2.4, disturbed), threshold=THRESHOLD)
    assert judged.verdict == UNCLEAR
    assert judged.unconfirmed == f"its baseline (run run1) was measured while {reason}"
    lines = summary_lines([judged], "h200", "run2", "details.csv")
    assert (f"  unconfirmed: 1 FASTER/SLOWER called UNCLEAR, its baseline (run run1) was measured while {reason}: "
            "a paired re-measurement would tell") in lines
    # the same two times between clean rows are a FASTER
    assert judge(fresh(1.0, CLEAN), kept(2.4, CLEAN), threshold=THRESHOLD).verdict == FASTER
    # a SAME needs no vouching: nothing is claimed
    assert judge(fresh(2.4, CLEAN), kept(2.4, disturbed), threshold=THRESHOLD).verdict == SAME


def test_the_new_side_is_named_before_the_baseline_and_a_clean_pair_stands_against_a_disturbed_baseline():
    beside = {**CLEAN, "gpu_neighbours": 2}
    assert doubt(beside, beside, "run1") == f"measured while {NEIGHBOURED}"
    assert doubt(CLEAN, CLEAN, "run1") is None
    assert why_unvouched({"backend": "cpu"}) == "the cpu backend shares its host"
    pair = PairRow("c", "sgemm_naive", "old", "new", ratio=Ratio(1.001, 0.996, 1.006, 12), stop="precise",
                   unproved=f"the previous row was measured while {NEIGHBOURED}")
    judged = judge(fresh(1.0, CLEAN), kept(2.4, {**CLEAN, "gpu_neighbours": 1}), pair=pair, threshold=THRESHOLD)
    assert (judged.verdict, judged.ratio.value, judged.unconfirmed) == (SAME, 1.001, None)


def result(previous_ms: float, new_ms: float) -> PairedResult:
    return PairedResult(ratio=new_ms / previous_ms, low=0.99, high=1.01, rounds=12, previous_ms=previous_ms,
                        new_ms=new_ms, stop="precise", clock_normalised=False, batch=4)


def test_a_pair_is_checked_against_rows_the_lab_vouches_for_and_stands_on_its_own_where_it_cannot():
    """The previous row took 2.4 ms beside a busy process; its version runs 1.0 ms in the pair, as
    the new one does. Against a clean row that disagreement refuses the pair; against the disturbed
    row nothing can be checked, and the pair stands, saying why it was not checked."""
    clean_new = recorded_side("m2", 1.0, CLEAN)
    with pytest.raises(PairRefused, match="not as it was measured"):
        prove_same_speed(result(1.0, 1.0), recorded_side("m1", 2.4, CLEAN), clean_new, 0.08)
    disturbed = recorded_side("m1", 2.4, {**CLEAN, "gpu_neighbours": 1})
    assert disturbed.unvouched == NEIGHBOURED
    assert prove_same_speed(result(1.0, 1.0), disturbed, clean_new, 0.08) == (
        f"the previous row was measured while {NEIGHBOURED}")
    assert "new row was measured while" in prove_same_speed(
        result(1.0, 1.0), recorded_side("m1", 1.0, CLEAN), recorded_side("m2", 2.4, {**CLEAN, "throttled": "yes"}), 0.08)
    # rows timed in two modes cannot be set against one pair's sampling
    assert prove_same_speed(result(1.0, 1.0), recorded_side("m1", 1.0, {**CLEAN, "timing_applied": "graph"}),
                            recorded_side("m2", 1.0, {**CLEAN, "timing_applied": "warm"}), 0.08) == (
        "the rows were timed in different modes (graph, warm)")
    assert prove_same_speed(result(1.0, 1.0), Recorded("m1", 1.0), Recorded("m2", 1.0), 0.08) == ""
    assert prove_same_speed(result(1.0, 1.0), Recorded("m1", 1.0), None, 0.08) == "the new version has no row yet"


def test_a_pairs_sampling_and_why_it_was_not_checked_are_kept_in_its_file(tmp_path):
    pair = PairRow("c", "fft", "old", "new", ratio=Ratio(1.0, 0.99, 1.01, 9), stop="precise",
                   sampling="graph of 33 launches", unproved="the new version has no row yet")
    write_pairs(tmp_path / "paired.csv", [pair])
    assert read_pairs(tmp_path / "paired.csv")["c"] == pair


class EventFloorDevice:
    """A launch-bound kernel as a GPU times it: an event pair around one launch adds the event floor
    (15 µs here) to its 30.5 µs; a graph's replay does not. Each version's first per-launch samples
    land on either side of the graph line, as fft's did at 256² on an H200 (0.0456 and 0.0305 ms)."""

    FLOOR_MS, KERNEL_MS = 0.015, 0.0305

    def __init__(self, first_per_launch: dict[str, float]):
        self.first = dict(first_per_launch)

    def time_batch(self, run, n, cold):
        name = run.__name__
        if name in self.first:
            return [self.first.pop(name)] * n
        return [self.KERNEL_MS + self.FLOOR_MS] * n

    def capture_graph(self, run, launches):
        return lambda n: [self.KERNEL_MS] * n

    def sm_clock_mhz(self):
        return None


def version(name: str) -> Prepared:
    def run() -> None:
        pass
    run.__name__ = name
    return Prepared(PreparedKernel(run, {}), 0.0)


def test_both_sides_of_a_pair_are_sampled_alike_whichever_side_of_the_graph_line_each_lands():
    device = EventFloorDevice({"previous": GRAPH_BELOW_MS * 0.92, "new": GRAPH_BELOW_MS * 1.04})
    previous, new, sampling = sides(device, version("previous"), version("new"), cold=False)
    assert sampling.startswith("graph of ") and previous.runs_per_sample == new.runs_per_sample > 1
    paired = interleave(previous, new, 0.005, budget_s=1.0)
    assert paired.ratio == pytest.approx(1.0) and paired.previous_ms == paired.new_ms == EventFloorDevice.KERNEL_MS
    # both above the line: both per launch
    slow = EventFloorDevice({"previous": 0.2, "new": 0.21})
    slow.time_batch = lambda run, n, cold: [0.2] * n
    previous, new, sampling = sides(slow, version("previous"), version("new"), cold=False)
    assert sampling == "per launch" and previous.runs_per_sample == new.runs_per_sample == 1
    assert sides(device, version("previous"), version("new"), cold=True)[2] == "per launch, cold"


def cell_of(kernel: str, size: int):
    config = validate_config({"backend": "cpu", "conv2d": {"sizes": [size], "strides": [1], "kernels": [kernel]},
                              **{family: {"enabled": False} for family in ("tiling", "winograd_layers", "gemm")}})
    return build_cells(config, "cpu")[0]


def test_the_self_check_names_each_false_call_and_each_cell_it_could_not_measure(tmp_path):
    fft, direct, cudnn = cell_of("fft", 256), cell_of("direct", 256), cell_of("cudnn", 256)
    check = SelfCheck(0.02, "cuda", [
        SelfCheckCell(fft, FASTER, Ratio(0.655, 0.650, 0.659, 400), "max_rounds", "per launch", 0.0456, 0.0299),
        SelfCheckCell(direct, SAME, Ratio(1.001, 0.996, 1.006, 9), "precise", "graph of 180 launches", 0.0055, 0.0055),
        SelfCheckCell(cudnn, note="the previous version's output is wrong here: max rel err 0.5")], "GPU-1")
    lines = check.lines("h200", "run1")
    assert lines[0].startswith("self-check: 2 cells of h200 (run run1)") and "false calls 1 of 2 (50%)" in lines[0]
    path = fft.path.split("/cells/", 1)[1]
    assert f"  false call: FASTER fft {path}: x0.655 [0.650, 0.659], 400 rounds, sampled per launch" in lines
    assert any(line.startswith("  not measured: cudnn ") and line.endswith("output is wrong here: max rel err 0.5")
               for line in lines)
    assert check.too_noisy() == [f"1 unchanged cells were called FASTER or SLOWER (fft {path} FASTER x0.655)"]
    rows = list(csv.DictReader(io.StringIO(check.details())))
    assert [(r["kernel"], r["verdict"], r["sampling"]) for r in rows] == [
        ("fft", FASTER, "per launch"), ("direct", SAME, "graph of 180 launches"), ("cudnn", "not measured", "")]
    assert rows[0]["cell"] == fft.path and rows[0]["ratio_low"] == "0.65" and rows[2]["note"].startswith("the previous")

"""Verdicts a CI gate can bet on, without a GPU: every change named (library versions), the
libraries in a kernel's identity, the GPU's other users seen and their changes unconfirmed, a pair
refused where it cannot prove both sides are the code their rows ran, the module store, and the
A/A self-check (its cpu run in the slow tier)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest
from workflow_helpers import REPO, convlab, copy_finished_run, planned_cells, snakemake, snakemake_env

from convlab.backends import cleanbuild, nvrtcbuild
from convlab.backends.sourcemodule import SourceModule
from convlab.history.compare import compare_sets
from convlab.history.pairfile import PairRow
from convlab.history.store import Measurement
from convlab.history.verdictpolicy import DRIFT_FLOOR
from convlab.history.verdictrule import SLOWER, UNCLEAR, Ratio
from convlab.history.verdicts import judge, version_changes
from convlab.history.vouching import NEIGHBOURED
from convlab.measure.interleave import PairedResult
from convlab.measure.telemetry import Neighbours
from convlab.plan.registry import get_kernel
from convlab.run.paired import PairRefused, Recorded, prove_same_code, prove_same_speed

THRESHOLD = 0.02  # config verdicts.threshold's default


def test_a_verdict_names_each_library_version_that_differs():
    before = {"driver_version": 13000, "runtime_version": 13000, "cupy_version": "14.2.0", "cudnn_version": "91900",
              "cublas_version": "130000", "cufft_version": "12000", "compiler": "nvrtc 13.0"}
    after = {**before, "cudnn_version": "92000", "compiler": "nvrtc 13.1", "driver_version": 13010}
    assert version_changes(after, before) == ("driver 13.0 → 13.1", "cuDNN 9.19.0 → 9.20.0",
                                              "compiler nvrtc 13.0 → nvrtc 13.1")
    assert version_changes(before, before) == ()
    # the cpu backend's runtime holds NumPy's and OpenCV's versions; a version a row lacks is not named
    cpu = {"runtime_version": "numpy 2.4.6, opencv 4.12.0"}
    assert version_changes({"runtime_version": "numpy 2.5.0, opencv 4.12.0"}, cpu) == ("NumPy 2.4.6 → 2.5.0",)
    assert version_changes({"runtime_version": ""}, cpu) == ()


def test_the_libraries_a_kernel_calls_are_part_of_its_identity():
    assert get_kernel("cudnn").libraries("cuda") == ("cuDNN",)
    assert get_kernel("fft").libraries("cuda") == ("cuFFT", "CuPy")
    assert get_kernel("direct").libraries("cuda") == ("NVRTC",)
    assert get_kernel("im2col_cublas").libraries("cuda") == ("NVRTC", "cuBLAS")
    assert get_kernel("cudnn").libraries("cpu") == ("NumPy", "OpenCV")  # its twin is OpenCV's filter2D
    assert get_kernel("direct").libraries("cpu") == ("NumPy",)


def measurement(ms: float, row: dict | None = None) -> Measurement:
    return Measurement(row_check="prev", run_id="r0", cell="c", experiment="conv2d", kernel="direct", variant="v",
                       status="ok", kernel_ms=ms, kernel_ms_iqr=0.0, finished_at="t", git_commit="g", code_version="v",
                       kernel_hash="k", spec_hash="c", gpu_uuid="GPU-1", row_json=json.dumps(row or {}),
                       verdict="new", ratio=None, previous=None, changed="", input_hash="")


def new(ms: float, **row: object) -> dict:
    return {"cell": "c", "experiment": "conv2d", "kernel": "direct", "variant": "v", "status": "ok", "kernel_ms": ms,
            "kernel_ms_iqr": 0.0, "kernel_hash": "k", "code_version": "v", "spec_hash": "c", "gpu_uuid": "GPU-1",
            "input_hash": "", "row_json": json.dumps({"backend": "cuda", **row})}


def test_a_change_measured_beside_another_process_is_unconfirmed():
    beside = judge(new(2.0, gpu_neighbours="1", gpu_neighbour_names="4242 sgemm"), measurement(1.0),
                   threshold=THRESHOLD)
    assert (beside.verdict, beside.unconfirmed, beside.neighbours) == (UNCLEAR, f"measured while {NEIGHBOURED}",
                                                                       "4242 sgemm")
    alone = judge(new(2.0, gpu_neighbours="0"), measurement(1.0), threshold=THRESHOLD)
    assert alone.verdict == SLOWER and not alone.neighbours


def test_a_paired_change_beside_another_process_stays_only_where_its_rounds_reached_their_precision():
    pair = PairRow("c", "direct", "k0", "k", ratio=Ratio(1.10, 1.09, 1.11, 8), stop="precise", neighbours=1,
                   neighbour_names="4242 sgemm")
    assert judge(new(1.1), measurement(1.0), pair=pair, threshold=THRESHOLD).verdict == SLOWER
    spent = judge(new(1.1), measurement(1.0), pair=PairRow(**{**pair.__dict__, "stop": "budget"}),
                  threshold=THRESHOLD)
    assert (spent.verdict, spent.unconfirmed) == (UNCLEAR, f"measured while {NEIGHBOURED}")


def summary(ms: float, neighbours: int) -> pd.DataFrame:
    return pd.DataFrame([{"experiment": "conv2d", "kernel": "direct", "variant": "v", "size": 64, "status": "ok",
                          "kernel_ms": ms, "kernel_ms_iqr": 0.0, "reps": 10, "backend": "cuda", "throttled": "no",
                          "gpu_neighbours": neighbours}])


def test_the_gate_does_not_fail_on_a_slow_down_measured_beside_another_process():
    table = compare_sets(summary(1.0, 0), summary(2.0, 2), DRIFT_FLOOR)
    assert table.loc[0, "verdict"] == UNCLEAR and table.loc[0, "note"].endswith(NEIGHBOURED)
    assert bool(table.loc[0, "neighboured"])
    assert compare_sets(summary(1.0, 0), summary(2.0, 0), DRIFT_FLOOR).loc[0, "verdict"] == SLOWER


class FakeNvml:
    class NVMLError(Exception):
        pass

    def __init__(self, holders, active):
        self.holders, self.active = holders, active

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        if self.holders is None:
            raise self.NVMLError("Not Supported")
        return [SimpleNamespace(pid=pid) for pid in self.holders]

    def nvmlDeviceGetProcessUtilization(self, handle, since):
        if self.active is None:
            raise self.NVMLError("Not Supported")
        return [SimpleNamespace(pid=pid, timeStamp=since + 1, smUtil=50, memUtil=10) for pid in self.active]

    def nvmlSystemGetProcessName(self, pid):
        return b"/usr/bin/sgemm"


def test_the_gpus_other_users_are_counted_and_named_and_unknown_where_this_process_is_not_listed():
    mine = os.getpid()
    watch = Neighbours(FakeNvml({mine, 999999}, {mine, 999999}), handle=None)
    watch.start()
    watch.stop()
    assert watch.columns() == {"gpu_neighbours": 1, "gpu_neighbour_names": "999999 sgemm"}
    idle = Neighbours(FakeNvml({mine, 999999}, {mine}), handle=None)  # holds a context, does no work
    idle.start()
    idle.stop()
    assert idle.columns() == {"gpu_neighbours": 0, "gpu_neighbour_names": None}
    elsewhere = Neighbours(FakeNvml({7, 8}, {7, 8}), handle=None)  # another PID namespace's numbers
    elsewhere.start()
    elsewhere.stop()
    assert elsewhere.columns() == {}
    blind = Neighbours(FakeNvml(None, None), handle=None)  # NVML lists neither here: nothing is claimed
    blind.start()
    blind.stop()
    assert blind.columns() == {}
    contexts_only = Neighbours(FakeNvml({mine, 999999}, None), handle=None)  # no samples: the context holders
    contexts_only.start()
    contexts_only.stop()
    assert contexts_only.columns()["gpu_neighbours"] == 1


def prepared(module_hash: str) -> SimpleNamespace:
    return SimpleNamespace(kernel=SimpleNamespace(info={"module_hash": module_hash}))


def test_a_pair_is_refused_unless_each_side_runs_the_machine_code_and_the_time_its_row_recorded():
    prove_same_code(prepared("abc"), Recorded("abc", 1.0), "previous")
    with pytest.raises(PairRefused, match="other machine code here \\(def\\) than its row ran \\(abc\\)"):
        prove_same_code(prepared("def"), Recorded("abc", 1.0), "previous")
    with pytest.raises(PairRefused, match="does not name the machine code"):
        prove_same_code(prepared("abc"), Recorded("", 1.0), "previous")
    prove_same_code(SimpleNamespace(kernel=SimpleNamespace(info={})), Recorded("", 1.0), "previous")  # a library
    result = PairedResult(ratio=1.34, low=1.33, high=1.35, rounds=8, previous_ms=0.547, new_ms=0.733, stop="precise",
                          clock_normalised=False, batch=1)
    # the new side ran as its row (0.733): the previous one ran x0.75 its row's 0.733
    with pytest.raises(PairRefused, match="x0.746 its recorded time"):
        prove_same_speed(result, Recorded("a", 0.733), Recorded("b", 0.733), 0.08)
    # both sides 10 % under their rows (a graph's sampling, say): proved
    prove_same_speed(PairedResult(**{**result.__dict__, "previous_ms": 0.90, "new_ms": 0.99}),
                     Recorded("a", 1.0), Recorded("b", 1.1), 0.08)


def test_a_stored_module_is_loaded_without_a_compiler_process_and_a_failed_compiler_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv(cleanbuild.STORE_ENV, str(tmp_path))
    module = SourceModule("extern \"C\" __global__ void k() {}", ("--std=c++17",))
    path = tmp_path / f"{cleanbuild.module_key(module, '90', 'nvrtc 13.0')}.cubin"
    path.write_bytes(b"\x7fELF machine code")

    def no_process(*args, **kwargs):
        raise AssertionError("a stored module was compiled again")

    start_process = subprocess.Popen
    monkeypatch.setattr(cleanbuild.subprocess, "Popen", no_process)
    built, failed = cleanbuild.build_modules([module], "90", "nvrtc 13.0")
    assert failed == {} and built[module].path == path and len(built[module].binary_hash) == 12
    # another compiler version is another module: compiled, here by a process that fails
    failing = [sys.executable, "-c", "import sys; sys.exit(\"ModuleNotFoundError: No module named 'cupy'\")"]
    monkeypatch.setattr(cleanbuild.subprocess, "Popen", lambda command, **kwargs: start_process(failing, **kwargs))
    built, failed = cleanbuild.build_modules([module], "90", "nvrtc 13.1")
    assert built == {} and "the compiler process failed" in failed[module] and "cupy" in failed[module]


def test_the_self_check_without_results_is_one_line_and_exit_2(tmp_path):
    result = convlab("check-verdicts", "--results", str(tmp_path), cwd=REPO)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith("error: no results database") and len(result.stderr.splitlines()) == 1


@pytest.mark.pipeline
def test_a_library_upgrade_re_measures_exactly_the_cells_of_the_kernels_that_call_it_and_the_self_check_runs(tiny_run, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    # OpenCV "upgraded": a newer version's metadata first on the path (the cudnn kernel's twin calls it)
    site = tmp_path / "site"
    (site / "opencv_python_headless-99.0.dist-info").mkdir(parents=True)
    (site / "opencv_python_headless-99.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: opencv-python-headless\nVersion: 99.0\n")
    env = snakemake_env(repo)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    planned = planned_cells(snakemake(repo, 2, "--dry-run", env=env))
    assert planned and all("kernel~cudnn/" in cell for cell in planned), planned
    assert not planned_cells(snakemake(repo, 2, "--dry-run"))
    details = tmp_path / "self-check.csv"
    checked = convlab("check-verdicts", "--configfile", "config/tiny-cpu.yaml", "--cells", "4", "--details",
                      str(details), cwd=repo)
    assert checked.returncode in (0, 1), checked.stderr  # 1: this shared host was too noisy, and it says so
    assert checked.stdout.startswith("self-check: 4 cells of cpu-"), checked.stdout
    assert "a change of" in checked.stdout and "is called (threshold 2%)" in checked.stdout
    # the cpu backend is never "quiet enough": compare calls no change there, and the check says so
    assert "quiet enough" not in checked.stdout
    assert checked.returncode == 1 or "`convlab compare` calls no change between cpu runs" in checked.stdout
    rows = pd.read_csv(details, keep_default_na=False)
    assert len(rows) == 4 and set(rows["verdict"]) <= {"SAME", "UNCLEAR", "FASTER", "SLOWER", "not measured"}
    measured = rows[rows["verdict"] != "not measured"]
    assert (measured["sampling"] != "").all() and (measured["ratio_low"] <= measured["ratio_high"]).all()


def test_a_module_store_that_cannot_be_written_says_where_and_the_fix(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store would be")
    monkeypatch.setenv(cleanbuild.STORE_ENV, str(blocker / "store"))
    module = SourceModule("code", ())
    built, failed = cleanbuild.build_modules([module], "90", "nvrtc 13.0")
    assert built == {} and failed[module].startswith(f"the module store {blocker / 'store'} cannot be written")
    assert failed[module].endswith(f"set {cleanbuild.STORE_ENV} to a writable folder")


def test_the_compiler_process_reports_each_module_built_or_its_error(tmp_path, monkeypatch):
    def compile_one(entry, arch):
        if "broken" in entry["code"]:
            raise RuntimeError("kern.cu(3): error: expected a \";\"")
        (tmp_path / entry["path"]).write_bytes(b"cubin for " + arch.encode())
        return entry["path"]

    monkeypatch.setattr(nvrtcbuild, "_compile_one", compile_one)
    request = {"arch": "90", "threads": 2, "modules": [{"code": "ok", "options": [], "path": str(tmp_path / "a")},
                                                       {"code": "broken", "options": [], "path": str(tmp_path / "b")}]}
    result = nvrtcbuild.build(request)
    assert result["built"] == {"0": str(tmp_path / "a")}
    assert result["failed"] == {"1": 'kern.cu(3): error: expected a ";"'}

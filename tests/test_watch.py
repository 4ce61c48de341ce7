"""`convlab watch`: a saved kernel previewed at once against the version the results database
recorded last, without a run. The fast tier checks its parts on the cpu backend: a cpu twin's
earlier version paired beside the saved one (each a module of its own), the compile-error block,
the config as snakemake reads it, saves told by content, and bad input in one line. The slow tier
(marker pipeline) previews edits of a finished tiny run's twin: the verdict, results/ left
byte-identical, --once's exit status, a syntax error's block, the next plain run recording the
edited cells, and a live watch through saves, a crashing twin, a save mid-preview and Ctrl-C."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cpu_helpers import cell_for
from workflow_helpers import (
    RESULTS,
    TINY,
    FinishedRun,
    cell_rows,
    convlab,
    copy_finished_run,
    snakemake,
    snakemake_env,
)

from convlab.backends.compileblock import nvrtc_block, python_block
from convlab.backends.cpu import CpuBackend, load_twin
from convlab.codeversion import file_contents
from convlab.history.kernelversions import VersionUnavailable, copy_kernel_version
from convlab.history.verdictrule import verdict_of_interval
from convlab.history.verdicts import CSV_COLUMNS
from convlab.measure.row import read_row_file
from convlab.pairs.previewplan import narrowed
from convlab.paths import REPO_ROOT
from convlab.plan.registry import get_kernel, read_kernel_folder
from convlab.plan.runconfig import laid_over, run_config
from convlab.run.paired import measure_pair
from convlab.savedfiles import SavedFiles
from convlab.status import UserError

TWIN = "workflow/convlab/backends/cpu_twins/direct_hwc.py"
EINSUM = '    np.einsum("yxcij,kcij->yxk", windows, weights, out=out, optimize=True)\n'
# the same output, computed twice: a slow-down of known kind that changes no result
SLOWER_TWIN = ("    for _ in range(2):  # a planted slow-down: the same output, computed twice\n"
               "        np.einsum(\"yxcij,kcij->yxk\", windows, weights, out=out, optimize=True)\n")
THRESHOLD = 0.02
NARROW = ("--configfile", TINY, "--kernels", "direct", "--sizes", "64", "--strides", "1")


def twin_files(twin_text: str | None = None) -> list[tuple[str, bytes | None]]:
    """direct's cpu files (its description and twin), the twin replaced by ``twin_text``."""
    files = file_contents(get_kernel("direct").files("cpu"), root=REPO_ROOT)
    return [(path, twin_text.encode() if twin_text is not None and path.endswith(".py") else data)
            for path, data in files]


def slowed(text: str) -> str:
    assert EINSUM in text
    return text.replace(EINSUM, SLOWER_TWIN, 1)


# -- the fast tier ------------------------------------------------------------------------------
def test_a_twin_version_runs_beside_the_saved_one_each_a_module_of_its_own(tmp_path, image_path):
    current = (REPO_ROOT / TWIN).read_text()
    folders = {tag: tmp_path / tag for tag in ("recorded", "saved")}
    recorded_name = copy_kernel_version("direct", "recorded", twin_files(), folders["recorded"], twins=True)
    saved_name = copy_kernel_version("direct", "saved", twin_files(slowed(current)), folders["saved"], twins=True)
    recorded = read_kernel_folder(folders["recorded"])[recorded_name]
    saved = read_kernel_folder(folders["saved"])[saved_name]
    assert recorded.twin_path.parent == folders["recorded"] and saved.twin_path.parent == folders["saved"]
    modules = {load_twin(recorded), load_twin(saved), load_twin(get_kernel("direct"))}
    assert len(modules) == 3  # neither copy is the package's twin, nor the other copy
    result = measure_pair(cell_for("direct"), image_path, recorded, THRESHOLD / 4, 1.0, CpuBackend(), new_spec=saved)
    assert verdict_of_interval(result.low, result.high, THRESHOLD) == "SLOWER", result
    # the run's pair step keeps refusing a twin's version: its new side is the package's module
    with pytest.raises(VersionUnavailable, match="only those run again"):
        copy_kernel_version("direct", "refused", twin_files(), tmp_path / "refused")


def test_a_syntax_error_is_one_block_with_its_file_line_and_caret():
    assert python_block(b"def convolve(image):\n    return image\n", TWIN) is None
    block = python_block(b"def convolve(image):\n    out = = image\n", TWIN)
    assert block[0] == f"compile error: {TWIN}:2: SyntaxError: invalid syntax"
    assert block[1] == "      2 |     out = = image"
    assert block[2].index("^") == block[1].index("= image")


def test_nvrtcs_log_is_one_block_naming_the_kernels_file_and_quoting_its_lines():
    source = 'extern "C" __global__ void f(float* a) {\n  float s = ;\n  a[0] = s\n}\n'
    # NVRTC's log as CuPy raises it (H200, CuPy 14.2), which the compiler process hands over as one line
    log = ('/tmp/tmptmiob5vm/kern.cu(2): error: expected an expression\n    float s = ;\n              ^\n\n'
           '/tmp/tmptmiob5vm/kern.cu(4): error: expected a ";"\n  }\n  ^\n\n'
           '2 errors detected in the compilation of "/tmp/tmptmiob5vm/kern.cu".\n')
    for reason in ("compile: " + " ".join(log.split()), "compile: " + log):
        assert nvrtc_block(reason, "kernels/f.cu", source) == [
            "compile error: kernels/f.cu:2: error: expected an expression", "      2 |   float s = ;",
            '  kernels/f.cu:4: error: expected a ";"', "      4 | }", "  (2 errors detected)"]
    assert nvrtc_block("compile: the compiler process failed", "kernels/f.cu", source) == [
        "compile error: kernels/f.cu: the compiler process failed"]


def test_a_config_file_is_laid_over_key_by_key_as_snakemake_does():
    base = {"conv2d": {"sizes": [1], "strides": [1, 2]}, "backend": "auto"}
    assert laid_over(base, {"conv2d": {"sizes": [64]}, "backend": "cpu"}) == {
        "conv2d": {"sizes": [64], "strides": [1, 2]}, "backend": "cpu"}
    assert base["conv2d"]["sizes"] == [1]


def test_narrowing_takes_a_subset_of_the_grid_and_names_the_grids_values_otherwise():
    cells = [cell_for("direct", stride) for stride in (1, 2)]
    assert narrowed(cells, None, None, [2]) == cells[1:]
    with pytest.raises(UserError, match=r"--strides 3: not in the configured grid \(it has 1, 2\)"):
        narrowed(cells, None, None, [3])


def test_a_save_is_told_by_content_not_by_time(tmp_path):
    path = tmp_path / "twin.py"
    path.write_text("a = 1\n")
    files = SavedFiles([path])
    stamp = path.stat()
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))
    assert files.saved() == []  # touched: the same bytes
    path.write_text("a = 2\n")
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert files.saved() == [path]  # saved, its old time put back
    assert files.saved() == []


@pytest.mark.parametrize("args, expected", [
    (("--kernels", "nope"), "error: --kernels nope: not in the configured grid (it has "),
    (("--sizes", "12345"), "error: --sizes 12345: not in the configured grid (it has 9, 12, 48, 64, 96, 320)"),
    (("--configfile", "missing.yaml"), "error: --configfile missing.yaml: no such file"),
    (("--details", "results/preview.csv"), "error: --details results/preview.csv: under results/, which a watch "
     "leaves as it is; name a file elsewhere\n"),
    (("--details", "no/such/folder.csv"), "error: --details no/such/folder.csv: no folder no/such\n"),
])
def test_bad_input_is_one_line_and_exit_2(args, expected):
    result = convlab("watch", "--once", *(("--configfile", TINY) if args[0] != "--configfile" else ()), *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(expected) and result.stderr.count("\n") == 1, result.stderr
    assert not result.stdout


# -- the slow tier ------------------------------------------------------------------------------
def watch_env(repo: Path) -> dict[str, str]:
    """The environment of a watch in ``repo``: its own package first, its own temporary folder
    (a device lock apart from other tests'), Python's output unbuffered."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(repo / "workflow"), os.environ.get("PYTHONPATH")])),
            "TMPDIR": snakemake_env(repo)["TMPDIR"], "PYTHONUNBUFFERED": "1"}


def watch_once(repo: Path, *args: str, service: str | None = None) -> subprocess.CompletedProcess:
    return convlab("watch", "--once", *args, cwd=repo, service=service, timeout=300, **watch_env(repo))


def results_tree(repo: Path) -> dict[str, tuple[bytes, int]]:
    return {str(path.relative_to(repo)): (path.read_bytes(), path.stat().st_mtime_ns)
            for path in sorted((repo / "results").rglob("*")) if path.is_file()}


def plant(repo: Path, text_of) -> None:
    twin = repo / TWIN
    twin.write_text(text_of(twin.read_text()))


@pytest.fixture
def finished(tiny_run: FinishedRun, tmp_path) -> Path:
    """A copy of the session's tiny run, for this test to edit."""
    return copy_finished_run(tiny_run.repo, tmp_path / "repo")


@pytest.mark.pipeline
def test_a_twin_edit_gives_a_preview_verdict_and_leaves_results_byte_identical(finished):
    plant(finished, slowed)
    before = results_tree(finished)
    result = watch_once(finished, *NARROW)
    assert results_tree(finished) == before
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"preview of direct: 3 cells of {RESULTS.split('/')[1]}"
    assert lines[1].startswith(f"preview verdict: 3 cells of {RESULTS.split('/')[1]} re-measured against their "
                               "previous measurement (run preview, nothing recorded): 3 SLOWER")
    assert lines[2].startswith("  direct  3 SLOWER; time x") and "3 paired" in lines[2]
    assert "changed: kernel files" in lines[2]
    assert lines[3] == "  details: nothing written; the next `snakemake --cores 1` measures and records these cells"
    assert lines[4].startswith("preview: ") and lines[4].endswith(f"nothing written under {RESULTS}")
    assert len(lines) == 5 and not result.stderr  # no why on the cpu, unless asked
    asked = watch_once(finished, *NARROW, "--why").stdout.splitlines()
    # said after the verdict, once, and the verdict as without it
    assert asked[-1] == "  why: not read for 3 cells: no hardware counters on the cpu backend", asked
    assert asked[-2].startswith("preview: ") and asked[2].startswith("  direct  3 SLOWER; time x")


@pytest.mark.pipeline
def test_once_exits_1_on_slower_with_fail_on_and_0_when_nothing_differs(finished):
    unchanged = watch_once(finished, "--configfile", TINY, "--fail-on", "slower", service="off")
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    assert unchanged.stdout == "preview: every kernel's files are as last recorded: nothing to preview\n"
    plant(finished, slowed)
    details = finished.parent / "preview.csv"
    slower = watch_once(finished, *NARROW, "--fail-on", "slower", "--details", str(details), service="off")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert "  direct  3 SLOWER" in slower.stdout
    assert f"  details: {details} (the verdict per cell); nothing written;" in slower.stdout
    # the verdict per cell, as a run's verdicts/<run>.csv has it
    with open(details, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [(row["kernel"], row["verdict"]) for row in rows] == [("direct", "SLOWER")] * 3
    assert all(float(row["ratio_low"]) > 1 for row in rows)


# a grid of the tiny config's families whose cells no run recorded, on a picture no run made
UNRECORDED = """cpu:
  sizes: [80]
  tiling: {sizes: [80]}
  winograd_layers: {layers: [[3, 8, 8, 4]], batches: [1]}
  gemm: {sizes: [40]}
"""


@pytest.mark.pipeline
def test_a_grid_no_run_recorded_is_said_so_and_a_missing_picture_names_how_to_make_it(finished, monkeypatch):
    (finished / "unrecorded.yaml").write_text(UNRECORDED)
    once = watch_once(finished, "--configfile", TINY, "--configfile", "unrecorded.yaml", service="off")
    assert once.returncode == 0, once.stdout + once.stderr
    assert once.stdout.startswith(f"preview: no cell of this grid is recorded in {RESULTS} yet, so no edit to "
                                  "compare: a run of this grid records them"), once.stdout
    monkeypatch.chdir(finished)
    config, _ = run_config([TINY, "unrecorded.yaml"])
    device = RESULTS.split("/")[1]
    preview = convlab("preview", "--results", RESULTS, "--backend", "cpu", "--device", device, "--config",
                      json.dumps(config), "--kernels", "direct", cwd=finished, **watch_env(finished))
    assert preview.returncode == 2, preview.stdout + preview.stderr
    assert preview.stderr.strip() == ("error: data/input_80.png does not exist yet: make the grid's pictures with "
                                      "`snakemake --cores 1 data/input_80.png` (with the same --configfile), or run "
                                      "the grid once"), preview.stderr


@pytest.mark.pipeline
def test_a_syntax_error_in_a_twin_is_one_block_with_its_file_and_line(finished):
    plant(finished, lambda text: text + "\nx = = 1\n")
    line = (finished / TWIN).read_text().splitlines().index("x = = 1") + 1
    result = watch_once(finished, *NARROW)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[1:4] == [f"compile error: {TWIN}:{line}: SyntaxError: invalid syntax",
                                               f"  {line:>5} | x = = 1", f"  {'':>5} |     ^"]  # at the 2nd =
    assert "verdict" not in result.stdout and not result.stderr
    assert watch_once(finished, *NARROW, "--fail-on", "slower").returncode == 1


@pytest.mark.pipeline
def test_the_next_plain_run_re_measures_the_edited_cells_and_records_them(finished):
    before = {name: read_row_file(path)[-1] for name, path in cell_rows(finished).items()}
    plant(finished, slowed)
    assert watch_once(finished, *NARROW).returncode == 0
    result = snakemake(finished, 2)
    after = {name: read_row_file(path)[-1] for name, path in cell_rows(finished).items()}
    changed = {name for name in after if after[name] != before[name]}
    twin_kernels = ("kernel~direct/", "kernel~conv_naive_batched/")  # the two kernels of that twin
    assert changed == {name for name in after if any(kernel in name for kernel in twin_kernels)}
    text = result.stdout + result.stderr
    assert f"verdict: {len(changed)} cells of {RESULTS.split('/')[1]} re-measured" in text
    recorded = convlab("history", "--kernel", "direct", cwd=finished, **watch_env(finished))
    assert len([line for line in recorded.stdout.splitlines() if "kernel~direct" in line]) == 2 * sum(
        "kernel~direct/" in name for name in after)


class LiveWatch:
    """A `convlab watch` process, its output read as it comes."""

    def __init__(self, repo: Path, *args: str) -> None:
        env = {**os.environ, **watch_env(repo)}
        env.pop("CONVLAB_SERVICE", None)
        # Ctrl-C as in a terminal: a shell without job control starts background commands with SIGINT
        # ignored, and a test run so (`.ci/run &`) would hand that on to the watch
        self.process = subprocess.Popen([sys.executable, "-m", "convlab", "watch", *args], cwd=repo, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, after: int = 0, timeout: float = 90) -> int:
        """The index of the first line from ``after`` on that contains ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((i for i in range(after, len(self.lines)) if text in self.lines[i]), None)
            if found is not None:
                return found
            if self.process.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} after line {after}:\n" + "\n".join(self.lines))


@pytest.mark.pipeline
def test_a_live_watch_previews_each_save_survives_a_crash_starts_again_on_a_save_and_stops_on_ctrl_c(finished):
    twin = finished / TWIN
    original = twin.read_text()
    watch = LiveWatch(finished, *NARROW)
    try:
        start = watch.wait_for("a preview writes nothing under results/")
        twin.write_text(slowed(original))  # at once: while the worker warms up, on a loaded machine
        verdict = watch.wait_for("preview verdict: 3 cells", start)
        assert watch.lines[verdict + 1].startswith("  direct  3 SLOWER")
        assert f"watch: saved {TWIN}" in watch.lines[start + 1:verdict]
        # one line says the watch is ready, whether the save came before it or after
        ready = watch.wait_for("watch: ready (", start)
        assert watch.lines[ready].endswith(" s to start the measurement worker); each save is previewed as it comes "
                                           "(Ctrl-C stops)"), watch.lines[ready]
        # a twin that kills the worker: one line, and the watch goes on
        twin.write_text(original + "\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
        died = watch.wait_for("the measurement worker died", verdict + 1)
        assert "killed by signal 9" in watch.lines[died] and "the service starts a fresh one" in watch.lines[died]
        # a save during a preview: that preview stops, and the next starts from the newer files
        twin.write_text(original.replace("import numpy as np\n", "import time\n\nimport numpy as np\n")
                        .replace(EINSUM, "    time.sleep(0.1)  # a save during its preview comes next\n" + EINSUM))
        time.sleep(1.2)
        twin.write_text(slowed(original) + "\n# saved again\n")
        stopped = watch.wait_for("preview: stopped: its files changed meanwhile", died + 1)
        again = watch.wait_for("preview verdict: 3 cells", stopped + 1)
        assert watch.lines[again + 1].startswith("  direct  3 SLOWER")
        watch.process.send_signal(signal.SIGINT)
        assert watch.process.wait(timeout=30) == 0
        watch.reader.join(timeout=10)
        assert watch.lines[-1] == "watch: stopped; nothing was written under results/"
        assert not [line for line in watch.lines if "Traceback" in line]
    finally:
        if watch.process.poll() is None:
            watch.process.kill()
        print("\n".join(watch.lines))

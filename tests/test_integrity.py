"""Nothing damaged is aggregated, nothing is silently mixed, every failure is explained on the
terminal, and problems are found before any cell runs (cpu backend, the real workflow).

The pipeline tests share the session's complete run of the tiny config (conftest's tiny_run)
and work on copies of it.
"""

from __future__ import annotations

import csv
import io
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest
from workflow_helpers import (
    REPO,
    RESULTS,
    FinishedRun,
    cell_rows,
    convlab,
    copy_finished_run,
    copy_repo,
    first_line,
    planned_cells,
    planned_rules,
    snakemake,
    snakemake_env,
)

from convlab.atomicfile import current_umask
from convlab.measure.row import COLUMNS, DamagedRow, OtherFormat, format_row, parse_row, write_row_atomically
from convlab.snakefile.damaged import move_damaged_rows

REPORT_RULES = {"figures", "roofline", "seed_comparison_family", "seed_comparison", "findings", "seed_table",
                "seed_figure", "gpus", "history_page", "all"}


def whole_row(**values) -> str:
    base = {"experiment": "conv2d", "kernel": "direct", "variant": "default", "backend": "cpu", "size": 64,
            "status": "ok", "git_commit": "abc", "code_version": "0123456789ab", "kernel_ms": 0.5, "reps": 3,
            "max_rel_err": 1e-7, "tolerance": 1e-5, "flops": 100, "gflops": 2.0, "device": "cpu",
            "started_at": "2026-11-24T10:00:00", "finished_at": "2026-11-24T10:00:01"}
    row = {**base, **values}
    if "gflops" not in values and isinstance(row["kernel_ms"], float) and row["kernel_ms"] > 0:
        row["gflops"] = row["flops"] / row["kernel_ms"] / 1e6  # what its time gives
    return format_row(row)


# ---------------------------------------------------------------------------------------------
# The row's own check


def test_a_whole_row_parses_and_its_check_matches():
    values = parse_row(whole_row())
    assert dict(zip(COLUMNS, values))["kernel"] == "direct"


@pytest.mark.parametrize("damage", ["cut", "empty", "garbage", "edited", "header only"])
def test_a_damaged_row_is_refused_saying_why(damage):
    text = whole_row()
    damaged = {"cut": text[:len(text) - 40], "empty": "", "garbage": "\x00\x13 not, a, row\n" * 3,
               "edited": text.replace("0.5", "0.4", 1), "header only": text.splitlines()[0][:300]}[damage]
    with pytest.raises(DamagedRow):
        parse_row(damaged)


def test_a_row_without_what_its_status_requires_is_damaged():
    with pytest.raises(DamagedRow, match="without max_rel_err"):
        parse_row(whole_row(max_rel_err=None))
    with pytest.raises(DamagedRow, match="without reason"):
        parse_row(whole_row(status="error", reason=None))
    parse_row(whole_row(status="error", reason="launch refused", kernel_ms=None))


@pytest.mark.parametrize(("values", "why"), [
    # the median edited below its minimum, the check recomputed: written as a whole row
    ({"kernel_ms": 2.1, "kernel_ms_min": 20.0, "kernel_ms_max": 25.0}, "kernel_ms 2.1 outside kernel_ms_min 20"),
    ({"kernel_ms": 30.0, "kernel_ms_min": 20.0, "kernel_ms_max": 25.0}, "outside kernel_ms_min"),
    ({"kernel_ms_min": 0.4, "kernel_ms_max": 0.6, "kernel_ms_iqr": 0.5}, "kernel_ms_iqr 0.5 outside"),
    ({"reps": 0}, "reps 0 is not a count"),
    ({"kernel_ms": -1.0}, "not a positive time"),
    ({"finished_at": "2026-11-24T09:59:59"}, "before started_at"),
    ({"started_at": "yesterday"}, "is not a time"),
    # 3000 repeats of 0.5 ms cannot fit in the cell's one second
    ({"reps": 3000}, "3000 repeats of at least 0.5 ms cannot fit in the 1000.0 ms"),
    ({"reps": 300, "graph_launches": 10}, "cannot fit"),
])
def test_a_row_whose_values_contradict_each_other_is_damaged_saying_how(values, why):
    with pytest.raises(DamagedRow, match="contradict each other") as refused:
        parse_row(whole_row(**values))
    assert why in str(refused.value)


def test_rounded_values_at_their_bounds_are_consistent():
    parse_row(whole_row(kernel_ms=0.5, kernel_ms_min=0.5, kernel_ms_max=0.5, kernel_ms_iqr=0.0))
    parse_row(whole_row(kernel_ms=1 / 3, kernel_ms_min=1 / 3, kernel_ms_max=2 / 3, kernel_ms_iqr=1 / 3, reps=1000,
                        graph_launches=3))
    parse_row(whole_row(status="wrong", kernel_ms=0.5, kernel_ms_min=0.49, kernel_ms_max=0.51))


def test_a_contradicting_row_is_moved_aside_before_the_run_and_measured_again(tmp_path):
    path = tmp_path / "results" / "cpu" / "cells" / "row.csv"
    path.parent.mkdir(parents=True)
    path.write_text(whole_row(kernel_ms=2.1, kernel_ms_min=20.0, kernel_ms_max=25.0, reps=20, started_at=
                              "2026-11-24T10:00:00", finished_at="2026-11-24T10:00:01"))
    moved = move_damaged_rows([str(path)], tmp_path / "results" / "cpu")
    assert len(moved) == 1 and not path.exists()
    assert "contradict each other: kernel_ms 2.1 outside kernel_ms_min 20" in moved[0].line()


def test_a_whole_row_of_another_format_is_not_damaged():
    older = io.StringIO()
    writer = csv.writer(older, lineterminator="\n")
    writer.writerow(COLUMNS[:-3])
    writer.writerow(["x"] * (len(COLUMNS) - 3))
    with pytest.raises(OtherFormat):
        parse_row(older.getvalue())


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_rows_follow_the_umask(tmp_path, mask):
    previous = os.umask(mask)
    try:
        write_row_atomically({"kernel": "direct", "status": "ok"}, tmp_path / "row.csv")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "row.csv").stat().st_mode) == 0o666 & ~mask


def test_aggregate_refuses_a_damaged_row_in_one_line_and_keeps_the_summary(tmp_path):
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text(whole_row())
    bad.write_text(whole_row()[:-40])
    summary = tmp_path / "summary.csv"
    summary.write_text("the previous summary\n")
    result = convlab("aggregate", "--out", str(summary), str(good), str(bad))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad} is damaged"), result.stderr
    assert summary.read_text() == "the previous summary\n"


def test_the_one_cell_command_writes_its_row_with_the_umask(tmp_path):
    picture = tmp_path / "input_64.png"
    made = convlab("source", "--size", "64", "--out", str(picture))
    assert made.returncode == 0, made.stderr
    out = tmp_path / "row.csv"
    result = convlab("run", "--backend", "cpu", "--kernel", "direct", "--size", "64", "--image", str(picture),
                     "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~current_umask()
    parse_row(out.read_text())  # a whole row, with its check


# ---------------------------------------------------------------------------------------------
# The real workflow: one complete run, copied per test


@pytest.fixture
def complete_run(tiny_run: FinishedRun) -> Path:
    """The session's tiny run (read only)."""
    return tiny_run.repo


@pytest.fixture
def finished(complete_run, tmp_path) -> Path:
    """A copy of the complete run: its results, data and Snakemake's records included."""
    return copy_finished_run(complete_run, tmp_path / "repo")


def terminal(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


@pytest.mark.pipeline
def test_the_complete_run_names_its_code_and_follows_the_umask(complete_run):
    rows = cell_rows(complete_run)
    assert rows
    expected = 0o666 & ~current_umask()
    for path in [*rows.values(), complete_run / f"{RESULTS}/summary.csv"]:
        assert stat.S_IMODE(path.stat().st_mode) == expected, path
    versions = {dict(zip(COLUMNS, parse_row(path.read_text())))["code_version"] for path in rows.values()}
    assert len(versions) == 1 and len(next(iter(versions))) == 12


@pytest.mark.pipeline
def test_damaged_rows_are_moved_aside_and_exactly_their_cells_measured_again(finished):
    rows = cell_rows(finished)
    cut, emptied, garbage = list(rows)[0], list(rows)[7], list(rows)[-1]
    rows[cut].write_bytes(rows[cut].read_bytes()[:800])
    rows[emptied].write_bytes(b"")
    rows[garbage].write_bytes(os.urandom(300))
    untouched = {name: path.read_bytes() for name, path in rows.items() if name not in (cut, emptied, garbage)}

    plan = snakemake(finished, 1, "--dry-run")
    said = [line for line in plan.stderr.splitlines() if line.startswith("damaged row: ")]
    assert len(said) == 3 and all("the real run will move it" in line for line in said), plan.stderr
    assert not (finished / f"{RESULTS}/damaged").exists()  # a dry run changes nothing on disk
    assert rows[emptied].read_bytes() == b""

    run = snakemake(finished, 1)
    said = [line for line in run.stderr.splitlines() if line.startswith("damaged row: ")]
    assert len(said) == 3 and all(f"moved to {RESULTS}/damaged/" in line for line in said), run.stderr
    moved = [p for p in (finished / f"{RESULTS}/damaged").rglob("*.csv")]
    assert len(moved) == 3  # nothing deleted: the damaged files are kept for a look
    assert planned_cells(run) == {cut, emptied, garbage}
    after = cell_rows(finished)
    assert {name: after[name].read_bytes() for name in untouched} == untouched
    for name in (cut, emptied, garbage):
        parse_row(after[name].read_text())
    with open(finished / f"{RESULTS}/summary.csv", newline="") as handle:
        summary = list(csv.DictReader(handle))
    assert len(summary) == len(rows) and all(row["max_rel_err"] for row in summary if row["status"] == "ok")
    assert "Nothing to be done" in snakemake(finished, 1, "--dry-run").stdout


def inject_failure(repo: Path, module: str, function: str) -> None:
    """Make ``function`` (or method) of ``module`` raise as its first statement."""
    path = repo / "workflow/convlab" / module
    lines = path.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"def {function}("))
    indent = len(lines[first]) - len(lines[first].lstrip()) + 4
    body = next(i for i in range(first, len(lines)) if lines[i].rstrip().endswith(":")) + 1
    lines.insert(body, " " * indent + 'raise RuntimeError("injected failure")\n')
    path.write_text("".join(lines))


def last_lines(logs: Path) -> set[str]:
    return {log.read_text().strip().splitlines()[-1] for log in logs.rglob("*.log") if log.read_text().strip()}


@pytest.mark.pipeline
@pytest.mark.parametrize("module, function, made", [
    ("pictures/source.py", "downscale", []),
    ("backends/cpu.py", "copy_bandwidth_gbps", []),
    ("run/celljob.py", "measure_job", []),
    ("report/aggregate.py", "aggregate", [f"{RESULTS}/summary.csv"]),
    ("report/figures.py", "render_figures", [f"{RESULTS}/figures/time_vs_size.png", f"{RESULTS}/figures/status.png"]),
    ("report/findings.py", "write_findings", [f"{RESULTS}/findings.html"]),
])
def test_a_failing_step_shows_its_error_line_and_leaves_nothing_stale(finished, module, function, made):
    """The failing step's line is on the terminal, and nothing of it is kept as if up to date: each
    of its outputs is gone or was left by a job the stopped run never started, and once the step
    works again the next plain run makes them all again (with the code as it was before the failure,
    so that only the stopped run says they are stale)."""
    logs = finished / "results"  # data logs are under results/logs/data, the rest under the label
    earlier = last_lines(logs)
    source = finished / "workflow/convlab" / module
    original = source.read_text()
    inject_failure(finished, module, function)  # its code changed: the step runs again
    started = time.time()
    run = snakemake(finished, 1, check=False)
    assert run.returncode != 0
    # the failing rule's log ends in its one error line, and the terminal shows that same line
    new = {line for line in last_lines(logs) - earlier if line.startswith("error:") and "injected failure" in line}
    assert new, run.stderr[-3000:]
    assert new & set(run.stderr.splitlines()), run.stderr[-3000:]
    assert not [name for name in made if (finished / name).exists() and (finished / name).stat().st_mtime > started]
    if made:
        source.write_text(original)
        repaired = time.time()
        snakemake(finished, 1)
        assert all((finished / name).stat().st_mtime > repaired for name in made)
        assert "Nothing to be done" in snakemake(finished, 1, "--dry-run").stdout


@pytest.mark.pipeline
def test_an_edit_to_measurement_code_re_measures_every_cell_and_to_report_code_only_the_report(finished):
    every_cell = set(cell_rows(finished))
    timing = finished / "workflow/convlab/measure/timing.py"
    original = timing.read_text()
    timing.write_text(original + "#\n")
    assert planned_cells(snakemake(finished, 1, "--dry-run")) == every_cell
    timing.write_text(original)
    assert "Nothing to be done" in snakemake(finished, 1, "--dry-run").stdout

    findings = finished / "workflow/convlab/report/findings.py"
    findings.write_text(findings.read_text() + "#\n")
    plan = snakemake(finished, 1, "--dry-run")
    assert not planned_cells(plan)
    assert planned_rules(plan) == REPORT_RULES


@pytest.mark.pipeline
def test_a_report_only_family_setting_re_measures_no_cell_and_an_edit_to_a_family_every_cell(finished):
    """A family's roofline marker is the report's alone (convlab.report.familydisplay): an edit to it re-renders
    the report. The family's module (its problems, its path) is measurement code still."""
    displays = finished / "workflow/convlab/report/familydisplay.py"
    original = displays.read_text()
    conv2d_marker = 'marker="o"'
    assert original.count(conv2d_marker) == 1
    displays.write_text(original.replace(conv2d_marker, 'marker="x"'))
    plan = snakemake(finished, 1, "--dry-run")
    assert not planned_cells(plan)
    assert planned_rules(plan) == REPORT_RULES
    displays.write_text(original)

    conv2d = finished / "workflow/convlab/plan/families/conv2d.py"
    conv2d.write_text(conv2d.read_text() + "#\n")
    assert planned_cells(snakemake(finished, 1, "--dry-run")) == set(cell_rows(finished))


@pytest.mark.pipeline
def test_a_summary_of_mixed_code_versions_says_so(finished):
    timing = finished / "workflow/convlab/measure/timing.py"
    timing.write_text(timing.read_text() + "#\n")
    kernel = finished / "kernels/cudnn.yaml"
    kernel.write_text(kernel.read_text() + "#\n")
    # only the edited kernel's cells run again (the user asked for mtime-only triggers)
    run = snakemake(finished, 1, "--rerun-triggers", "mtime")
    remeasured = planned_cells(run)
    assert remeasured and all("kernel~cudnn" in name for name in remeasured)
    warnings = [line for line in run.stderr.splitlines() if line.startswith(f"warning: {RESULTS}/summary.csv")]
    assert len(warnings) == 1 and "mix 2 versions of the measurement code" in warnings[0], run.stderr[-3000:]
    assert "mix 2 versions of the measurement code" in (finished / f"{RESULTS}/findings.html").read_text()


@pytest.mark.pipeline
def test_a_size_larger_than_the_source_is_refused_before_any_cell(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    result = snakemake(repo, 1, "--config", "source_size=80", check=False)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: cpu.sizes (the cpu backend's conv2d sizes): 96 larger than source_size 80; the "
                      "pictures are the source scaled down, so raise source_size or drop these sizes"]
    assert not (repo / f"{RESULTS}/cells").exists() and not list((repo / "data").glob("*.png"))


def fake_nvidia_smi(folder: Path) -> dict[str, str]:
    """An environment whose nvidia-smi lists a GPU (and whose driver files are absent)."""
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)'\n")
    smi.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def has_gpu_software() -> bool:
    import importlib.util

    return importlib.util.find_spec("cupy") is not None


@pytest.mark.pipeline
def test_the_first_line_names_the_backend_and_why(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    chosen = snakemake(repo, 1, "--dry-run")
    assert first_line(chosen).startswith("backend cpu: ") and "set in the config" in chosen.stderr
    if Path("/proc/driver/nvidia/gpus").exists():
        pytest.skip("this machine has an NVIDIA GPU: auto would choose it")
    auto = snakemake(repo, 1, "--dry-run", "--config", "backend=auto")
    first = first_line(auto)
    assert first.startswith("backend auto → cpu: ") and "; no NVIDIA GPU visible; " in first, first
    assert first.endswith(f"results under {RESULTS}/ (this host's CPU)"), first


@pytest.mark.pipeline
@pytest.mark.skipif(has_gpu_software(), reason="CuPy is installed here: auto would use the GPU nvidia-smi lists")
def test_auto_stops_where_a_gpu_is_visible_but_its_software_missing(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    env = {**snakemake_env(repo), **fake_nvidia_smi(tmp_path / "bin")}
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{snakemake_env(repo)['PATH']}"
    result = snakemake(repo, 1, "--dry-run", "--config", "backend=auto", check=False, env=env)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "NVIDIA H200" in errors[0] and "CuPy" in errors[0] and "pip install -r envs/requirements-cuda" in errors[0]
    assert "backend: cpu" in errors[0]


@pytest.mark.pipeline
@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").exists(), reason="this machine has an NVIDIA GPU")
def test_cuda_without_a_gpu_stops_a_local_run_before_any_job(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    unlabelled = snakemake(repo, 1, "--dry-run", "--config", "backend=cuda", check=False)
    assert unlabelled.returncode != 0
    last = unlabelled.stderr.strip().splitlines()[-1]
    # one line with what is missing and the whole fix: the cpu here, or a cluster with the GPU model named
    assert last.startswith("error: backend cuda, but this machine shows no NVIDIA GPU"), last
    assert "--config backend=cpu" in last and "--workflow-profile workflow/profiles/slurm --config device=" in last
    # a cluster submission from a login node without a GPU names the device, and may plan
    plan = snakemake(repo, 1, "--dry-run", "--config", "backend=cuda", "device=h100")
    assert first_line(plan).startswith("backend cuda (set in the config): no NVIDIA GPU visible")
    assert "results/h100/cells/cuda/" in plan.stdout
    run = snakemake(repo, 1, "--config", "backend=cuda", "device=h100", check=False)
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert errors and errors[0].startswith("error: backend cuda: no NVIDIA GPU visible on this machine, and jobs run "
                                           "here"), run.stderr[-3000:]
    assert not list((repo / "data").glob("*.png")) and not (repo / "results/h100/cells").exists()


def test_every_rule_with_a_log_shows_its_error_line_on_the_terminal():
    """Each rule's command runs through logged() (common.smk), which prints the log's last line
    (the command's `error:` line) when the command fails."""
    for rules in sorted((REPO / "workflow/rules").glob("*.smk")):
        text = rules.read_text()
        for block in text.split("\nrule ")[1:]:
            name = block.split(":", 1)[0]
            if "    log:" in block and "    shell:" in block:
                command = block.split("    shell:", 1)[1].lstrip()
                assert command.startswith("logged("), f"rule {name} in {rules.name}"


def test_the_issue_case_a_cpu_size_above_the_source_is_refused_naming_the_key():
    from convlab.plan.config import ConfigError, validate_config
    from convlab.plan.grid import build_cells

    config = validate_config({"source_size": 4096, "cpu": {"sizes": [8192]}})
    with pytest.raises(ConfigError, match=r"^cpu\.sizes .*: 8192 larger than source_size 4096"):
        build_cells(config, "cpu")


def test_kernel_sizes_that_match_no_size_of_the_grid_are_refused():
    from convlab.plan.config import ConfigError, validate_config
    from convlab.plan.grid import build_cells

    with pytest.raises(ConfigError, match=r"kernels\.direct\.sizes: none of 999 is a size the grid offers direct"):
        build_cells(validate_config({"kernels": {"direct": {"sizes": [999]}}}), "cuda")
    assert build_cells(validate_config({"kernels": {"direct": {"sizes": [128]}}}), "cuda")


# ---------------------------------------------------------------------------------------------
# Results keyed by device


def test_a_cell_on_another_device_than_its_label_records_both_names(tmp_path):
    from convlab.run.runner import foreign_device

    bandwidth = tmp_path / "cuda_copy_bandwidth.json"
    bandwidth.write_text('{"backend": "cuda", "device": "NVIDIA H200", "copy_gbps": 4000}')
    reason = foreign_device("NVIDIA H100 80GB HBM3", "h200", bandwidth)
    assert reason and "NVIDIA H100 80GB HBM3" in reason and "NVIDIA H200" in reason and "results/h200/" in reason
    assert foreign_device("NVIDIA H200", "h200", bandwidth) is None
    assert foreign_device("NVIDIA H200", "h200", tmp_path / "absent.json") is None


def test_labels_come_from_the_config_or_the_model():
    from convlab.plan.config import ConfigError
    from convlab.plan.devicelabel import choose_label, slug

    assert slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3" and slug("NVIDIA H200") == "h200"
    assert slug("AMD EPYC 7B13 64-Core Processor") == "epyc-7b13"
    assert choose_label("lab-a100", "cuda", [])[0] == "lab-a100"
    assert choose_label(None, "cuda", ["NVIDIA H200", "NVIDIA H200"])[0] == "h200"
    assert choose_label(None, "cpu", [])[0].startswith("cpu-")
    with pytest.raises(ConfigError, match="GPUs of 2 models"):
        choose_label(None, "cuda", ["NVIDIA H200", "NVIDIA H100 80GB HBM3"])
    with pytest.raises(ConfigError, match="config device"):
        choose_label(None, "cuda", [])


@pytest.mark.pipeline
def test_two_device_labels_live_side_by_side(finished):
    first = {name: path.read_bytes() for name, path in cell_rows(finished).items()}
    summary = (finished / RESULTS / "summary.csv").read_bytes()
    snakemake(finished, 2, "--config", "device=other-cpu")
    other = sorted((finished / "results/other-cpu/cells").rglob("*.csv"))
    assert len(other) == len(first) and (finished / "results/other-cpu/summary.csv").is_file()
    assert {name: path.read_bytes() for name, path in cell_rows(finished).items()} == first
    assert (finished / RESULTS / "summary.csv").read_bytes() == summary
    # back on the first label, only the devices page is made again: it now has two devices
    assert planned_rules(snakemake(finished, 1, "--dry-run")) == {"gpus", "all"}
    assert "other-cpu" in (finished / "results/gpus.html").read_text()

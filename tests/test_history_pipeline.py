"""The results database in the real workflow (tiny cpu config, in a temporary copy): a run that
re-measures cells ends with their verdict, an added size measures only its own cells, and a dry
run changes nothing on disk."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from workflow_helpers import (
    RESULTS,
    TINY,
    FinishedRun,
    cell_rows,
    copy_finished_run,
    job_events,
    planned_cells,
    snakemake,
    snakemake_env,
)

from convlab.measure.row import read_row_file

pytestmark = pytest.mark.pipeline


@pytest.fixture(scope="module")
def built(tiny_run: FinishedRun, tmp_path_factory) -> Path:
    """A copy of the session's tiny run, which this module's tests change in turn."""
    return copy_finished_run(tiny_run.repo, tmp_path_factory.mktemp("history") / "repo")


def row_checks(repo: Path) -> dict[str, str]:
    return {name: read_row_file(path)[-1] for name, path in cell_rows(repo).items()}


def tree(repo: Path, *folders: str) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(repo)): (p.stat().st_mtime_ns, p.stat().st_size)
            for folder in folders for p in (repo / folder).rglob("*") if p.is_file()}


def test_a_first_run_says_its_cells_are_new_and_keeps_them(built):
    assert (built / RESULTS / "history.sqlite").is_file()
    assert "measured for the first time" in (built / RESULTS / "verdicts" / "latest.txt").read_text()
    assert (built / RESULTS / "history.html").is_file() and (built / RESULTS / "figures" / "history.png").is_file()


def test_an_edited_kernel_re_measures_its_cells_and_the_run_ends_with_their_verdict(built):
    before = row_checks(built)
    with open(built / "kernels" / "direct.yaml", "a") as description:
        description.write("# an edit that changes no launch\n")
    started = time.time_ns()
    result = snakemake(built, 2)
    after = row_checks(built)
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed and all("kernel~direct/" in name for name in changed)
    assert len(changed) == sum("kernel~direct/" in name for name in after)
    text = result.stdout + result.stderr
    verdict = next(line for line in text.splitlines() if line.startswith("verdict: "))
    assert f"verdict: {len(changed)} cells of {RESULTS.split('/')[1]} re-measured" in verdict
    kernel_line = next(line for line in text.splitlines() if line.startswith("  direct "))
    assert "changed: kernel files" in kernel_line
    assert text.count("verdict: ") == 1
    # the pair step found them, and said why a cpu twin's previous version cannot run again
    pair_log = (built / RESULTS / "logs" / "pair.log").read_text()
    assert f"paired: 0 of {len(changed)} cells whose kernel files changed" in pair_log
    assert "only those run again" in pair_log
    # printed by the history job, before the report stage redrew any figure (the gallery draws
    # from the kernel and the picture alone, not from the rows)
    recorded = (built / RESULTS / "verdicts" / "latest.txt").stat().st_mtime_ns
    drawn = {p: p.stat().st_mtime_ns for p in (built / RESULTS).rglob("*.png") if "gallery" not in p.parts}
    assert [p for p, at in drawn.items() if at > recorded]
    assert not [p for p, at in drawn.items() if started < at < recorded]
    listed = subprocess.run([sys.executable, "-m", "convlab", "history", "--kernel", "direct"], cwd=built,
                            env={**snakemake_env(built), "PYTHONPATH": str(built / "workflow")},
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert len([line for line in listed.stdout.splitlines() if "kernel~direct" in line]) == 2 * len(changed)


def test_a_cu_edit_on_the_cpu_backend_measures_nothing_and_says_where_it_is_measured(built):
    source = built / "kernels" / "direct.cu"
    original, stamp = source.read_bytes(), source.stat()
    source.write_text(source.read_text() + "\n this is not CUDA\n")
    try:
        result = snakemake(built, 1, "--dry-run")
        text = result.stdout + result.stderr
        assert not planned_cells(result)
        notes = [line for line in text.splitlines() if line.startswith("note: kernels/direct.cu changed")]
        assert len(notes) == 1 and "the cpu backend runs each kernel's cpu twin" in notes[0]
        assert "measured on a GPU" in notes[0]
    finally:
        source.write_bytes(original)
        os.utime(source, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))


def test_a_dry_run_changes_nothing_on_disk_and_names_the_damaged_row(built):
    victim = sorted(cell_rows(built).values())[0]
    victim.write_text("cut")
    before = tree(built, "results", "data")
    result = snakemake(built, 1, "--dry-run")
    assert tree(built, "results", "data") == before
    assert f"damaged row: {victim.relative_to(built)}" in result.stderr
    assert "the real run will move it" in result.stderr
    snakemake(built, 2)
    assert read_row_file(victim)  # measured again by the real run


def test_adding_a_size_measures_only_that_sizes_cells(built):
    config = yaml.safe_load((built / TINY).read_text())
    config["conv2d"]["sizes"].append(128)
    config["cpu"]["sizes"].append(128)
    (built / "config" / "tiny-plus.yaml").write_text(yaml.safe_dump(config))
    before = row_checks(built)
    pictures = tree(built, "data")
    snakemake(built, 2, configfile="config/tiny-plus.yaml")
    after = row_checks(built)
    assert {name: after[name] for name in before} == before  # no earlier cell measured again
    added = set(after) - set(before)
    assert added and all("/size~128/" in name for name in added)
    assert all(tree(built, "data")[name] == stamp for name, stamp in pictures.items())


def test_a_rerun_beside_a_busy_neighbour_calls_nothing_faster_or_slower(built):
    """A forced re-measure of every cell (nothing changed) while two processes keep the host's
    cores busy: the cpu backend's FASTER/SLOWER are unconfirmed, so the run calls none; and the
    pair step, which had nothing to pair, left its file empty."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        result = snakemake(built, 1, "--forcerun", "cell")
    finally:
        for spinner in spinners:
            spinner.kill()
    verdict = next(line for line in (result.stdout + result.stderr).splitlines() if line.startswith("verdict: "))
    assert " SLOWER" not in verdict and " FASTER" not in verdict, verdict
    pairs = (built / RESULTS / "verdicts" / "paired.csv").read_text().splitlines()
    assert pairs[0].startswith("cell,kernel,previous_hash") and len(pairs) == 1


def test_counters_on_the_cpu_backend_go_through_the_service_and_leave_every_cell_ok_with_the_reason(built):
    result = snakemake(built, 2, "--config", "counters=true")
    table = (built / RESULTS / "counters.csv").read_text().splitlines()
    ok = [row for row in (built / RESULTS / "summary.csv").read_text().splitlines()[1:] if ",ok," in row]
    assert len(table) - 1 == len(ok) > 0
    assert all(line.endswith("no hardware counters on the cpu backend") for line in table[1:])
    said = result.stdout + result.stderr
    warnings = [line for line in said.splitlines() if line.startswith("warning: counters:")]
    assert len(warnings) == 1 and "because no hardware counters on the cpu backend" in warnings[0]
    assert "Traceback" not in said
    assert (built / RESULTS / "counters.html").is_file() and (built / RESULTS / "figures" / "roofline_measured.png").is_file()
    # the counters are read after the run's verdict (the pair step before it needs the GPU too)
    events = job_events(result)
    assert events.index(("end", "history")) < events.index(("start", "counters")), events

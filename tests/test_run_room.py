"""The run's own room (convlab.snakefile: the plan, the prologue, the jobs' environment, the start
and the end), tested in-process without Snakemake; and the rules' shape: rules, wildcard constraints,
the plan's construction and one-line lookups on it, nothing else."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest
from workflow_helpers import REPO

from convlab.plan.cell import CELL_PATH
from convlab.plan.configfile import read_config_file
from convlab.plan.gridfile import read_grid
from convlab.service.jobenv import (
    JOB_STARTED_ENV,
    RUN_COMMIT_ENV,
    RUN_ID_ENV,
    job_start,
    process_age_s,
    stamped_age_s,
)
from convlab.snakefile import api, freshness, prologue, runlife
from convlab.snakefile.jobenvironment import JOB_START_SCRIPT, USER_BASH_ENV, export_job_environment
from convlab.snakefile.prologue import RunRefused
from convlab.snakefile.runlock import CLEAN_NAME
from convlab.snakefile.runplan import RunPlan
from convlab.status import UserError

RULES = sorted((REPO / "workflow" / "rules").glob("*.smk")) + [REPO / "Snakefile", REPO / "workflow" / "Snakefile"]
# Snakemake's directives that may stand at the top of a rules file, besides rules themselves.
DIRECTIVES = ("include:", "configfile:", "report:", "wildcard_constraints:", "localrules:", "resource_scopes:",
              "onstart:", "onsuccess:", "onerror:", "rule ", "checkpoint ")
# A lookup: one name bound to the plan (or the report's part of it), to one attribute of it, or to
# the call that builds it; or the one line that puts this checkout's package first on the path.
LOOKUP = re.compile(r"^[A-Za-z_][A-Za-z_0-9]* = (PLAN|REPORT|start_run\(|checked_default_config\(|ancient\(PLAN\.)"
                    r"[A-Za-z_0-9.()\[\]\"', ]*$|^config = PLAN\.config$")
PACKAGE_PATH = "sys.path.insert(0, str(Path(str(workflow.current_basedir)).parent))"
# the thin Snakefile's first line, as every Snakemake workflow's
MIN_VERSION = re.compile(r'^min_version\("[0-9.]+"\)$')


def top_level_statements(path: Path) -> list[str]:
    """The lines of a rules file that start a top-level statement (not indented, not a comment, not a
    closing bracket of an import)."""
    lines = []
    for line in path.read_text().splitlines():
        if not line or line[0].isspace() or line.startswith("#") or line.startswith(")"):
            continue
        lines.append(line)
    return lines


def test_the_rules_hold_rules_wildcards_and_lookups_on_the_plan_and_nothing_else():
    strays = []
    for path in RULES:
        for line in top_level_statements(path):
            allowed = (line.startswith(DIRECTIVES) or line.startswith(("import ", "from ")) or LOOKUP.match(line)
                       or line == PACKAGE_PATH or MIN_VERSION.match(line))
            if not allowed:
                strays.append(f"{path.relative_to(REPO)}: {line}")
    assert strays == []
    # the plan is built once, in one place
    built = [path.name for path in RULES for line in top_level_statements(path) if "start_run(" in line]
    assert built == ["common.smk"]


def test_the_rules_import_one_module_of_few_names():
    names = api.__all__
    assert len(names) <= 15, names
    imported = set()
    for path in RULES:
        for line in path.read_text().splitlines():
            match = re.match(r"from (convlab[\w.]*) import", line)
            if match:
                imported.add(match.group(1))
    assert imported == {"convlab.snakefile.api"}
    assert all(hasattr(api, name) for name in names)


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A working folder with the tiny cpu config's plan, its pictures and its results folder."""
    for folder in ("kernels", "config"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    monkeypatch.chdir(tmp_path)
    config = read_config_file(REPO / "config" / "config.yaml")
    config.update(read_config_file(REPO / "config" / "tiny-cpu.yaml"))
    return RunPlan.build(config, REPO)


def test_the_plan_is_built_once_from_the_config_and_answers_the_rules(lab):
    assert lab.backend == "cpu" and lab.devices == [lab.cells[0].device]
    cell = lab.cells[0]
    wildcards = SimpleNamespace(device=cell.device)
    assert lab.cell_paths[cell.device] == [c.path for c in lab.cells]
    assert lab.device_cells(wildcards) == lab.cell_paths[cell.device]
    assert lab.final_outputs()[: len(lab.cells)] == [c.path for c in lab.cells]
    assert "results/gpus.html" in lab.final_outputs()
    assert lab.runner.startswith("PYTHONPATH=") and lab.runner.endswith("python -S -m convlab")
    assert set(lab.wildcard_values()) == {"device", "backend", "size", "experiment", "kernel", "problem", "variant"}


def test_the_rules_functions_of_a_job_keep_their_signatures_for_snakemake(lab):
    """Snakemake asks an input or params function's signature each time it calls it: the plan's
    are plain functions whose signature is computed once and kept (inspect returns it at once)."""
    named = set(re.findall(r"PLAN\.(\w+)", "".join(path.read_text() for path in RULES)))
    functions = {name: getattr(lab, name) for name in named if callable(getattr(lab, name))}
    of_a_job = {name: function for name, function in functions.items()
                if "wildcards" in inspect.signature(function).parameters}
    assert {"cell_image", "kernel_files", "cell_spec", "image_option", "cell_priority"} <= set(of_a_job)
    for name, function in of_a_job.items():
        assert "__signature__" in vars(function), name
        assert getattr(lab, name) is function  # made once per plan
        assert list(inspect.signature(function).parameters)[0] == "wildcards", name
    cell = lab.cells[0]
    wildcards = cell_wildcards(cell.path)
    assert lab.cell_spec(wildcards) == cell.to_json()
    assert lab.image_option(wildcards, SimpleNamespace(image="data/x.png")) == "--image data/x.png"


def test_the_prologue_says_its_lines_in_order_and_a_typo_in_the_source_picture_removes_nothing(lab):
    said: list[str] = []
    prologue.prologue(lab, dry_run=False, say=said.append)
    assert said[0].startswith("backend cpu: ")
    Path("data").mkdir()
    pictures = [Path("data/source_256.png"), Path("data/input_64.png")]
    for picture in pictures:
        picture.write_bytes(b"a picture")
    lab.config["source_image"] = "nosuch.png"
    with pytest.raises(RunRefused, match="^error: .*nosuch.png"):
        prologue.prologue(lab, dry_run=False, say=said.append)
    assert all(picture.exists() for picture in pictures)
    assert "nosuch.png" in Path("results/logs/data/source_256.log").read_text()


def test_the_prologue_moves_a_damaged_row_and_a_dry_run_only_says_so(lab):
    row = Path(lab.cells[0].path)
    row.parent.mkdir(parents=True)
    row.write_text("experiment,kernel\nconv2d,dir")
    said: list[str] = []
    prologue.damaged_rows(lab, dry_run=True)
    assert row.exists()
    said += prologue.damaged_rows(lab, dry_run=False)
    assert not row.exists() and said and str(row.name) in " ".join(said)


def test_the_jobs_environment_is_written_in_one_place_and_only_the_users_run_names_a_new_run(lab, monkeypatch):
    for name in list(os.environ):
        if name.startswith("CONVLAB_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CONVLAB_RUNTIME_DIR", str(Path("runtime").resolve()))
    export_job_environment(lab, main_process=False)
    assert RUN_ID_ENV not in os.environ
    written = {name for name in os.environ if name.startswith("CONVLAB_")}
    assert written >= {"CONVLAB_CELL_TIMEOUT_S", "CONVLAB_SERVICE_IDLE_S", "CONVLAB_RUN_CODE", "CONVLAB_RUN_SOCKET",
                       "CONVLAB_RUN_SOCKET_FOR", "CONVLAB_WARM_SHAPES", RUN_COMMIT_ENV}
    assert os.environ["CONVLAB_SERVICE_IDLE_S"] == "10"  # the tiny config's service.idle_timeout_s
    export_job_environment(lab, main_process=True)
    assert re.match(r"^\d{8}T\d{6}-[0-9a-f]{4}$", os.environ[RUN_ID_ENV])
    # the writers of the run's variables: this room's module and the service's own settings
    sources = [path for path in (REPO / "workflow").rglob("*.smk")]
    assert not any("os.environ" in path.read_text() for path in sources)


def test_each_jobs_shell_stamps_its_start_to_the_microsecond_and_keeps_the_users_bash_env(lab, monkeypatch, tmp_path):
    users = tmp_path / "users_bash_env.sh"
    users.write_text("export USERS_OWN=yes\n")
    monkeypatch.setenv("BASH_ENV", str(users))
    for name in (USER_BASH_ENV, JOB_STARTED_ENV):
        monkeypatch.setenv(name, "")
    export_job_environment(lab, main_process=False)
    assert (os.environ["BASH_ENV"], os.environ[USER_BASH_ENV]) == (str(JOB_START_SCRIPT), str(users))
    export_job_environment(lab, main_process=False)  # read again (a cluster node's run): the user's file kept
    assert (os.environ["BASH_ENV"], os.environ[USER_BASH_ENV]) == (str(JOB_START_SCRIPT), str(users))
    before = time.time()
    shown = subprocess.run(["bash", "-c", f"echo ${JOB_STARTED_ENV} $USERS_OWN"], env={**os.environ, "LC_ALL": "C"},
                           capture_output=True, text=True).stdout.split()
    assert len(shown) == 2 and shown[1] == "yes", shown
    assert re.fullmatch(r"\d+\.\d{6}", shown[0]), f"bash 5's $EPOCHREALTIME expected, the job's shell gave {shown}"
    assert before - 0.001 <= float(shown[0]) <= time.time()


def test_a_cell_job_times_its_start_up_from_its_shells_stamp_or_else_from_its_process(monkeypatch):
    now = time.time()
    monkeypatch.setenv(JOB_STARTED_ENV, f"{now - 0.0123456:.6f}".replace(".", ","))  # a comma-decimal locale
    assert stamped_age_s(now, process_age=0.0120) == pytest.approx(0.0123456, abs=2e-6)
    startup_ms, started_at = job_start()  # this process is older than the stamp: the stamp stands
    assert startup_ms >= 12.3 and started_at == pytest.approx(now - 0.0123456, abs=0.05)
    own_age = process_age_s()
    assert own_age is not None
    # no stamp, an unreadable one, one ahead of now, or one its process is younger than (inherited
    # from a parent that ran a while): the process's own start, from /proc
    for stamp in ("", "soon", f"{now + 5:.6f}", f"{now - own_age - 1:.6f}"):
        monkeypatch.setenv(JOB_STARTED_ENV, stamp)
        assert stamped_age_s(now, own_age) is None
        startup_ms, _ = job_start()
        assert startup_ms == pytest.approx(own_age * 1e3, abs=1e3)
    monkeypatch.setenv(JOB_STARTED_ENV, f"{now - 120:.6f}")  # the process's age unknown: a minute at most
    assert stamped_age_s(now) is None and stamped_age_s(now, process_age=200.0) == pytest.approx(120, abs=1e-3)


def fake_workflow(executor: str | None, jobs: list[str], main: bool = True) -> SimpleNamespace:
    limiter = object()
    return SimpleNamespace(executor_plugin=SimpleNamespace(name=executor) if executor else None, is_main_process=main,
                           scheduler=SimpleNamespace(job_rate_limiter=limiter),
                           dag=SimpleNamespace(needrun_jobs=lambda: [SimpleNamespace(rule=SimpleNamespace(name=n),
                                                                                     scheduler_resources={"_cores": 1})
                                                                     for n in jobs]))


def test_the_run_starts_and_ends_without_snakemake(lab, monkeypatch):
    started: list[str] = []
    monkeypatch.setattr(runlife, "start_service", started.append)
    monkeypatch.setenv("CONVLAB_SERVICE", "on")
    Path(".snakemake").mkdir()
    (Path(".snakemake") / CLEAN_NAME).write_text("{}\n")
    local = fake_workflow("local", ["cell", "aggregate"])
    runlife.on_start(lab, local)
    assert local.scheduler.job_rate_limiter is None  # a local run paces nothing
    assert not (Path(".snakemake") / CLEAN_NAME).exists()  # until this run ends cleanly
    assert started == ["cpu"]
    idle = fake_workflow("local", ["aggregate"])
    runlife.on_start(lab, idle)
    assert started == ["cpu"]  # nothing to measure: no service started
    cluster = fake_workflow("slurm", ["cell"])
    runlife.on_start(lab, cluster)
    assert cluster.scheduler.job_rate_limiter is not None and started == ["cpu"]
    ended: list[bool] = []
    monkeypatch.setattr(runlife, "end_of_run", lambda failed: ended.append(failed))
    runlife.on_end(failed=True)
    assert not (Path(".snakemake") / CLEAN_NAME).exists()
    runlife.on_end(failed=False)
    assert (Path(".snakemake") / CLEAN_NAME).exists() and ended == [True, False]


def cell_wildcards(path: str) -> dict[str, str]:
    """The cell job's wildcards, as Snakemake reads them from its row's path."""
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+(?:/[^/]+)*?)", re.escape(CELL_PATH))
    return re.fullmatch(pattern, path).groupdict()


def test_a_run_with_a_cell_to_measure_starts_measuring_as_the_dags_first_cell_job_is_made(lab, monkeypatch):
    started: list[str] = []
    compiled: list[str] = []
    monkeypatch.setattr(runlife, "start_service", started.append)
    monkeypatch.setattr(runlife, "compile_ahead", lambda plan: compiled.append(plan.backend))
    monkeypatch.setenv("CONVLAB_SERVICE", "on")
    cell = lab.cells[0]
    wildcards = cell_wildcards(cell.path)
    for workflow in (fake_workflow(None, []), fake_workflow("dryrun", []), fake_workflow("slurm", []),
                     fake_workflow("local", [], main=False)):  # no run, a dry run, a cluster's, a node's
        lab.on_first_cell_job = partial(runlife.start_beside_the_dag, lab, workflow)
        assert lab.cell_image(wildcards) == [cell.image]
        assert (started, compiled) == ([], [])
    lab.on_first_cell_job = partial(runlife.start_beside_the_dag, lab, fake_workflow("local", []))
    lab.cell_image(wildcards)
    lab.cell_image(wildcards)  # once: the first cell job only
    assert (started, compiled) == (["cpu"], ["cpu"])
    assert Path(lab.grid_of(SimpleNamespace(device=cell.device))).exists()  # the compile-ahead reads it
    runlife.on_start(lab, fake_workflow("local", ["cell"]))
    assert (started, compiled) == (["cpu"], ["cpu"])  # onstart starts nothing again
    # every row there: whether a cell runs is known once the DAG is built, at onstart
    for path in lab.cell_paths[cell.device]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("row\n")
    lab.measuring_started = False
    lab.on_first_cell_job = partial(runlife.start_beside_the_dag, lab, fake_workflow("local", []))
    lab.cell_image(wildcards)
    assert started == ["cpu"]
    runlife.on_start(lab, fake_workflow("local", ["cell"]))
    assert started == ["cpu", "cpu"]


def test_the_jobs_read_the_grid_the_run_planned_named_by_its_content(lab, monkeypatch):
    monkeypatch.setenv("CONVLAB_SERVICE", "off")
    label = lab.devices[0]
    path = lab.grid_of(SimpleNamespace(device=label))
    assert not Path(path).exists()  # a dry run, which never starts, writes nothing
    runlife.on_start(lab, fake_workflow("local", ["cell"]))
    planned = read_grid(path)
    assert planned.cells == [cell for cell in lab.cells if cell.device == label]
    assert planned.config == {key: value for key, value in lab.config.items() if key != "report_intro"}
    # an edit after the run started: a job still reads the cells the DAG was built from
    Path("kernels/direct.yaml").write_text(Path("kernels/direct.yaml").read_text() + "\n# edited\n")
    assert read_grid(path).cells == planned.cells
    # another grid is another file, so the jobs' params name another
    config = read_config_file(REPO / "config" / "config.yaml")
    config.update(read_config_file(REPO / "config" / "tiny-cpu.yaml"))
    config["conv2d"] = {**config["conv2d"], "strides": [1]}
    other = RunPlan.build(config, REPO)
    assert other.grid_file(label) != path and not Path(other.grid_file(label)).exists()
    Path(path).write_text('{"config": {}')
    with pytest.raises(UserError, match="grid file cannot be read") as refused:
        read_grid(path)
    assert "\n" not in str(refused.value)
    runlife.on_start(lab, fake_workflow("local", ["cell"]))  # its content decides: a damaged file is written again
    assert read_grid(path).cells == planned.cells


def test_cuda_without_a_gpu_where_the_jobs_run_stops_the_start_with_one_line(lab, monkeypatch):
    lab.choice = SimpleNamespace(**{**lab.choice.__dict__, "backend": "cuda", "gpus": ()})
    with pytest.raises(SystemExit, match="^error: .*GPU"):
        api.run_started(lab, fake_workflow("local", ["cell"]))


def test_a_dry_run_beside_a_live_run_leaves_the_report_stage_as_it_is(lab):
    """A live run has forgotten that the one before it ended cleanly; a dry run started beside it
    must not mark the report stage suspect, or the run after would draw it all again."""
    Path(".snakemake").mkdir()
    Path(lab.redrawn).parent.mkdir(parents=True)
    Path(lab.redrawn).write_text("")
    suspect = Path(lab.report_suspect)
    suspect.write_text("\n")
    prologue.report_stage_mark(lab, dry_run=True)
    assert suspect.read_text() == "\n"
    prologue.report_stage_mark(lab, dry_run=False)  # the real run after a run that did not end cleanly
    assert suspect.read_text() != "\n"


def test_a_row_of_another_measurement_code_is_measured_again_whatever_its_check_says(lab):
    """A row written by another convlab (or by hand, its check made consistent) stands for its cell
    only where this code measured it."""
    import json

    from convlab.measure.row import failure_row, write_row_atomically

    cell = lab.cells[0]
    row = Path(cell.path)
    row.parent.mkdir(parents=True)
    mine = failure_row(json.loads(cell.to_json()), "error", "a test row")
    write_row_atomically(mine, row)
    assert prologue.rows_of_changed_code(lab, dry_run=False) == [] and row.exists()
    write_row_atomically({**mine, "code_version": "0123456789ab"}, row)
    said = prologue.rows_of_changed_code(lab, dry_run=True)
    assert row.exists() and said[0].endswith("a real run measures them again")
    said = prologue.rows_of_changed_code(lab, dry_run=False)
    assert not row.exists() and said == [f"1 rows were measured by other measurement code than this convlab's (another "
                                         f"version, or an edit of the code that measures; the first: {row}); "
                                         "measured again"]
    write_row_atomically({**mine, "convlab_version": "0.0.9"}, row)
    prologue.rows_of_changed_code(lab, dry_run=False)
    assert not row.exists()


def test_a_row_dated_ahead_of_an_edit_of_its_kernel_is_measured_again_by_its_files_content(lab):
    """Rows copied from a machine whose clock runs ahead are dated after every later edit of their
    kernel's files: the results database's hash of the files each row ran decides instead."""
    import json

    from convlab.history import store
    from convlab.measure.row import failure_row, write_row_atomically

    cell = lab.cells[0]
    row = Path(cell.path)
    row.parent.mkdir(parents=True)
    write_row_atomically(failure_row(json.loads(cell.to_json()), "error", "a test row"), row)
    check = row.read_text().strip().splitlines()[-1].rsplit(",", 1)[-1]

    def recorded_with(kernel_hash: str) -> None:
        database = store.database_path(f"results/{cell.device}")
        for path in database.parent.glob(database.name + "*"):
            path.unlink()
        connection, _ = store.open_for_writing(database)
        measurement = dict.fromkeys(store.MEASUREMENT_FIELDS)
        measurement.update(row_check=check, run_id="20260101T000000-0000", cell=cell.path, kernel=cell.kernel,
                           git_commit="", kernel_hash=kernel_hash, row_json="{}")
        store.add_measurements(connection, "host", [measurement])
        connection.close()

    recorded_with(lab.kernel_hash(cell.kernel, cell.backend))
    assert prologue.rows_of_edited_kernel_files(lab, dry_run=False) == [] and row.exists()

    recorded_with("0123456789ab")  # its kernel's files were edited since this row was measured
    year_ahead = row.stat().st_mtime + 365 * 86400
    os.utime(row, (year_ahead, year_ahead))
    said = prologue.rows_of_edited_kernel_files(lab, dry_run=True)
    assert row.exists() and said[0].startswith("1 rows are dated after their kernel's files but were measured on "
                                               "other files") and said[0].endswith("a real run measures them again")
    said = prologue.rows_of_edited_kernel_files(lab, dry_run=False)
    assert not row.exists() and said[0].endswith("measured again") and str(row) in said[0]

    # an edit newer than its row: Snakemake's times measure it again too, so nothing more is said
    write_row_atomically(failure_row(json.loads(cell.to_json()), "error", "a test row"), row)
    os.utime(row, (1_000_000, 1_000_000))
    assert prologue.rows_of_edited_kernel_files(lab, dry_run=False) == [] and not row.exists()


def test_files_dated_in_the_future_are_dated_now_and_a_dry_run_only_says_so(lab):
    """Snakemake stops a run whose summary, made now, is older than a row dated by a clock ahead."""
    row = Path(lab.cells[0].path)
    row.parent.mkdir(parents=True)
    row.write_text("a row\n")
    ahead = row.stat().st_mtime + 365 * 86400
    os.utime(row, (ahead, ahead))
    said = prologue.files_from_the_future(lab, dry_run=True)
    assert said == [f"1 files are dated in the future by another clock (a copy, a cluster node; the first: {row}); "
                    "a real run dates them now"] and row.stat().st_mtime == ahead
    said = prologue.files_from_the_future(lab, dry_run=False)
    assert said[0].endswith("dated now") and row.stat().st_mtime < ahead - 300 * 86400
    assert prologue.files_from_the_future(lab, dry_run=False) == []


def test_the_walk_for_files_dated_ahead_looks_at_the_grids_rows_by_path_and_not_at_other_rows(tmp_path):
    """The cell rows' folders (as many as the rows) and the jobs' logs are left out of the walk: each
    row of the grid is looked at by its path, and a row of a cell outside the grid is in no job."""
    results = tmp_path / "results" / "h200"
    ahead = time.time() + 365 * 86400
    in_grid, outside, summary, log = (results / "cells" / "a" / "x.csv", results / "cells" / "b" / "y.csv",
                                      results / "summary.csv", results / "logs" / "cells" / "x.log")
    for path in (in_grid, outside, summary, log):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
        os.utime(path, (ahead, ahead))
    found = freshness.files_dated_ahead([results], time.time(), [str(in_grid), str(tmp_path / "missing.csv")])
    assert found == sorted([in_grid, summary])
    os.utime(in_grid, (time.time(), time.time()))
    assert freshness.files_dated_ahead([results], time.time(), [str(in_grid)]) == [summary]


def test_grid_files_of_other_runs_beyond_a_few_are_dropped(tmp_path):
    from convlab.plan.gridfile import GRID_DIR, OTHERS_KEPT, save_grid

    folder = tmp_path / GRID_DIR
    folder.mkdir(parents=True)
    paths = [folder / f"cpu-{index}.json" for index in range(OTHERS_KEPT + 3)]
    for age, path in enumerate(reversed(paths)):
        path.write_text("{}")
        os.utime(path, (1e9 - age, 1e9 - age))  # the last is the newest
    newest = save_grid({"run": "new"}, [], "cpu", tmp_path)
    kept = set(newest.parent.glob("*.json"))
    assert kept == {newest, *paths[-OTHERS_KEPT:]}


def test_pictures_made_by_other_code_are_made_aside_and_stay_as_they_are_where_that_fails(tmp_path, monkeypatch):
    import hashlib

    from convlab.snakefile import picturecontent

    monkeypatch.chdir(tmp_path)
    Path("data").mkdir()
    Path("data/source_64.png").write_bytes(b"old source")
    Path("data/input_32.png").write_bytes(b"old picture")
    row = Path("row.csv")
    row.write_text("a row measured on the picture the new code makes\n")
    recorded = {str(row): hashlib.sha256(b"new picture").hexdigest()[:12]}
    entry = picturecontent.PictureRows("data/input_32.png", [str(row)], recorded)
    monkeypatch.setattr(picturecontent, "rows_by_picture", lambda cells, untouched: [entry])
    monkeypatch.setattr(picturecontent, "made_by_other_code", lambda source: True)

    def no_ffmpeg(picture, source, size, user_image, warn):
        raise OSError("no ffmpeg on this machine")

    monkeypatch.setattr(picturecontent, "make_picture", no_ffmpeg)
    lines = picturecontent.check_pictures([], "data/source_64.png", 64, None, dry_run=False)
    assert lines == ["warning: data/source_64.png was made by other picture code and could not be made again here "
                     "(no ffmpeg on this machine); the pictures as they are stay, with their rows"]
    assert Path("data/input_32.png").read_bytes() == b"old picture" and row.exists()
    assert sorted(path.name for path in Path("data").iterdir()) == ["input_32.png", "source_64.png"]

    def make(picture, source, size, user_image, warn):
        if not Path(source).exists():
            Path(source).write_bytes(b"new source")
        Path(picture).write_bytes(b"new picture")

    monkeypatch.setattr(picturecontent, "make_picture", make)
    lines = picturecontent.check_pictures([], "data/source_64.png", 64, None, dry_run=False)
    assert lines == ["data/source_64.png was made by other picture code: made again, with data/input_32.png"]
    assert (Path("data/source_64.png").read_bytes(), Path("data/input_32.png").read_bytes()) == (
        b"new source", b"new picture")
    assert row.exists()  # measured on the same picture as the new code makes
    assert sorted(path.name for path in Path("data").iterdir()) == ["input_32.png", "source_64.png"]

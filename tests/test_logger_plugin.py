"""The project's logger plugin (workflow/logger/): its counts, time-left estimate and lines, fed
with log records like those Snakemake 9 sends; and that the plugin Snakemake loads is this one."""

from __future__ import annotations

import filecmp
import logging
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
from snakemake_interface_logger_plugins.common import LogEvent

REPO = Path(__file__).resolve().parents[1]
PLUGIN_SOURCE = REPO / "workflow/logger"
# the source in this checkout, ahead of the copy pip installed (test_the_installed_plugin_is_this_source
# says when that copy is stale)
sys.path.insert(0, str(PLUGIN_SOURCE))

import snakemake_logger_plugin_convlab as plugin  # noqa: E402
from snakemake_logger_plugin_convlab import LogHandler  # noqa: E402
from snakemake_logger_plugin_convlab.display import PlainDisplay, TerminalDisplay  # noqa: E402
from snakemake_logger_plugin_convlab.progress import RunProgress, format_duration  # noqa: E402
from snakemake_logger_plugin_convlab.reporter import LINE_CHARS, MESSAGE_LINES, Reporter  # noqa: E402

ROWS, COLUMNS = 24, 80
# One status line drawn on the last row: cursor saved, moved there, the row erased, the text,
# cursor restored.
STATUS_DRAW = re.compile(rf"\x1b7\x1b\[{ROWS};1H\x1b\[2K([^\x1b]*)\x1b8")


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def record(event: LogEvent | None = None, msg: str | None = None, level: int = logging.INFO,
           **fields: object) -> logging.LogRecord:
    """A log record as Snakemake 9 logs it: the event and its fields as the record's attributes."""
    attributes = {"msg": msg, "levelno": level, "levelname": logging.getLevelName(level), **fields}
    if event is not None:
        attributes["event"] = event
    return logging.makeLogRecord(attributes)


# Where Snakemake's complete log is once it has opened one.
COMPLETE_LOG = "/repo/.snakemake/log/x.snakemake.log"


class Run:
    """A reporter fed like Snakemake feeds the plugin, its output collected. ``complete_log``: None
    before Snakemake opens its complete log; ``keeps``: whether a traceback can be kept in a file
    of its own (the texts kept are in ``kept``)."""

    def __init__(self, terminal: bool = False, show_progress: bool = True, complete_log: str | None = COMPLETE_LOG,
                 keeps: bool = True) -> None:
        self.clock = Clock()
        self.written: list[str] = []
        self.kept: list[str] = []
        display = (TerminalDisplay(self.written.append, lambda: os.terminal_size((COLUMNS, ROWS))) if terminal
                   else PlainDisplay(self.written.append))

        def keep(text: str) -> str | None:
            self.kept.append(text)
            return "/repo/.snakemake/log/x.traceback.log" if keeps else None

        self.reporter = Reporter(display, show_progress=show_progress, clock=self.clock,
                                 complete_log=lambda: complete_log, keep=keep)
        self.jobs_done = 0
        self.jobs_total = 0
        self.next_jobid = 1

    @property
    def text(self) -> str:
        return "".join(self.written)

    def plan(self, **counts: int) -> None:
        self.jobs_total = sum(counts.values())
        self.reporter.handle(record(LogEvent.RUN_INFO, "Job stats: ...", stats={**counts, "total": self.jobs_total}))

    def job(self, rule: str, seconds: float) -> int:
        """One job of ``rule`` that runs ``seconds`` and finishes."""
        jobid = self.next_jobid
        self.next_jobid += 1
        self.reporter.handle(record(LogEvent.JOB_STARTED, "Execute 1 jobs...", jobs=[jobid]))
        self.reporter.handle(record(LogEvent.JOB_INFO, f" Rule: {rule}, Jobid: {jobid}", jobid=jobid, rule_name=rule,
                                    log=[f"logs/{rule}/{jobid}.log"]))
        self.reporter.handle(record(LogEvent.SHELLCMD, "Shell command: true", shellcmd="true"))
        self.clock.now += seconds
        self.reporter.handle(record(LogEvent.JOB_FINISHED, f"Finished jobid: {jobid} (Rule: {rule})", job_id=jobid))
        self.jobs_done += 1
        self.reporter.handle(record(LogEvent.PROGRESS, None, done=self.jobs_done, total=self.jobs_total))
        return jobid

    def fail(self, rule: str, jobid: int) -> None:
        self.reporter.handle(record(LogEvent.JOB_ERROR, f"Error in rule {rule}, jobid: {jobid}", logging.ERROR,
                                    rule_name=rule, jobid=jobid, log=[f"logs/{rule}/{jobid}.log"],
                                    shellcmd="python -m convlab cell --spec '{...}' > log 2>&1"))


@pytest.mark.parametrize("seconds,text", [(0, "0:00"), (0.4, "0:00"), (42, "0:42"), (59.6, "1:00"), (70, "1:10"),
                                          (3723, "1:02:03"), (-5, "0:00")])
def test_durations_read_as_a_clock(seconds, text):
    assert format_duration(seconds) == text


def test_the_time_left_is_the_mean_time_per_finished_job_times_the_jobs_left():
    progress = RunProgress.planned({"cell": 6, "aggregate": 1, "total": 10}, now=100.0)
    progress.jobs_progress(4, 10)
    assert progress.seconds_left(140.0) is None  # too few jobs to say
    progress.jobs_progress(5, 10)
    assert progress.seconds_left(150.0) == pytest.approx(50.0)  # 10 s a job, 5 to go
    progress.jobs_progress(8, 10)
    assert progress.seconds_left(180.0) == pytest.approx(20.0)


def test_the_time_left_is_never_zero_while_jobs_remain():
    progress = RunProgress.planned({"cell": 99, "total": 100}, now=0.0)
    progress.jobs_progress(99, 100)
    assert progress.status(10.0).endswith("about 0:01 left")  # 0.1 s, rounded up


def test_the_status_counts_cells_from_the_jobs_of_rule_cell():
    run = Run()
    run.plan(source_image=1, cell=4, aggregate=1)
    run.job("source_image", 2)
    run.job("cell", 3)
    status = run.reporter.run.status(run.clock())
    assert status == "cells 1/4 · jobs 2/6 · 0:05 elapsed · estimating"


def test_a_run_without_cells_counts_jobs_only():
    run = Run()
    run.plan(aggregate=1, figures=2)
    for _ in range(3):
        run.job("figures", 1)
    assert run.text.splitlines() == ["plan: 3 jobs, 0 cells", "jobs 3/3 done in 0:03 (no cells to measure)"]


def test_output_that_is_not_a_terminal_gets_a_line_per_quarter_of_the_cells_and_a_final_line():
    run = Run()
    run.plan(source_image=1, cell=8, aggregate=1, all=1)
    run.job("source_image", 4)
    for _ in range(8):
        run.job("cell", 6)
    run.job("aggregate", 2)
    run.job("all", 0)
    assert run.text.splitlines() == [
        "plan: 11 jobs, 8 cells",
        "cells 2/8 · jobs 3/11 · 0:16 elapsed · estimating",
        "cells 4/8 · jobs 5/11 · 0:28 elapsed · about 0:34 left",
        "cells 6/8 · jobs 7/11 · 0:40 elapsed · about 0:23 left",
        "cells 8/8 measured in 0:54",
    ]
    assert "\x1b" not in run.text and "\r" not in run.text


def test_cells_passing_two_quarters_at_once_print_one_line():
    run = Run()
    run.plan(cell=2, all=1)
    run.job("cell", 1)  # 50 %: past 25 and 50
    run.job("cell", 1)
    run.job("all", 0)
    assert run.text.splitlines() == ["plan: 3 jobs, 2 cells", "cells 1/2 · jobs 1/3 · 0:01 elapsed · estimating",
                                     "cells 2/2 measured in 0:02"]


def test_a_terminal_gets_one_status_line_redrawn_on_its_last_row():
    run = Run(terminal=True)
    run.plan(cell=6, all=1)
    for _ in range(6):
        run.job("cell", 10)
    statuses = STATUS_DRAW.findall(run.text)
    assert statuses[0] == "cells 0/6 · jobs 0/7 · 0:00 elapsed · estimating"
    assert "cells 5/6 · jobs 5/7 · 0:50 elapsed · about 0:20 left" in statuses
    # everything but the last row scrolls; the status lines are drawn nowhere else
    assert f"\x1b[1;{ROWS - 1}r" in run.text
    assert not re.search(r"cells \d+/\d+ ·", STATUS_DRAW.sub("", run.text))
    run.job("all", 0)
    # the finished run gives the last row back, then prints its final line
    assert run.text.endswith(f"\x1b7\x1b[{ROWS};1H\x1b[2K\x1b[r\x1b8cells 6/6 measured in 1:00\n")
    run.reporter.close()  # Snakemake closes its handlers more than once
    assert run.text.count("measured in") == 1


def test_a_status_line_wider_than_the_terminal_is_cut_to_fit():
    written: list[str] = []
    display = TerminalDisplay(written.append, lambda: os.terminal_size((20, ROWS)))
    display.show("cells 100/254 · jobs 120/330 · 0:42 elapsed")
    # one column short: a character in the last column would wrap and scroll the screen
    assert STATUS_DRAW.findall("".join(written)) == ["cells 100/254 · job"]


def test_a_resized_terminal_moves_the_status_line_to_its_new_last_row():
    written: list[str] = []
    size = [os.terminal_size((COLUMNS, ROWS))]
    display = TerminalDisplay(written.append, lambda: size[0])
    display.show("cells 1/4")
    size[0] = os.terminal_size((COLUMNS, 30))
    display.show("cells 2/4")
    text = "".join(written)
    assert "\x1b[1;23r" in text and "\x1b[1;29r" in text and text.endswith("\x1b7\x1b[30;1H\x1b[2Kcells 2/4\x1b8")


def test_a_run_prints_none_of_snakemakes_notes_but_its_outcome():
    run = Run()
    for message in ("Config file config/config.yaml is extended by additional config specified via the command line.",
                    "Assuming unrestricted shared filesystem usage.", "Building DAG of jobs...",
                    "Using shell: /usr/bin/bash", "Conda environments: ignored"):
        run.reporter.handle(record(None, message))
    run.reporter.handle(record(LogEvent.WORKFLOW_STARTED, "Workflow has started!", workflow_id="x"))
    run.reporter.handle(record(LogEvent.RESOURCES_INFO, "Provided cores: 2", cores=2))
    assert run.text == ""
    run.plan(cell=1)
    for message in ("Select jobs to execute...", "Removing temporary output x.", "Elapsed time: 0:00:12.3"):
        run.reporter.handle(record(None, message))
    run.reporter.handle(record(None, "debug detail", logging.DEBUG))
    run.reporter.handle(record(None, "Complete log(s): /repo/.snakemake/log/x.snakemake.log"))
    assert run.text.splitlines() == ["plan: 1 jobs, 1 cells", "Complete log(s): /repo/.snakemake/log/x.snakemake.log"]


def test_a_command_that_runs_no_jobs_says_what_it_did():
    run = Run()
    run.reporter.handle(record(None, "Building DAG of jobs..."))
    run.reporter.handle(record(None, "Nothing to be done (all requested files are present and up to date)."))
    run.reporter.handle(record(None, "Report created: results/report.html."))
    lint = "Lints for rule cell (line 40, workflow/rules/cells.smk):\n" + "\n".join(f"    * lint {n}" for n in range(8))
    run.reporter.handle(record(None, lint, logging.WARNING))  # a lint is whole
    run.reporter.handle(record(None, "Congratulations, your workflow is in a good condition!"))
    run.reporter.close()
    assert run.text.splitlines() == ["Nothing to be done (all requested files are present and up to date).",
                                     "Report created: results/report.html.", *lint.splitlines(),
                                     "Congratulations, your workflow is in a good condition!"]


def test_a_failed_job_is_one_line_with_its_rule_and_log():
    run = Run()
    run.plan(cell=5, all=1)
    jobid = run.job("cell", 1)
    command = "Command 'set -euo pipefail; python -m convlab cell --spec '" + "x" * 3000 + "'' returned non-zero exit status 1."
    run.reporter.handle(record(LogEvent.ERROR, f"RuleException:\nCalledProcessError in file cells.smk, line 78:\n{command}",
                               logging.ERROR, exception="RuleException"))
    run.fail("cell", jobid)
    run.reporter.handle(record(None, "Exiting because a job execution failed. Look above for error messages",
                               logging.ERROR))
    run.reporter.handle(record(LogEvent.ERROR, "WorkflowError:\nAt least one job did not complete successfully.",
                               logging.ERROR, exception="WorkflowError"))
    run.reporter.close()
    assert run.text.splitlines() == [
        "plan: 6 jobs, 5 cells",
        f"error: rule cell failed; its log: logs/cell/{jobid}.log",
        "Exiting because a job execution failed. Look above for error messages",
        "stopped after 0:01: cells 1/5 measured, jobs 1/6 done, 1 failed",
    ]


def test_many_failed_jobs_are_never_a_wall():
    run = Run()
    run.plan(cell=40, all=1)
    for jobid in range(40):
        run.fail("cell", jobid)
    lines = run.text.splitlines()
    assert lines[1:] == [f"error: rule cell failed; its log: logs/cell/{jobid}.log" for jobid in range(3)] + [
        "error: more jobs failed; the complete log lists them all"]


def test_a_failed_group_of_jobs_on_a_cluster_is_a_few_lines():
    run = Run()
    run.plan(cell=32, all=1)
    run.reporter.handle(record(LogEvent.GROUP_ERROR, "Error in group cells", logging.ERROR, groupid="cells-1",
                               aux_logs=[".snakemake/slurm_logs/group_cells/123.log"], job_error_info=[]))
    for jobid in range(32):
        run.fail("cell", jobid)
    assert run.text.splitlines()[1:] == [
        "error: group job cells-1 failed; its log: .snakemake/slurm_logs/group_cells/123.log",
        *(f"error: rule cell failed; its log: logs/cell/{jobid}.log" for jobid in range(3)),
        "error: more jobs failed; the complete log lists them all"]


def test_a_long_snakemake_error_is_cut_to_a_few_lines():
    run = Run()
    message = "MissingInputException in rule all in file Snakefile, line 23:\n" + "\n".join(
        f"    data/input_{n}.png " + "y" * 300 for n in range(30))
    run.reporter.handle(record(LogEvent.ERROR, message, logging.ERROR, exception="MissingInputException"))
    lines = run.text.splitlines()
    assert lines[0] == "MissingInputException in rule all in file Snakefile, line 23:"
    assert len(lines) == MESSAGE_LINES + 1 and lines[-1] == "  (27 more lines in the complete log)"
    assert all(len(line) <= LINE_CHARS for line in lines) and lines[1].endswith("…")


def test_a_long_error_before_the_complete_log_exists_is_whole():
    """Snakemake reads the command line before it opens its complete log: nothing would hold the rest."""
    run = Run(complete_log=None)
    message = "WorkflowError:\n" + "\n".join(f"line {n}" for n in range(8))
    run.reporter.handle(record(LogEvent.ERROR, message, logging.ERROR, exception="WorkflowError"))
    assert run.text.splitlines() == [f"line {n}" for n in range(8)]


# What Snakemake logs for an exception outside any rule (here a bad --config) before it reads the Snakefile.
TRACEBACK = """Traceback (most recent call last):

  File "/venv/lib/python3.11/site-packages/snakemake/common/__init__.py", line 79, in parse_key_value_arg
    key, val = arg.split("=", 1)
    ^^^^^^^^

ValueError: not enough values to unpack (expected 2, got 1)

During handling of the above exception, another exception occurred:

Traceback (most recent call last):

  File "/venv/lib/python3.11/site-packages/snakemake/cli.py", line 2167, in args_to_api
    config=parse_config(args.config),

ValueError: Invalid config definition: Config entries have to be defined as name=value pairs. (Unparsable value: 'foo')
"""
CAUSE = ("error: ValueError: Invalid config definition: Config entries have to be defined as name=value pairs. "
         "(Unparsable value: 'foo')")


def test_a_traceback_is_one_line_naming_its_cause_and_where_the_traceback_is():
    run = Run()
    run.reporter.handle(record(LogEvent.ERROR, TRACEBACK, logging.ERROR, exception="ValueError"))
    assert run.text.splitlines() == [f"{CAUSE} (its traceback: {COMPLETE_LOG})"]
    assert run.kept == []


def test_a_traceback_before_the_complete_log_is_kept_in_a_file_of_its_own():
    run = Run(complete_log=None)
    run.reporter.handle(record(None, TRACEBACK, logging.ERROR))
    assert run.text.splitlines() == [f"{CAUSE} (its traceback: /repo/.snakemake/log/x.traceback.log)"]
    assert run.kept == [TRACEBACK]


def test_a_traceback_nothing_can_keep_follows_its_cause_whole():
    run = Run(complete_log=None, keeps=False)
    run.reporter.handle(record(LogEvent.ERROR, TRACEBACK, logging.ERROR, exception="ValueError"))
    assert run.text.splitlines() == [CAUSE, *TRACEBACK.rstrip().splitlines()]


def test_the_plugin_finds_snakemakes_complete_log_and_keeps_a_traceback_beside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert plugin.complete_log() is None
    kept = plugin.keep_traceback(TRACEBACK)
    assert kept and Path(kept).parent == Path(".snakemake/log") and Path(kept).read_text() == TRACEBACK
    snakemake_logger = logging.getLogger(plugin.SNAKEMAKE_LOGGER)
    complete = logging.FileHandler(tmp_path / "complete.log", delay=True)
    snakemake_logger.addHandler(complete)
    try:
        assert plugin.complete_log() == str(tmp_path / "complete.log")
    finally:
        snakemake_logger.removeHandler(complete)


def test_quiet_progress_prints_errors_only():
    run = Run(show_progress=False)
    run.plan(cell=2, all=1)
    jobid = run.job("cell", 1)
    run.fail("cell", jobid)
    run.reporter.close()
    assert run.text.splitlines() == [f"error: rule cell failed; its log: logs/cell/{jobid}.log"]


def handler(**settings: object) -> LogHandler:
    common = SimpleNamespace(**{"printshellcmds": False, "nocolor": False, "quiet": None, "debug_dag": False,
                                "verbose": False, "show_failed_logs": False, "stdout": False, "dryrun": False,
                                **settings})
    return LogHandler(common, None)


def test_a_dry_run_leaves_the_output_to_snakemakes_own_logger():
    dry = handler(dryrun=True)
    assert not dry.writes_to_stream  # Snakemake then adds its default stream handler
    dry.emit(record(LogEvent.RUN_INFO, "Job stats:", stats={"cell": 1, "total": 1}))
    dry.close()
    real = handler()
    assert real.writes_to_stream and not real.writes_to_file and real.has_filter and real.has_formatter
    real.close()


def test_the_installed_plugin_is_this_source():
    """Snakemake runs the copy pip installed from workflow/logger/ (envs/requirements.txt): an
    edit to the source needs that install again."""
    # not the build's metadata that pip leaves beside the source
    elsewhere = [entry for entry in sys.path if Path(entry or ".").resolve() != PLUGIN_SOURCE]
    found = list(metadata.distributions(name="snakemake-logger-plugin-convlab", path=elsewhere))
    if not found:
        pytest.fail("the logger plugin is not installed: pip install -r envs/requirements.txt")
    installed = found[0]
    sources = sorted((PLUGIN_SOURCE / "snakemake_logger_plugin_convlab").glob("*.py"))
    copies = {Path(file).name: Path(installed.locate_file(file)) for file in installed.files or []
              if str(file).startswith("snakemake_logger_plugin_convlab/") and str(file).endswith(".py")}
    assert sorted(copies) == [path.name for path in sources]
    stale = [path.name for path in sources if not filecmp.cmp(path, copies[path.name], shallow=False)]
    assert not stale, f"installed copy differs in {stale}: pip install -r envs/requirements.txt"


def test_snakemake_finds_the_plugin_by_its_name():
    # a fresh interpreter, so that the source folder this test module put on sys.path does not count
    result = subprocess.run([sys.executable, "-c", "from snakemake_interface_logger_plugins.registry import "
                             "LoggerPluginRegistry; print(LoggerPluginRegistry().get_plugin('convlab').name)"],
                            cwd=REPO / "tests", capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "convlab", result.stderr

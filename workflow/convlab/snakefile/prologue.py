"""The run's prologue: every check and repair before Snakemake builds the DAG, in one ordered
function, each step a function of its own that a test calls in-process.

Only the run the user started runs it (jobs that Snakemake starts on cluster nodes read the
Snakefile again and must neither speak nor move files), and a dry run only says what the real run
will do. Each step returns the lines it prints; a step that must stop the run raises RunRefused with
its one line.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from convlab import __version__
from convlab.history.store import database_path
from convlab.machinefaults import machine_fault
from convlab.pictures.source import check_source_image, source_disagrees
from convlab.plan.cpusources import cpu_source_note, sources_edited_since_recorded
from convlab.snakefile.damaged import move_damaged_rows, moved_lines
from convlab.snakefile.database import check_results_database, rows_of_edited_kernels
from convlab.snakefile.freshness import (
    date_now,
    dated_after,
    files_dated_ahead,
    remove_rows_of_edited_kernels,
    remove_rows_of_other_code,
    remove_rows_of_other_settings,
    remove_stale,
    rows_of_other_code,
    rows_of_other_settings,
    stale_summaries,
)
from convlab.snakefile.jobenvironment import FALLBACK_LOCALE, missing_locale
from convlab.snakefile.picturecontent import check_pictures
from convlab.snakefile.rowbytes import ROW_BYTES
from convlab.snakefile.runlock import follows_clean_run, live_run_line, mark_report_stage, release_stale_lock
from convlab.snakefile.runplan import RunPlan
from convlab.status import UserError


class RunRefused(UserError):
    """The run must not start; the message is its one line (already an `error:` line or a full
    sentence of its own)."""


def no_live_run(plan: RunPlan, dry_run: bool) -> list[str]:
    """A second run beside a live one stops here, before it moves or prints anything, with the line
    that names the live run (Snakemake's own refusal advises --unlock). A dry run writes nothing and
    may look on."""
    beside = None if dry_run else live_run_line()
    if beside:
        raise RunRefused(beside)
    return []


def backend_line(plan: RunPlan, dry_run: bool) -> list[str]:
    """The run's first line: which backend measures, on what, why, and where the results go."""
    return [f"{plan.choice.line}; {plan.device_line}"]


def installed_locale(plan: RunPlan, dry_run: bool) -> list[str]:
    """A locale that is not installed here is said once, and the jobs run under an installed one
    (convlab.snakefile.jobenvironment), instead of each job's shell warning of it."""
    missing = missing_locale()
    if not missing:
        return []
    return [f"warning: the locale {missing} is not installed here: the run's jobs use {FALLBACK_LOCALE} instead "
            f"(install it, or set LC_ALL={FALLBACK_LOCALE})"]


def writable_results(plan: RunPlan, dry_run: bool) -> list[str]:
    """A run writes under results/: where it cannot (a read-only file system, no permission), it stops
    here with the folder and the fix, before Snakemake's own refusal of write-protected outputs or a
    job's traceback. Tried by writing, as the run would: root passes any permission check, not a
    read-only mount. A dry run writes nothing and tries nothing."""
    if dry_run:
        return []
    folders = [Path("results")]
    for label in plan.devices:
        folders += [Path(f"results/{label}")]
        if folders[-1].is_dir():
            folders += sorted(path for path in folders[-1].iterdir() if path.is_dir())
    for folder in folders:
        if not folder.is_dir():
            continue
        try:
            handle, probe = tempfile.mkstemp(prefix=".convlab-write-", dir=folder)
            os.close(handle)
            os.unlink(probe)
        except OSError as error:
            line = machine_fault(error.errno or 0, str(folder))
            raise RunRefused(line or f"error: {folder} cannot be written ({error.strerror}): make it writable") from error
    return []


def source_picture(plan: RunPlan, dry_run: bool) -> list[str]:
    """The user's picture is checked first: an unusable one stops the run with its one line, before
    anything made from the old one is removed (the refusal is kept in the source rule's log as if its
    job had run, except by a dry run). Then the source picture knows what it was made from (its record,
    data/source_<size>.json): one the config no longer asks for is removed with the pictures
    downscaled from it, which are targets, so that this run makes them again."""
    size = plan.config["source_size"]
    user_image = plan.config["source_image"]
    source = Path(f"data/source_{size}.png")
    if user_image:
        try:
            check_source_image(user_image, source.with_suffix(".json"))
        except UserError as error:
            if not dry_run:
                log = Path(f"results/logs/data/source_{size}.log")
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(f"error: {error}\n")
            raise RunRefused(f"error: {error}") from error
    differs = source_disagrees(user_image, source)
    if not differs:
        return []
    if not dry_run:
        for made in [source, *Path("data").glob("input_*.png")]:
            made.unlink(missing_ok=True)
    what = "a real run makes it again" if dry_run else "removed with its downscaled copies, and made again"
    return [f"{source}: {differs}; {what}"]


def damaged_rows(plan: RunPlan, dry_run: bool) -> list[str]:
    """A damaged row is moved aside, so that this run measures its cell again."""
    lines = []
    for label, paths in plan.cell_paths.items():
        lines += moved_lines(move_damaged_rows(paths, f"results/{label}", dry_run), f"results/{label}")
    return lines


def rows_of_changed_settings(plan: RunPlan, dry_run: bool) -> list[str]:
    """A row knows the settings it was measured with: one of other settings is measured again,
    whether or not Snakemake's records of the params survive (unless the run turned the params trigger
    off)."""
    if not plan.params_decide:
        return []
    others = rows_of_other_settings((cell.path, cell.spec_hash) for cell in plan.cells)
    return remove_rows_of_other_settings(others, dry_run)


def rows_of_changed_code(plan: RunPlan, dry_run: bool) -> list[str]:
    """A row knows the code that measured it: one of another convlab or another measurement code is
    measured again, whatever Snakemake's records say (unless the run turned the params trigger off:
    the code's hash is a param)."""
    if not plan.params_decide:
        return []
    others = rows_of_other_code((cell.path for cell in plan.cells), plan.code["measurement"], __version__)
    return remove_rows_of_other_code(others, dry_run)


def results_database(plan: RunPlan, dry_run: bool) -> list[str]:
    """Every run checks each label's results database, one with nothing to do too."""
    lines = []
    for label in plan.devices:
        cells = [cell for cell in plan.cells if cell.device == label]
        lines += check_results_database(f"results/{label}", cells, plan.policy.threshold, dry_run)
    return lines


def rows_of_edited_kernel_files(plan: RunPlan, dry_run: bool) -> list[str]:
    """A row's measurement is kept with the hash of the kernel files it ran: one of other files than
    those on disk now is measured again, whatever the files' times say (a row dated ahead by another
    clock, or copied, would hide every later edit from Snakemake)."""
    lines = []
    for label in plan.devices:
        rows = {cell.path: plan.kernel_hash(cell.kernel, cell.backend) for cell in plan.cells if cell.device == label}
        rows = {path: wanted for path, wanted in rows.items() if wanted}
        edited = rows_of_edited_kernels(rows, database_path(f"results/{label}"), untouched=dry_run)
        by_path = {cell.path: cell for cell in plan.cells}
        hidden = [row for row in edited if dated_after(row, plan.files_of(by_path[row].kernel, by_path[row].backend))]
        lines += remove_rows_of_edited_kernels(edited, hidden, dry_run)
    return lines


def pictures_by_content(plan: RunPlan, dry_run: bool) -> list[str]:
    """A picture's rows stand by its content, not its file's time: a missing picture that rows were
    measured on is made again now (the same picture keeps them), and a row measured on another
    picture than the one on disk is measured again (convlab.snakefile.picturecontent)."""
    user_image = plan.config["source_image"] or None
    return check_pictures(plan.cells, plan.source_image, plan.source_size, user_image, dry_run)


def files_from_the_future(plan: RunPlan, dry_run: bool) -> list[str]:
    """Files of the results and the pictures dated ahead of this host's clock are dated now, once
    the rows among them were checked by their content (rows_of_edited_kernel_files): Snakemake
    would otherwise find every summary made now older than its rows and stop the run."""
    now = time.time()
    folders = [Path(f"results/{label}") for label in plan.devices] + [Path("data")]
    rows = [path for paths in plan.cell_paths.values() for path in paths]
    return date_now(files_dated_ahead([folder for folder in folders if folder.is_dir()], now, rows), now, dry_run)


def stale_summary_files(plan: RunPlan, dry_run: bool) -> list[str]:
    """A slice or a summary that no longer holds the rows it stands for (put back from a copy,
    edited) is removed, with the summary made from it: both are targets, so this run makes them
    again. Snakemake trusts their times and its own records."""
    lines = []
    for label in plan.devices:
        stale = stale_summaries(f"results/{label}", plan.family_cell_paths[label])
        lines += remove_stale(stale, Path(f"results/{label}/summary.csv"), dry_run)
    return lines


def cpu_sources(plan: RunPlan, dry_run: bool) -> list[str]:
    """On the cpu backend, a .cu edited since its cpu rows were recorded is said once: the cpu backend
    never runs it."""
    if plan.backend != "cpu":
        return []
    lines = []
    for label in plan.devices:
        edited = sources_edited_since_recorded(f"results/{label}", plan.cells, plan.kernels)
        if edited:
            lines.append(cpu_source_note(edited))
    return lines


def stale_lock(plan: RunPlan, dry_run: bool) -> list[str]:
    """A run killed with SIGKILL leaves Snakemake's lock behind; the next run removes it (never a
    live run's)."""
    released = release_stale_lock(dry_run=dry_run)
    return [released] if released else []


def report_stage_mark(plan: RunPlan, dry_run: bool) -> list[str]:
    """Two inputs only order jobs, as ancient() files (the report's drawing after the verdict, a
    family's slice after every cell); Snakemake never checks on its own merits a job below such an
    input, so an output a stopped run left older than its inputs would stay so. A run that does not
    follow one that ended cleanly (or start from nothing) makes the whole report stage again: the
    slices take REDRAWN, which is made again whenever REPORT_SUSPECT is newer. A dry run only makes
    sure the mark exists: run beside a live run (which has forgotten its predecessor's clean end),
    it would otherwise mark the stage suspect and the next run would draw it all again."""
    suspect = not dry_run and not follows_clean_run(os.path.exists(plan.redrawn))
    mark_report_stage(Path(plan.report_suspect), suspect=suspect)
    return []


# In order: nothing is removed before what would replace it is checked, and the rows before the
# summaries made from them.
STEPS: tuple[Callable[[RunPlan, bool], list[str]], ...] = (
    no_live_run, backend_line, installed_locale, writable_results, source_picture, damaged_rows, rows_of_changed_settings, rows_of_changed_code,
    results_database, pictures_by_content, rows_of_edited_kernel_files, files_from_the_future,
    stale_summary_files, cpu_sources, stale_lock, report_stage_mark)


def prologue(plan: RunPlan, dry_run: bool, say: Callable[[str], None]) -> None:
    """Every step in order, each step's lines said as it ends. RunRefused where the run must stop.
    Several steps read every cell row: each is read once (convlab.snakefile.rowbytes)."""
    with ROW_BYTES.reading_once():
        for step in STEPS:
            for line in step(plan, dry_run):
                say(line)

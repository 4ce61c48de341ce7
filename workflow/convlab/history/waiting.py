"""Rows that wait in results/<device>/unrecorded/ for the results database, and why they wait: the
record step notes why it could not add them (a read-only or locked database), and `convlab
history` says how many wait and why (standard library only)."""

from __future__ import annotations

from pathlib import Path

from convlab.atomicfile import write_text_atomically
from convlab.measure.rowjournal import FOLDER, unrecorded_rows

# Beside the runs' folders in unrecorded/: the last reason a record step could not add them.
REASON = "reason.txt"


def note_reason(results_dir: str | Path, why: str) -> None:
    """Keep why the rows that wait could not be added, for `convlab history`."""
    write_text_atomically(Path(results_dir) / FOLDER / REASON, why.strip() + "\n")


def clear_reason(results_dir: str | Path) -> None:
    """The rows were added: no reason to keep."""
    (Path(results_dir) / FOLDER / REASON).unlink(missing_ok=True)


def waiting_line(results_dir: str | Path) -> str | None:
    """How many rows wait in results_dir/unrecorded/, of which runs, and why; None when none."""
    rows = unrecorded_rows(results_dir)
    if not rows:
        return None
    runs = sorted({row.run_id for row in rows})
    folder = Path(results_dir) / FOLDER
    try:
        why = f"the last run that tried could not add them: {(folder / REASON).read_text().strip()}"
    except OSError:
        why = "no record step has added them yet (the run that measured them stopped before it recorded)"
    return (f"{len(rows)} rows wait in {folder}/ for the database (run {', '.join(runs)}): {why}; the next run "
            "that can write it adds them, a plain `snakemake --cores 1` too")

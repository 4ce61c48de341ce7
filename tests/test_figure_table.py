"""The figure table (convlab.report.figuretable) is the one place a file of the `figures` rule is spelled: the
rule's outputs and report entries, the `figures` command and these tests read it, so a new figure is one entry,
its draw function and its caption."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
from workflow_helpers import RESULTS, copy_repo, job_listing, report_tree, snakemake

from convlab.measure.row import COLUMNS
from convlab.report.familydisplay import SIZE_FIGURE_FAMILY
from convlab.report.figuretable import BACKEND, EVERY_ROW, SIZE_FAMILY, SUMMARY, TABLE

REPO = Path(__file__).resolve().parents[1]

EXTRA_DRAWING = '''
from convlab.report.plotting import note_figure


def draw(rows, path):
    return note_figure(path, "An extra figure", f"{len(rows)} rows")
'''
EXTRA_ENTRY = '''
TABLE = (*TABLE, ReportFigure("extra", "extra.png", EVERY_ROW, "convlab.report.extra_figure:draw", "extra.rst",
                              {"figure": "an extra figure", "backend": BACKEND}))
'''
EXTRA_CAPTION = "An extra figure, to see that one entry of the figure table is all a figure needs.\n"


def figure_priorities(listing: str) -> dict[str, int]:
    """Each figures job's file and its priority, from Snakemake's job blocks (a block shows a priority other
    than 0 only)."""
    blocks = re.split(r"\n(?=(?:local)?rule \w+:)", listing)
    found = {}
    for block in blocks:
        if re.match(r"(?:local)?rule figures:", block):
            file = re.search(rf"output: {re.escape(RESULTS)}/figures/(\S+)", block).group(1)
            priority = re.search(r"priority: (\d+)", block)
            found[file] = int(priority.group(1)) if priority else 0
    return found


def test_every_entry_has_a_file_a_draw_function_and_a_caption_of_its_own():
    assert len({entry.name for entry in TABLE}) == len({entry.file for entry in TABLE}) == len(TABLE)
    for entry in TABLE:
        module, function = entry.draw.split(":")
        assert callable(getattr(importlib.import_module(module), function)), entry.draw
        assert (REPO / "workflow/report" / entry.caption).is_file(), entry.caption
        assert entry.reads in (SIZE_FAMILY, EVERY_ROW)


def test_the_rules_file_each_entry_as_its_table_says(tmp_path):
    """The report tree of the tiny config: each figure under its category, subcategory and labels, with its
    caption file's text."""
    tree = report_tree(copy_repo(tmp_path / "repo"))
    for entry in TABLE:
        filed = tree[f"{RESULTS}/figures/{entry.file}"]
        category = SIZE_FIGURE_FAMILY.name if entry.category == SIZE_FAMILY else entry.category
        labels = {key: value.replace(BACKEND, "cpu") for key, value in entry.labels.items()}
        assert filed == {"category": category, "subcategory": entry.subcategory, "labels": labels,
                         "caption": (REPO / "workflow/report" / entry.caption).read_text()}, entry.name
    assert tree[f"{RESULTS}/figures/status_table.html"]["category"] == SUMMARY


def test_a_new_entry_is_planned_filed_and_drawn(tmp_path):
    """One entry (with its draw function and caption) and nothing else: the DAG plans its job, the report files
    it, and the `figures` command draws it."""
    repo = copy_repo(tmp_path / "repo")
    (repo / "workflow/convlab/report/extra_figure.py").write_text(EXTRA_DRAWING)
    (repo / "workflow/report/extra.rst").write_text(EXTRA_CAPTION)
    table = repo / "workflow/convlab/report/figuretable.py"
    text = table.read_text()
    cut = text.index("\nFIGURES: dict")
    table.write_text(text[:cut] + EXTRA_ENTRY + text[cut:])

    plan = snakemake(repo, 1, "--dry-run")
    assert f"output: {RESULTS}/figures/extra.png" in job_listing(plan)
    # the entries the table starts first have the figure jobs' priority; the new one, as most, has none
    priorities = figure_priorities(job_listing(plan))
    assert priorities == {entry.file: 1 if entry.first else 0 for entry in TABLE} | {"extra.png": 0}
    assert any(entry.first for entry in TABLE)
    assert report_tree(repo)[f"{RESULTS}/figures/extra.png"] == {
        "category": SIZE_FIGURE_FAMILY.name, "subcategory": "Figures",
        "labels": {"figure": "an extra figure", "backend": "cpu"}, "caption": EXTRA_CAPTION}

    pd.DataFrame(columns=COLUMNS).to_csv(tmp_path / "summary.csv", index=False)
    drawn = subprocess.run([sys.executable, "-m", "convlab", "figures", "--summary", str(tmp_path / "summary.csv"),
                            "--outdir", str(tmp_path / "figures"), "--figure", "extra"], cwd=repo,
                           env={**os.environ, "PYTHONPATH": str(repo / "workflow"), "CONVLAB_SERVICE": "off"},
                           capture_output=True, text=True, timeout=120)
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / "figures/extra.png").read_bytes()[:4] == b"\x89PNG"

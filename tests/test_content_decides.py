"""Outputs are checked by what they were made from, not by file times or Snakemake's metadata: a
summary slice put back from an old copy, a source picture the config no longer asks for after
.snakemake/ was lost, a .cu touched or reverted (tiny cpu run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from workflow_helpers import RESULTS, FinishedRun, copy_finished_run, planned_cells, snakemake, terminal_lines

from convlab.pictures.source import generate_source, generated_by, source_disagrees
from convlab.plan.cpusources import SOURCES_FILE
from convlab.snakefile.freshness import (
    cell_row_check,
    remove_stale,
    row_spec_hash,
    rows_of_other_settings,
    stale_summaries,
    table_row_checks,
)

FAMILY_SLICE = f"{RESULTS}/summary/conv2d.csv"


def family_rows(repo: Path, family: str = "conv2d") -> list[Path]:
    return sorted((repo / RESULTS / "cells" / "cpu" / family).rglob("*.csv"))


def slice_stands_for_its_cells(repo: Path) -> bool:
    return (sorted(table_row_checks(repo / FAMILY_SLICE) or [])
            == sorted(cell_row_check(path) for path in family_rows(repo)))


@pytest.mark.pipeline
def test_a_slice_put_back_from_an_old_copy_with_its_old_time_is_made_again(tiny_run: FinishedRun, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    old = tmp_path / "conv2d.csv"
    shutil.copy2(repo / FAMILY_SLICE, old)
    cell = family_rows(repo)[0].relative_to(repo)
    snakemake(repo, 2, "--forcerun", str(cell))
    assert slice_stands_for_its_cells(repo)
    shutil.copy2(old, repo / FAMILY_SLICE)  # `cp -p`: the old content with its old time
    assert not slice_stands_for_its_cells(repo)
    result = snakemake(repo, 2)
    lines = terminal_lines(result)
    assert any(line.startswith(f"{FAMILY_SLICE}: holds other rows than it is made from") for line in lines), lines
    assert slice_stands_for_its_cells(repo)
    summary = table_row_checks(repo / RESULTS / "summary.csv")
    assert set(table_row_checks(repo / FAMILY_SLICE)) <= set(summary)
    assert "Nothing to be done" in snakemake(repo, 2).stderr


@pytest.mark.pipeline
def test_a_source_picture_the_config_no_longer_asks_for_is_made_again_without_snakemakes_records(
        tiny_run: FinishedRun, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    picture = repo / "mine.png"
    cv2.imwrite(str(picture), np.random.default_rng(1).integers(0, 256, (300, 300, 3), dtype=np.uint8))
    snakemake(repo, 2, "--config", "source_image=mine.png")
    record = repo / "data" / "source_256.json"
    assert json.loads(record.read_text())["source_image"] == "mine.png"
    shutil.rmtree(repo / ".snakemake")  # Snakemake's record of the config is gone
    result = snakemake(repo, 2)  # back to the generated picture
    assert any(line.startswith("data/source_256.png: made from mine.png, but config source_image is null")
               for line in terminal_lines(result)), terminal_lines(result)
    assert json.loads(record.read_text())["source_image"] is None
    measured = planned_cells(result)
    assert measured and all("gemm" not in cell for cell in measured)  # the cells that read a picture
    assert "Nothing to be done" in snakemake(repo, 2).stderr


@pytest.mark.pipeline
def test_a_kernel_setting_changed_after_snakemakes_records_were_lost_re_measures_exactly_its_cells(
        tiny_run: FinishedRun, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    (repo / "config" / "setting.yaml").write_text("kernels:\n  cudnn:\n    workspace_limit_mb: 100\n")
    shutil.rmtree(repo / ".snakemake")  # Snakemake's record of every cell's params is gone
    result = snakemake(repo, 2, "--configfile", "config/tiny-cpu.yaml", "config/setting.yaml")
    measured = planned_cells(result)
    assert measured and all("kernel~cudnn" in cell for cell in measured), measured
    assert any(line.startswith(f"{len(measured)} rows were measured with other settings") for line in
               terminal_lines(result)), terminal_lines(result)
    again = snakemake(repo, 2, "--configfile", "config/tiny-cpu.yaml", "config/setting.yaml")
    assert "Nothing to be done" in again.stderr


@pytest.mark.pipeline
def test_a_cu_touched_or_reverted_is_no_edit_to_note_and_an_edit_is(tiny_run: FinishedRun, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    assert (repo / RESULTS / SOURCES_FILE).is_file()
    source = repo / "kernels" / "direct.cu"
    original = source.read_bytes()

    def notes() -> list[str]:
        return [line for line in terminal_lines(snakemake(repo, 2)) if line.startswith("note: kernels/")]

    source.touch()
    assert notes() == []
    source.write_bytes(original + b"\n// an edit\n")
    edited = notes()
    assert len(edited) == 1 and edited[0].startswith("note: kernels/direct.cu changed since the cpu rows"), edited
    source.write_bytes(original)  # reverted, with a new time
    assert notes() == []


@pytest.mark.pipeline
def test_pictures_made_again_keep_their_rows_and_another_picture_measures_its_cells_again(
        tiny_run: FinishedRun, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    rows = {path: path.read_bytes() for path in (repo / RESULTS / "cells").rglob("*.csv")}
    shutil.rmtree(repo / "data")
    dry = snakemake(repo, 1, "--dry-run")
    assert any(line.startswith("data/input_64.png is missing: a real run makes it again") for line in terminal_lines(dry))
    assert not (repo / "data").exists()  # a dry run makes nothing
    result = snakemake(repo, 2)
    lines = terminal_lines(result)
    assert any(line.startswith("data/input_64.png was missing: made again; the ") and line.endswith(" are kept")
               for line in lines), lines
    assert {path: path.read_bytes() for path in rows} == rows  # not one cell measured again
    assert "Nothing to be done" in snakemake(repo, 2).stderr
    picture = repo / "data" / "input_64.png"
    pixels = cv2.imread(str(picture))
    pixels[0, 0] = 255 - pixels[0, 0]
    cv2.imwrite(str(picture), pixels)  # another picture under the same name
    reading = {path for path in rows if "/size~64/" in str(path) and ("/conv2d/" in str(path) or "/tiling/" in str(path))}
    result = snakemake(repo, 2)
    assert any(line.startswith(f"data/input_64.png: {len(reading)} rows were measured on another picture")
               for line in terminal_lines(result)), terminal_lines(result)
    changed = {path for path in rows if path.read_bytes() != rows[path]}
    assert reading and reading <= changed


def test_stale_summaries_compare_the_row_checks_a_slice_holds_with_its_cells(tmp_path):
    results = tmp_path / "results"
    cells = []
    for index in range(3):
        row = results / "cells" / f"c{index}.csv"
        row.parent.mkdir(parents=True, exist_ok=True)
        row.write_text(f"kernel,kernel_ms,row_check\nk,1.0,check{index}\n")
        cells.append(str(row))
    (results / "summary").mkdir()

    def write_table(path: Path, checks: list[str]) -> None:
        path.write_text("kernel,row_check\n" + "".join(f"k,{check}\n" for check in checks))

    write_table(results / "summary" / "conv2d.csv", ["check0", "check1", "check2"])
    write_table(results / "summary.csv", ["check0", "check1", "check2"])
    assert stale_summaries(results, {"conv2d": cells}) == []
    write_table(results / "summary.csv", ["check0", "check1", "old"])
    assert [entry.path.name for entry in stale_summaries(results, {"conv2d": cells})] == ["summary.csv"]
    write_table(results / "summary" / "conv2d.csv", ["check0", "check1", "old"])
    stale = stale_summaries(results, {"conv2d": cells})
    assert [entry.path.name for entry in stale] == ["conv2d.csv"]
    assert remove_stale(stale, results / "summary.csv", dry_run=True)[1].endswith("a real run makes it again")
    assert (results / "summary" / "conv2d.csv").is_file()
    lines = remove_stale(stale, results / "summary.csv", dry_run=False)
    assert len(lines) == 2 and not (results / "summary.csv").exists()
    assert not (results / "summary" / "conv2d.csv").exists()
    # a cell whose row is missing is Snakemake's to measure; nothing is judged from it
    Path(cells[0]).unlink()
    assert stale_summaries(results, {"conv2d": cells}) == []


def test_a_row_records_the_settings_it_was_measured_with(tmp_path):
    from convlab.measure.row import failure_row, write_row_atomically
    from convlab.plan.cell import Cell

    cell = Cell(experiment="conv2d", backend="cpu", kernel="direct", size=64, stride=1, filter_size=3, padding=1,
                in_channels=3, out_channels=1, filter="laplacian", settings={"math": "strict"})
    row = tmp_path / "row.csv"
    write_row_atomically(failure_row(json.loads(cell.to_json()), "error", "a test row"), row)
    assert row_spec_hash(row) == cell.spec_hash
    changed = Cell(**{**json.loads(cell.to_json()), "settings": {"math": "tf32"}})
    assert rows_of_other_settings([(str(row), cell.spec_hash)]) == []
    assert rows_of_other_settings([(str(row), changed.spec_hash)]) == [row]
    assert rows_of_other_settings([(str(tmp_path / "missing.csv"), cell.spec_hash)]) == []


def test_a_source_picture_knows_what_it_was_made_from(tmp_path):
    image = tmp_path / "source_64.png"
    image.write_bytes(b"not looked at")
    record = {"source_image": None, "generated": generated_by(64), "size": 64, "conversions": [],
              "png_sha256": "0" * 64}
    (tmp_path / "source_64.json").write_text(json.dumps(record))
    assert "its content is not what" in source_disagrees(None, image)
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"a picture")
    assert "but config source_image is" in source_disagrees(mine, image)
    (tmp_path / "source_64.json").write_text("{")
    assert "cannot be read" in source_disagrees(None, image)
    assert source_disagrees(None, tmp_path / "missing.png") is None
    # a picture without its record (a failed render's leftover) cannot be checked: made again
    (tmp_path / "source_64.json").unlink()
    assert "it has no record" in source_disagrees(None, image)


def test_the_generated_source_records_its_own_content(tmp_path):
    out = tmp_path / "source_64.png"
    generate_source(out, 64)
    assert source_disagrees(None, out) is None
    out.write_bytes(out.read_bytes() + b"\0")
    assert "its content is not what" in source_disagrees(None, out)

"""The experiment families are a plug-in: what the grid, the gallery, the rules and the benchmark need of a
family is an attribute of convlab.plan.families.base.Family, what its cells compute on its entry in
convlab.plan.families.inputs, and what the report and the seed comparison need its entry in
convlab.report.familydisplay (keyed by the family's own name), so no family's name is spelled as a string
outside convlab/plan/families/ (its schemas and the config sections aside, which this does not read). The
exceptions below are listed one by one, each with its reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from convlab.plan.families import DEFAULT_FAMILY, FAMILIES, GALLERY_FAMILY
from convlab.plan.families.inputs import OPERANDS
from convlab.report.familydisplay import DISPLAYS, SIZE_FIGURE_FAMILY, display, seed_family
from convlab.report.seeds import SEEDS, figure_stems

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "workflow" / "convlab"
FAMILIES_DIR = PACKAGE / "plan" / "families"

# (file, family name): why that file spells it. Each must still occur, so that a stale entry is dropped.
ALLOWED = {
    ("workflow/convlab/report/seeds.py", "tiling"):
        "seed 002's figure is named so: its file is seeds/seed002_tiling.png, which must not change",
    ("workflow/convlab/report/seeds.py", "gemm"):
        "seed 003's figure is named so: its file is seeds/seed003_gemm.png, which must not change",
}


def _sources() -> list[Path]:
    python = [path for path in PACKAGE.rglob("*.py") if FAMILIES_DIR not in path.parents]
    return sorted([*python, *(REPO / "workflow" / "rules").glob("*.smk"), REPO / "Snakefile"])


def _spelled(text: str) -> list[tuple[int, str]]:
    """(line, name) of every family name written as a whole quoted string."""
    names = "|".join(re.escape(name) for name in FAMILIES)
    return [(text.count("\n", 0, match.start()) + 1, match.group(2))
            for match in re.finditer(rf"([\"'])({names})\1", text)]


def test_no_family_name_is_spelled_outside_the_families():
    found = {}
    for path in _sources():
        where = path.relative_to(REPO).as_posix()
        for line, name in _spelled(path.read_text()):
            found.setdefault((where, name), []).append(line)
    unexplained = {key: lines for key, lines in found.items() if key not in ALLOWED}
    assert unexplained == {}, "ask the family (convlab.plan.families) instead of naming it"
    assert sorted(set(ALLOWED) - set(found)) == [], "an exception that no longer occurs: drop it"


def test_the_check_sees_a_quoted_name_and_only_a_whole_one():
    assert _spelled('x == "conv2d"\ny = \'gemm\'') == [(1, "conv2d"), (2, "gemm")]
    assert _spelled('"gemm_m", "conv2d.sizes", f"{name}", conv2d') == []


def test_the_seed_figure_files_keep_their_names():
    """The two exceptions above are file names: the seed figures are still written under them."""
    assert {"seed002_tiling", "seed003_gemm"} <= set(figure_stems())


def test_every_seed_is_reproduced_by_exactly_one_family():
    claims = [seed for entry in DISPLAYS.values() for seed in entry.seeds]
    assert sorted(claims) == sorted(SEEDS), "each seed of convlab.report.seeds is claimed once"
    for seed in SEEDS:
        assert seed in display(seed_family(seed).name).seeds
    with pytest.raises(KeyError, match="no family reproduces seed 999"):
        seed_family("999")


def test_the_roles_one_family_plays_are_that_familys():
    assert DEFAULT_FAMILY in FAMILIES
    assert [name for name, family in FAMILIES.items() if family.gallery] == [GALLERY_FAMILY.name]
    assert [name for name, entry in DISPLAYS.items() if entry.size_figures] == [SIZE_FIGURE_FAMILY.name]
    for family in FAMILIES.values():
        assert set(dict(display(family.name).headline_order)) <= set(family.problem_columns), family.name


def test_every_family_has_its_operands_and_its_entry_in_the_report():
    assert list(OPERANDS) == list(FAMILIES)
    assert list(DISPLAYS) == list(FAMILIES), "in the families' order, which the report keeps"

"""The README and docs/*.md stay true: the README is a short front door with the two commands CI
and users run, every relative link resolves inside the repository, no commit hash is quoted, and
every count of cells written in the text is the one the code computes from the config files."""

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from convlab.backends.sharedcount import HOPPER_OPTIN_BYTES, large_shared_cells
from convlab.plan.config import load_config, validate_config
from convlab.plan.grid import build_cells

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAX_README_LINES = 150
RUN_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install -r envs/requirements.txt "
               "&& snakemake --cores 1")
TEST_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install -r envs/requirements-test.txt "
                "&& python -m pytest")
SLURM_SECTION = "## Run on a Slurm cluster"
CHANGE_SECTION = "## To change X, edit Y"
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
# words that put a hex token in a commit's place: "commit 1a2b3c4", "at 1a2b3c4", "(rev 1a2b3c4)"
COMMIT_WORDS = re.compile(r"(?i)\b(commits?|at|rev|revision|sha|hash|head|checkout|since|before|after|"
                          r"measured|built|version)\W{1,4}$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
COUNT = re.compile(r"\b(\d[\d,]*)\s+(?:[A-Za-z]+\s+){0,3}?(?:cells|jobs)\b")


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def section(text: str, heading: str) -> str:
    assert f"\n{heading}\n" in text, f"no '{heading}' section"
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    heading = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.M)}


# -- the README -------------------------------------------------------------------------------
def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES})"


def test_readme_commands_are_verbatim():
    lines = [line.strip() for line in README.read_text(encoding="utf-8").splitlines()]
    for command in (RUN_COMMAND, TEST_COMMAND):
        assert command in lines, f"README.md lost the command, verbatim on a line of its own: {command}"


def test_ci_runs_the_readme_test_command():
    assert TEST_COMMAND in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_one_dependency_list_whose_every_package_the_constraints_file_pins():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=!\[ ;]", requirement)[0] for requirement in project["dependencies"]]
    pins = {re.sub(r"[-_.]+", "-", line.partition("==")[0]).lower()
            for line in (REPO / "envs" / "constraints.txt").read_text().splitlines() if "==" in line}
    assert {re.sub(r"[-_.]+", "-", name).lower() for name in names} <= pins
    requirements = (REPO / "envs" / "requirements.txt").read_text().splitlines()
    assert "-c constraints.txt" in requirements and "-e ." in requirements
    # convlab's own dependencies are listed once, in pyproject.toml
    assert not [line for line in requirements if re.split(r"[<>=!\[ ;]", line)[0] in names]
    for variant in ("requirements-test.txt", "requirements-cuda12.txt", "requirements-cuda13.txt"):
        assert "-r requirements.txt" in (REPO / "envs" / variant).read_text().splitlines(), variant


def test_a_licence_and_a_citation_that_agree_with_the_package():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["title"] and citation["authors"]
    assert citation["version"] == project["version"] and citation["license"] == project["license"] == "MIT"
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    assert "LICENSE" in (REPO / "README.md").read_text() and "CITATION.cff" in (REPO / "README.md").read_text()


def test_the_workflow_catalogs_layout():
    standard = (REPO / "workflow" / "Snakefile").read_text()
    assert 'include: "../Snakefile"' in standard and "default_target: True" in standard
    catalog = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert catalog["mandatory-flags"]["flags"] and catalog["report"] is True
    assert catalog["software-stack-deployment"]["conda"] is True
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    described = (REPO / "config" / "README.md").read_text()
    families = {path.name.removesuffix(".schema.yaml") for path in (REPO / "workflow" / "schemas" / "families").glob("*.yaml")}
    assert [key for key in [*schema["properties"], *families] if f"`{key}`" not in described] == []


def test_readme_figure_names_gpu_and_year():
    text = README.read_text(encoding="utf-8")
    figure = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)\n\n(.+?)\n\n", text, flags=re.S)
    assert figure, "README.md has no figure with a caption below it"
    assert (REPO / figure.group(1)).is_file(), figure.group(1)
    assert re.search(r"NVIDIA [A-Z]\d+[^,]*, 20\d\d\b", figure.group(2)), \
        f"the figure's caption names no GPU and year ('NVIDIA H200, 2026'): {figure.group(2)!r}"


def test_change_table_paths_exist():
    table = section(README.read_text(encoding="utf-8"), CHANGE_SECTION)
    rows = [line for line in table.splitlines() if line.startswith("|") and "---" not in line][1:]
    assert rows, "the change table has no rows"
    checked = 0
    for row in rows:
        where = row.strip("|").split("|")[1]
        for token in re.findall(r"`([^`\s]+)`", where):
            if "/" not in token and not re.search(r"\.(ya?ml|md|py|cu|txt|smk|rst)$", token):
                continue
            pattern = re.sub(r"<[^>]+>", "*", token)
            assert list(REPO.glob(pattern)), f"README change table: {token} matches nothing"
            checked += 1
    assert checked >= 10, checked


# -- links and hashes, README and docs --------------------------------------------------------
@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_resolve_inside_the_repository(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(REPO), f"{rel(page)}: {target} points outside the repository"
        assert resolved.exists(), f"{rel(page)}: {target} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{rel(page)}: {target}: no heading '#{anchor}'"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_paths_outside_the_repository(page):
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text, f"{rel(page)} names ../shared"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_commit_hashes(page):
    text = page.read_text(encoding="utf-8")
    for match in HEX.finditer(text):
        token = match.group(0)
        if not re.search(r"\d", token):
            continue  # a word spelt in a-f only
        before = text[max(0, match.start() - 20):match.start()]
        assert not COMMIT_WORDS.search(before), f"{rel(page)}: '{before}{token}' quotes a commit"
        assert not is_commit(token), f"{rel(page)}: {token} is a commit of this repository"


def is_commit(token: str) -> bool:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return False
    result = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{token}^{{commit}}"], cwd=REPO,
                            capture_output=True, text=True)
    return result.returncode == 0


# -- the Slurm commands: tests/test_slurm.py runs the README's, docs/slurm.md repeats them -------
def slurm_commands(text: str) -> tuple[list[str], list[str]]:
    commands = [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)
                for line in block.splitlines() if line.strip().startswith(("snakemake ", "pip "))]
    flags = re.findall(r"without `slurmdbd`[^.]*?\badd\s+`([^`]+)`", text)
    return commands, flags


def test_slurm_page_repeats_the_readme_commands():
    readme = slurm_commands(section(README.read_text(encoding="utf-8"), SLURM_SECTION))
    # the page's opening section repeats the README's; later sections have commands of their own
    page = slurm_commands((REPO / "docs" / "slurm.md").read_text(encoding="utf-8").split("\n## ", 1)[0])
    assert len(readme[0]) == 2 and len(readme[1]) == 1, readme
    assert readme == page, f"README {readme} != docs/slurm.md {page}"


def test_slurm_numbers_are_the_profile():
    profile = yaml.safe_load((REPO / "workflow" / "profiles" / "slurm" / "profile.yaml").read_text())
    jobs = profile["jobs"]
    sizes = dict(group.split("=") for group in profile["group-components"])
    assert set(sizes) == {"cells", "cells_{device}"} and len(set(sizes.values())) == 1, sizes
    cells = int(sizes["cells"])
    runtime = profile["set-resources"]["cell"]["runtime"]
    mem = profile["set-resources"]["cell"]["mem_mb"]
    page = re.sub(r"\s+", " ", (REPO / "docs" / "slurm.md").read_text(encoding="utf-8"))
    for text in (f"`jobs: {jobs}`", f"at most {jobs} submissions", f"`group-components: cells={cells}`",
                 f"{cells} × {runtime} = {cells * runtime} min", f"({runtime} min each)", f"{mem} MB",
                 f"of its {cells} cells, {cells} CPUs"):
        assert text in page, f"docs/slurm.md: '{text}' (from the profile) is missing"
    readme = re.sub(r"\s+", " ", README.read_text(encoding="utf-8"))
    assert f"{cells} cells per submission" in readme, "README.md: the profile's cells per submission"


# -- counts of cells written in the text --------------------------------------------------------
@pytest.fixture(scope="module")
def grids() -> dict:
    default = load_config(REPO / "config" / "config.yaml")
    tiny = load_config(REPO / "config" / "tiny-cpu.yaml")
    return {"default cpu": build_cells(default, "cpu"), "default cuda": build_cells(default, "cuda"),
            "tiny cpu": build_cells(tiny, "cpu"), "benchmark cuda": build_cells(laid_over("pipeline-bench.yaml"), "cuda"),
            "pairs cuda": build_cells(laid_over("pair-bench.yaml"), "cuda"),
            "verdicts cuda": build_cells(laid_over("verdict-bench.yaml"), "cuda")}


def laid_over(name: str) -> dict:
    """config/<name> laid over config/config.yaml, key by key, as `--configfile` does."""

    def merged(base: dict, over: dict) -> dict:
        return {**base, **{key: merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict)
                           else value for key, value in over.items()}}

    def read(file: str) -> dict:
        return yaml.safe_load((REPO / "config" / file).read_text())

    return validate_config(merged(read("config.yaml"), read(name)))


def number(page: str, pattern: str, groups: int = 1) -> tuple[int, ...]:
    text = re.sub(r"\s+", " ", (REPO / page).read_text(encoding="utf-8"))
    match = re.search(pattern, text)
    assert match, f"{page}: no match for {pattern!r}"
    return tuple(int(match.group(i + 1).replace(",", "")) for i in range(groups))


def test_cpu_grid_counts(grids):
    assert number("docs/pipeline.md", r"default config's cpu grid is (\d+) cells") == (len(grids["default cpu"]),)
    assert number("docs/pipeline.md", r"`config/tiny-cpu.yaml` is (\d+)\b") == (len(grids["tiny cpu"]),)


def test_pipeline_benchmark_counts(grids):
    assert number("docs/benchmark.md", r"pipeline-bench.yaml` \((\d+) cells") == (len(grids["benchmark cuda"]),)
    assert number("docs/benchmark.md", r"default grid \((\d[\d,]*) cells\)") == (len(grids["default cuda"]),)


def test_pair_and_counters_benchmark_counts(grids):
    assert number("docs/history.md", r"pair-bench.yaml` \((\d+) cells") == (len(grids["pairs cuda"]),)
    assert number("docs/history.md", r"verdict-bench.yaml` \((\d+) cells") == (len(grids["verdicts cuda"]),)
    conv2d = [cell for cell in grids["default cuda"] if cell.experiment == "conv2d"]
    assert number("docs/counters.md", r"default conv2d grid \((\d+) cells") == (len(conv2d),)


def test_shared_memory_counts(grids):
    cells = grids["default cuda"]
    large = large_shared_cells(cells)
    page = "docs/measurement.md"
    assert number(page, r"in the default grid, (\d+) of (\d+) cuda cells", 2) == (len(large), len(cells))
    assert all(need <= HOPPER_OPTIN_BYTES for _, need in large), "not all within 227 KiB"
    tiled = [cell for cell, _ in large if cell.kernel in ("tiled_output", "tiled_cached")]
    sgemm = [cell for cell, _ in large if cell.kernel == "sgemm_pipelined"]
    assert len(tiled) + len(sgemm) == len(large), sorted({cell.kernel for cell, _ in large})
    assert number(page, r"(\d+) of `tiled_output`") == (len(tiled),)
    assert number(page, r"and (\d+) of `sgemm_pipelined`") == (len(sgemm),)


# every "N cells"/"N jobs" in the prose lies inside one of these phrases, which the tests above check
CHECKED_PHRASES = {
    "README.md": [r"\d+ cells per submission"],  # test_slurm_numbers_are_the_profile
    "docs/slurm.md": [r"\d+ cells per submission", r"of its \d+ cells"],  # the same
    "docs/pipeline.md": [r"cpu grid is \d+ cells"],  # test_cpu_grid_counts
    "docs/measurement.md": [r"\d+ of \d+ cuda cells"],  # test_shared_memory_counts
    "docs/benchmark.md": [r"\(\d+ cells: conv2d", r"grid \(\d[\d,]* cells\)"],  # test_pipeline_benchmark_counts
    "docs/history.md": [r"\(\d+ cells: the direct family", r"\(\d+ cells: conv2d at"],  # test_pair_and_counters_...
    "docs/counters.md": [r"conv2d grid \(\d+ cells"],  # the same
}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_count_of_cells_is_checked(page):
    """A new 'N cells' in the text needs a check against the code here, or goes."""
    text = re.sub(r"\s+", " ", prose(page.read_text(encoding="utf-8")))
    spans = [m.span() for pattern in CHECKED_PHRASES.get(rel(page), []) for m in re.finditer(pattern, text)]
    for match in COUNT.finditer(text):
        start, end = match.span(1)
        assert any(lo <= start and end <= hi for lo, hi in spans), \
            f"{rel(page)}: '{match.group(0)}' is a hand-written count that no test checks (tests/test_docs.py)"


def test_slurm_page_several_models_command_is_a_valid_config():
    from convlab.plan.config import validate_config
    from convlab.plan.devicelabel import choose_devices

    page = (REPO / "docs" / "slurm.md").read_text(encoding="utf-8")
    several = section(page, "## One GPU model, or several in one run")
    values = re.findall(r"'(devices=[^']+)'", several)
    assert len(values) == 2, values  # the gpu_model form and the constraint form
    for value in values:
        config = validate_config({"backend": "cuda", "devices": value.split("=", 1)[1]})
        placements, line = choose_devices(config, "cuda", [])
        assert [p.label for p in placements] == ["h100", "h200"], placements
        assert "results/h100/, results/h200/" in line

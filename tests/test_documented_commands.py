"""Every `convlab …` and `python -m convlab …` command that README.md, docs/*.md and kernels/README.md
show runs as written, from a fresh venv set up with the README's install line, in a copy of the
checkout with the results of two small cpu runs made by that venv's `snakemake`: the console script
and `python -m convlab` both, without PYTHONPATH, running the copy's own code. A command that needs
a GPU or cannot run here is listed below with the reason, and its --help runs instead (the
subcommand exists in the installed command line). The same venv makes the quick start's report
(`snakemake --report` needs packages the run itself does not, such as pygments)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from workflow_helpers import REPO, TINY, shell

pytestmark = pytest.mark.pipeline

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "kernels" / "README.md"]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")
COMMAND = re.compile(r"^(?:convlab|python3? -m convlab)(?:\s|$)")
NAME = re.compile(r"^(?:convlab|python3? -m convlab)$")
# A shell comment after a command in a code block.
COMMENT = re.compile(r"\s+#\s.*$")

GPU = "needs a CUDA GPU"
# Commands not run as written, and why.
AS_HELP = {
    "convlab bench": f"the floor and SGEMM benchmark {GPU}",
    "convlab bench --sizes 128 256 512 2048 4096": f"the floor and SGEMM benchmark {GPU}",
    "convlab compile-kernels --grid FILE --backend cuda --out FILE":
        f"compiles the grid's CUDA kernels into a GPU worker ({GPU}); its arguments are placeholders",
    "convlab run --kernel direct --size 1024 --stride 2 --block 16": f"--block is a CUDA launch's ({GPU})",
    "convlab run --kernel direct --size 1024 --block 64": f"--block is a CUDA launch's ({GPU})",
    "convlab run --kernel cudnn --size 4096 --plan best --out /tmp/row.csv": f"cuDNN's plans ({GPU})",
    "convlab bench-pipeline": "two full runs of the default grid and a bare Snakemake's (long on the cpu backend); "
                              "tests/test_bench_pipeline.py runs it on the tiny grid",
    "convlab bench-pipeline --cores 1": "three runs of the default grid (minutes per spelling on the cpu backend); "
                                        "tests/test_bench_pipeline.py runs the command on the tiny grid",
    "convlab bench-pipeline --configfile config/tiny-cpu.yaml --cores 1":
        "tests/test_bench_pipeline.py runs it (minutes: three runs of the pipeline)",
    "convlab bench-pipeline --configfile config/pipeline-bench.yaml --cores 1":
        "three runs of the benchmark's grid (a minute per spelling on the cpu backend); "
        "tests/test_bench_pipeline.py runs the command on the tiny grid",
    "convlab bench-pipeline --checkout ../old --out old.json -- --scheduler greedy":
        "needs a second checkout at ../old; tests/test_bench_pipeline.py runs the command",
    "convlab bench-history": "grows a results database to 200,000 rows and times three rounds on two copies "
                             "(minutes); tests/test_bench_history.py runs it on a small database",
    "convlab serve": "runs the measurement service in the foreground until it idles out",
    "convlab watch": "watches the kernels' files until Ctrl-C; tests/test_watch.py runs one and stops it",
    "convlab watch --configfile config/tiny-cpu.yaml --kernels direct --sizes 64 --strides 1":
        "watches until Ctrl-C; tests/test_watch.py runs it and stops it",
    "convlab run": "named in prose, without the arguments a run needs",
}
# The run id of the docs' example, which no run here has: the first run's id stands for it.
EXAMPLE_RUN = "20261124T143012-3fa9"
# Exit statuses a command may end with: `--fail-on slower` exits 1 when a cell is SLOWER, which
# noise between two cpu runs can make one (docs/history.md, "Exit codes of compare").
FAIL_ON = {0, 1}


def documented_commands() -> dict[str, list[str]]:
    """Each command the pages show (in code blocks, and inline), and the pages that show it."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        lines = [COMMENT.sub("", line.strip().removeprefix("$ ")) for block in FENCE.findall(text)
                 for line in block.splitlines()]
        spans = [" ".join(span.split()) for span in SPAN.findall(FENCE.sub("", text))]
        for command in lines + spans:
            if COMMAND.match(command):
                found.setdefault(command, []).append(page.relative_to(REPO).as_posix())
    return found


DOCUMENTED = documented_commands()


def help_form(command: str) -> str:
    """The command's subcommand with --help (the command line's own --help for its bare name)."""
    words = shlex.split(command.replace("…", ""))
    prefix = 1 if words[0] == "convlab" else 3
    sub = next((word for word in words[prefix:] if not word.startswith("-")), None)
    return shlex.join(words[:prefix] + ([sub] if sub else []) + ["--help"])


def how_run(command: str) -> tuple[str, str | None]:
    """(what runs, why not the command as written; None when it is)."""
    if NAME.match(command):
        return f"{command} --help", None  # the command's name in prose
    if "…" in command:
        return help_form(command), None  # a command named in prose, its arguments elided
    if command in AS_HELP:
        return help_form(command), AS_HELP[command]
    return command, None


def other_spelling(command: str) -> str:
    """`python -m convlab X` for `convlab X`, and the other way round."""
    if command.startswith("convlab"):
        return "python -m " + command
    return re.sub(r"^python3? -m convlab", "convlab", command)


def test_the_pages_show_commands_and_every_exception_is_one_of_them():
    assert "convlab history" in DOCUMENTED and "convlab compare @previous @latest" in DOCUMENTED
    assert sorted(set(AS_HELP) - set(DOCUMENTED)) == []


def test_the_install_gives_this_checkouts_package_without_pythonpath(fresh_install):
    repo, env = fresh_install
    for where in ("import convlab; print(convlab.__file__)", "import convlab.paths as p; print(p.REPO_ROOT)"):
        result = shell(f"python -c {shlex.quote(where)}", repo, env)
        assert result.returncode == 0, result.stderr
        assert Path(result.stdout.strip()).resolve().is_relative_to(repo.resolve()), result.stdout
    assert shutil.which("convlab", path=env["PATH"]) == str(repo / ".venv" / "bin" / "convlab")


def constrained() -> dict[str, str]:
    """envs/constraints.txt: package name (normalised) -> its version."""
    pins = {}
    for line in (REPO / "envs" / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_the_install_takes_every_package_at_the_version_of_the_constraints_file(fresh_install):
    repo, env = fresh_install
    frozen = shell("pip freeze --exclude-editable", repo, env)
    assert frozen.returncode == 0, frozen.stderr
    installed = {re.sub(r"[-_.]+", "-", name).lower(): version for name, _, version in
                 (line.partition("==") for line in frozen.stdout.splitlines() if "==" in line)}
    pins = constrained()
    assert {"snakemake", "numpy", "pandas", "matplotlib"} <= set(installed)
    assert {name: version for name, version in installed.items() if pins.get(name) != version} == {}


@pytest.mark.parametrize("command", sorted(DOCUMENTED))
def test_a_documented_command_runs_from_the_fresh_venv(fresh_runs, command):
    repo, env, first_run = fresh_runs
    runs, why = how_run(command.replace(EXAMPLE_RUN, first_run))
    for spelling in (runs, other_spelling(runs)):
        result = shell(spelling, repo, env)
        shown = f"{spelling} ({why or 'as written'}, from {DOCUMENTED[command]}):\n{result.stdout[-2000:]}" \
                f"\n{result.stderr[-2000:]}"
        # check-verdicts exits 1 where the host is too noisy for the gate: a shared cpu host can be
        allowed = FAIL_ON if "--fail-on" in spelling or "check-verdicts" in spelling else {0}
        assert result.returncode in allowed, shown
        assert "Traceback" not in result.stderr and "No module named" not in result.stderr, shown
        assert result.stdout.strip(), shown


def test_a_fresh_environment_from_the_requirements_builds_the_report(fresh_runs):
    repo, env, _ = fresh_runs
    report = shell(f"snakemake --configfile {TINY} --report results/report.html", repo, env)
    assert report.returncode == 0, (report.stdout + report.stderr)[-3000:]
    page = repo / "results" / "report.html"
    assert page.is_file() and page.stat().st_size > 100_000

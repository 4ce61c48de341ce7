"""Cluster submission through Snakemake's Slurm executor plugin, against a real (local) Slurm.

The test runs the README's own command (read out of README.md's Slurm section, with the flags
the README names for clusters without slurmdbd, and nothing else: no --cores), so the two
cannot drift apart; Snakemake's Slurm plugin checks its jobs at a steady interval (POLLING). The
tiny cpu config is submitted with the project's profile (workflow/profiles/slurm), grouped 32
cells per sbatch; the tests that count submissions per cell or per label, and the node-death
test, run its conv2d cells alone, and ask for the summaries (SUMMARY) rather than the whole
report: the report stage runs on the submitting host, as in a local run, and the first test runs
the README's command whole. The summary must equal a local run's rows, times aside, and every
submission must have asked for one cell's CPUs and memory, not the sum over its group's cells.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from slurm_cluster import NODES, LocalSlurm, unavailable_reason
from workflow_helpers import REPO, TINY, VOLATILE
from workflow_helpers import copy_repo as copy_checkout

pytestmark = pytest.mark.pipeline
PROFILE = "workflow/profiles/slurm/profile.yaml"
LABEL = "ci-cpu"  # the device label of both runs (results/ci-cpu/)
# the target of the tests that need the rows and the summary, not the report's pictures and pages
SUMMARY = f"results/{LABEL}/summary.csv"
SECTION = "## Run on a Slurm cluster"
ORDER = ["experiment", "kernel", "variant", "size", "batch", "C_in", "C_out", "W", "stride", "filter_size"]
# squeue reasons of a pending job that no wait can cure: it asks for more than the partition has
NEVER_STARTS = {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints"}
# `python -m snakemake` with the Slurm plugin's status checks kept at their first interval (the
# README's --slurm-init-seconds-before-status-checks): the plugin adds 10 s after each check that
# finds no job finished, up to 180 s, so that a test would wait up to a minute after its last
# group ends. Only when Snakemake notices a finished job changes; what it submits does not.
POLLING = """
import sys
import snakemake_executor_plugin_slurm as plugin
from snakemake.cli import main

check_active_jobs = plugin.Executor.check_active_jobs

async def steady(self, active_jobs):
    async for job in check_active_jobs(self, active_jobs):
        yield job
    self.next_seconds_between_status_checks = self.workflow.executor_settings.init_seconds_before_status_checks

plugin.Executor.check_active_jobs = steady
sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""


@pytest.fixture(scope="module")
def slurm():
    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Slurm test, but: {reason}")
        pytest.skip(reason)
    if shutil.which("snakemake") is None and not (Path(sys.executable).parent / "snakemake").exists():
        pytest.skip("snakemake is not on PATH")
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        pytest.fail("snakemake-executor-plugin-slurm is not installed: pip install -r envs/requirements-test.txt")
    cluster = LocalSlurm()
    cluster.start()
    yield cluster
    cluster.stop()


def readme_commands() -> tuple[list[str], list[str]]:
    """The README's Slurm command, and the flags it says to add on a cluster without slurmdbd."""
    text = (REPO / "README.md").read_text()
    assert f"\n{SECTION}\n" in text, f"README.md has no '{SECTION}' section"
    section = text.split(f"\n{SECTION}\n", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)
                for line in block.splitlines() if line.strip().startswith("snakemake ")]
    assert len(commands) == 1, f"expected one snakemake command in the README's Slurm section, found {commands}"
    flags = re.findall(r"without `slurmdbd`[^.]*?\badd\s+`([^`]+)`", section)
    assert len(flags) == 1, f"expected one 'without `slurmdbd` ..., add `FLAGS`' in the README, found {flags}"
    return shlex.split(commands[0]), shlex.split(flags[0])


def cluster_command(*extra: str, device: str | None = None) -> list[str]:
    """The README's command, run by this interpreter; ``device``: the config value that replaces
    the README's device=<model> (default: device=LABEL). ``extra``: targets before options, as
    an option such as --group-components takes every word after it."""
    command, no_slurmdbd = readme_commands()
    assert command[0] == "snakemake" and "backend=cuda" in command, command
    assert any(arg.startswith("device=") for arg in command), command
    # CI has no GPU: the cpu backend stands in for the README's cuda, and its results go under
    # the label LABEL instead of the README's GPU model. Otherwise the command is the README's,
    # run by this interpreter's snakemake (POLLING: its status checks at a steady interval).
    command = ["backend=cpu" if arg == "backend=cuda" else (device or f"device={LABEL}") if arg.startswith("device=")
               else arg for arg in command]
    arguments = [*command[1:], *no_slurmdbd, *extra]
    assert "--cores" not in arguments and "-c" not in arguments, arguments  # a user on a cluster passes none
    return [sys.executable, "-c", POLLING, *arguments]


def env_with_python() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def copy_repo(target: Path) -> Path:
    copy_checkout(target)
    # The tiny cpu config in place of the default one, instead of a --configfile that the
    # README's command does not have.
    shutil.copyfile(target / TINY, target / "config" / "config.yaml")
    return target


def conv2d_only(repo: Path, strides: list[int] | None = None) -> int:
    """The tiny config narrowed to its conv2d family (and to ``strides`` where given), for the tests
    that count submissions per cell or per label rather than rows: each cell of a run is a Slurm job
    or a group's member, and a few show what many would, in a fraction of the time. The number of
    cells."""
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    for family in ("tiling", "winograd_layers", "gemm"):
        config[family] = {**config.get(family, {}), "enabled": False}
    if strides is not None:
        config["conv2d"]["strides"] = strides
    (repo / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    conv2d = config["conv2d"]
    return len(conv2d["kernels"]) * len(conv2d["sizes"]) * len(conv2d["strides"])


def minutes(limit: str) -> float:
    """Slurm's TimeLimit ([days-]hours:minutes:seconds) in minutes."""
    days, _, clock = limit.rpartition("-")
    hours, mins, secs = (int(part) for part in clock.split(":"))
    return int(days or 0) * 1440 + hours * 60 + mins + secs / 60


def megabytes(memory: str) -> float:
    """Slurm's memory (4000M, 125G) in MB."""
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2}
    return float(memory[:-1]) * scale[memory[-1]] if memory[-1] in scale else float(memory)


class SlurmJobs:
    """The Slurm jobs one run submitted (those whose WorkDir is its checkout), as slurmctld
    describes them. Polled while the run goes on and once after it: slurmctld forgets a
    finished job only MinJobAge (300 s) after it ended, so no job is missed."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = os.path.realpath(workdir)
        self.jobs: dict[str, dict[str, str]] = {}
        self.returncode: int | None = None

    def poll(self) -> None:
        try:
            out = subprocess.run(["scontrol", "show", "job", "--oneliner"], capture_output=True, text=True,
                                 timeout=30).stdout
        except subprocess.TimeoutExpired:
            return
        for line in out.splitlines():
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            if "JobId" in fields and os.path.realpath(fields.get("WorkDir", "")) == self.workdir:
                self.jobs[fields["JobId"]] = fields

    def never_starting(self) -> list[dict[str, str]]:
        return [job for job in self.jobs.values()
                if job.get("JobState") == "PENDING" and job.get("Reason") in NEVER_STARTS]

    def describe(self, job: dict[str, str]) -> str:
        keys = ("JobId", "Comment", "JobState", "Reason", "NumCPUs", "MinMemoryNode", "TimeLimit", "TRES",
                "TresPerJob")
        return " ".join(f"{key}={job[key]}" for key in keys if key in job)


def run_on_slurm(repo: Path, *extra: str, timeout_s: float = 600, device: str | None = None,
                 during=None, expect_success: bool = True) -> tuple[str, SlurmJobs]:
    """Run the README's command in ``repo`` and wait for it; ``during(jobs)`` is called at each
    poll while it runs (returns True once it has done its part)."""
    command = cluster_command(*extra, device=device)
    jobs = SlurmJobs(repo)
    log = repo.parent / f"{repo.name}-snakemake.log"
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=repo, env=env_with_python(), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    failure = None
    while process.poll() is None:
        jobs.poll()
        if during is not None and during(jobs):
            during = None
        stuck = jobs.never_starting()
        if stuck:
            failure = "a submission asks for more than the cluster has and never starts:\n" + "\n".join(
                jobs.describe(job) for job in stuck)
        elif time.monotonic() > deadline:
            failure = f"the Slurm run did not finish in {timeout_s} s"
        if failure:
            process.send_signal(signal.SIGINT)  # Snakemake cancels its Slurm jobs on SIGINT
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            for job in jobs.jobs.values():  # only this run's jobs, by id
                subprocess.run(["scancel", job["JobId"]], capture_output=True)
            break
        time.sleep(1)
    jobs.poll()
    output = log.read_text()
    assert failure is None, f"{failure}\ncommand: {shlex.join(command)}\n{output[-4000:]}"
    if expect_success:
        assert process.returncode == 0, f"command: {shlex.join(command)}\n{output[-6000:]}"
    jobs.returncode = process.returncode
    return output, jobs


def test_readme_names_the_slurm_command_and_its_flags():
    command, no_slurmdbd = readme_commands()
    assert command[:3] == ["snakemake", "--workflow-profile", "workflow/profiles/slurm"], command
    assert "--slurm-status-command" in no_slurmdbd and "--slurm-no-account" in no_slurmdbd, no_slurmdbd


def test_slurm_run_matches_a_local_run(slurm, tmp_path):
    # both copies first, from the same state of the checkout (the rows carry a hash of the code)
    local = copy_repo(tmp_path / "local")
    cluster = copy_repo(tmp_path / "cluster")
    # The local run starts once the Slurm run's groups of cells run: for most of that stage one node
    # works through its group of 32 while the machine's other core waits.
    local_log = tmp_path / "local-snakemake.log"
    at_home_run: list[subprocess.Popen] = []

    def start_local_run(jobs: SlurmJobs | None = None) -> bool:
        if jobs is not None and not any(job.get("JobState") == "RUNNING" and job.get("Comment", "").startswith(
                "rule_cells") for job in jobs.jobs.values()):
            return False
        with open(local_log, "w") as out:
            at_home_run.append(subprocess.Popen(
                [sys.executable, "-m", "snakemake", "--cores", "2", "--config", f"device={LABEL}"], cwd=local,
                env=env_with_python(), stdout=out, stderr=subprocess.STDOUT))
        return True

    try:
        started = time.monotonic()
        output, jobs = run_on_slurm(cluster, during=start_local_run)
        wall = time.monotonic() - started
        if not at_home_run:
            start_local_run()
        at_home_run[0].wait(timeout=600)
    finally:
        for process in at_home_run:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert at_home_run[0].returncode == 0, local_log.read_text()[-4000:]
    print(f"\nSlurm run with grouping: {len(jobs.jobs)} sbatch submissions, {wall:.0f} s")
    for job in jobs.jobs.values():
        print(" ", jobs.describe(job))

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.drop(columns=list(VOLATILE)).sort_values(ORDER).reset_index(drop=True)

    on_slurm = pd.read_csv(cluster / f"results/{LABEL}/summary.csv")
    at_home = pd.read_csv(local / f"results/{LABEL}/summary.csv")
    assert len(on_slurm) == len(at_home) > 30 and set(on_slurm["status"]) <= {"ok", "unsupported"}
    pd.testing.assert_frame_equal(keep(on_slurm), keep(at_home))
    # The run's jobs went to both nodes (at its start four wait at once for two free nodes), and
    # every row was measured on a node of the cluster by the service of its Slurm job: the rows
    # name the node (host/node, two slurmd on one host) and the service's time. Where Slurm put
    # the two groups of cells depends on which node was free: each node's service is shown for
    # certain by the two-label test.
    placed = pd.Series({job["JobId"]: job.get("NodeList") for job in jobs.jobs.values()})
    print("jobs per node:", placed.value_counts().to_dict(), "; rows per node:", on_slurm["host"].value_counts().to_dict())
    assert set(placed) == set(NODES), [jobs.describe(job) for job in jobs.jobs.values()]
    assert on_slurm["host"].map(lambda host: host.rpartition("/")[2]).isin(list(NODES)).all(), set(on_slurm["host"])
    assert on_slurm["service_ms"].notna().all()
    # the tiny config's cells in groups of 32, plus the bandwidth, ceiling and 2 gallery jobs:
    # far fewer than one job per cell
    assert 1 <= len(jobs.jobs) <= 7, output[-3000:]

    # Every submission asked for one cell's worth: a group runs its cells one after another, so
    # it needs one cell's CPUs and memory (not the sum over its 32 cells) and, on the cpu
    # backend, no GPU. Its time limit is the sum of its cells' runtimes.
    profile = yaml.safe_load((cluster / PROFILE).read_text())
    cpus = int(profile["default-resources"]["cpus_per_task"])
    cell = profile["set-resources"]["cell"]
    group_size = int(dict(item.split("=") for item in profile["group-components"])["cells"])
    groups = [job for job in jobs.jobs.values() if job.get("Comment", "").startswith("rule_cells")]
    assert groups, [jobs.describe(job) for job in jobs.jobs.values()]
    for job in jobs.jobs.values():
        assert int(job["NumCPUs"]) == cpus, jobs.describe(job)
        assert "gpu" not in job.get("TRES", "") + job.get("TresPerJob", "") + job.get("TresPerNode", ""), \
            jobs.describe(job)
    for job in groups:
        assert megabytes(job["MinMemoryNode"]) == float(cell["mem_mb"]), jobs.describe(job)
        assert minutes(job["TimeLimit"]) <= group_size * cell["runtime"], jobs.describe(job)
    # a full group of 32 cells, one after another
    assert max(minutes(job["TimeLimit"]) for job in groups) == group_size * cell["runtime"], \
        [jobs.describe(job) for job in groups]


def test_grouping_cuts_submissions(slurm, tmp_path):
    """The same workflow without grouping submits one sbatch job per cell."""
    repo = copy_repo(tmp_path / "ungrouped")
    cells = conv2d_only(repo, strides=[1])
    started = time.monotonic()
    _, jobs = run_on_slurm(repo, SUMMARY, "--group-components", "cells=1")
    print(f"\nSlurm run without grouping: {len(jobs.jobs)} sbatch submissions, {time.monotonic() - started:.0f} s")
    assert len(rows_of(repo, LABEL)) == cells
    cell_jobs = [job for job in jobs.jobs.values() if job.get("Comment", "").startswith("rule_cell")]
    assert len(cell_jobs) == cells, [jobs.describe(job) for job in jobs.jobs.values()]  # a job per cell
    assert len(jobs.jobs) >= cells + 1  # and the bandwidth job


def rows_of(repo: Path, label: str) -> pd.DataFrame:
    """Every row on disk under results/<label>/cells (the summary may not exist after a failure)."""
    paths = sorted((repo / "results" / label / "cells").rglob("*.csv"))
    return pd.concat([pd.read_csv(path).assign(path=str(path.relative_to(repo))) for path in paths],
                     ignore_index=True) if paths else pd.DataFrame(columns=["path", "host", "status"])


def test_two_labels_in_one_run_each_go_only_to_their_nodes(slurm, tmp_path):
    """config devices maps each label to a node feature (the cpu backend asks for no GPU, so its
    gpu_model would place nothing): every row of a label ran on that label's node."""
    repo = copy_repo(tmp_path / "two-labels")
    cells = conv2d_only(repo, strides=[1])
    labels = {"ci-a": "h100", "ci-b": "h200"}
    mapping = ", ".join(f"{label}: {{constraint: {feature}}}" for label, feature in labels.items())
    # the page of the labels side by side, and what it reads: each label's summary
    output, jobs = run_on_slurm(repo, "results/gpus.html", device=f"devices={{{mapping}}}")
    node_of = {feature: node for node, feature in NODES.items()}
    for label, feature in labels.items():
        summary = pd.read_csv(repo / f"results/{label}/summary.csv")
        hosts = summary["host"].value_counts().to_dict()
        print(f"results/{label}: {len(summary)} rows, by host {hosts}")
        assert len(summary) == cells and set(summary["status"]) <= {"ok", "unsupported"}
        assert {host.rpartition("/")[2] for host in hosts} == {node_of[feature]}, hosts
        assert summary["service_ms"].notna().all()  # measured by the service of a job on that node
    groups = [job for job in jobs.jobs.values() if job.get("Comment", "").startswith("rule_cells")]
    for job in groups:
        assert job.get("Features") in labels.values(), jobs.describe(job)
    # grouped per label (each label's cells fit one group of 32), not a submission per cell
    assert sorted(job.get("Features") for job in groups) == sorted(labels.values()), \
        [jobs.describe(job) for job in groups]
    page = (repo / "results/gpus.html").read_text()
    assert all(label in page for label in labels)


def test_a_label_whose_model_no_node_has_fails_before_submitting(slurm, tmp_path):
    repo = copy_repo(tmp_path / "no-such-model")
    output, jobs = run_on_slurm(repo, device="devices={ci-x: {gpu_model: a100}}", expect_success=False)
    assert jobs.returncode != 0 and not jobs.jobs, output[-2000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert errors == ["error: device ci-x: no Slurm node has a GPU of model a100 (the nodes offer h100, h200); "
                      "fix config devices"], output[-2000:]
    assert "Traceback" not in output


def test_a_node_that_dies_mid_run_loses_no_row(slurm, tmp_path):
    """One node is killed (its slurmd and its jobs' processes, SIGKILL) while a group of cells
    runs on it. Slurm marks it down and requeues the group, which finishes on the other node; or
    the run stops with one line. Either way, no row on disk is half-written, and the next
    invocation measures exactly the cells without a row. The conv2d cells alone, in groups of 2:
    four groups over the two nodes, so that one runs on the victim after another has written rows."""
    repo = copy_repo(tmp_path / "node-failure")
    cells = conv2d_only(repo)
    victim = list(NODES)[1]
    killed: list[str] = []
    released: set[str] = set()
    dead = []

    def kill_when_a_group_runs_there(jobs: SlurmJobs) -> bool:
        if not dead:
            running = [job for job in jobs.jobs.values() if job.get("JobState") == "RUNNING"
                       and job.get("NodeList") == victim and job.get("Comment", "").startswith("rule_cells")]
            if running and any((repo / f"results/{LABEL}/cells").rglob("*.csv")):
                killed.extend(slurm.kill_node(victim))
                dead.append(victim)
            return False
        # Slurm holds a requeued job for two minutes before it may start again: release it at once
        for job_id in killed:
            job = jobs.jobs.get(job_id, {})
            if job_id not in released and job.get("JobState") == "PENDING" and int(job.get("Restarts", 0)) > 0:
                subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], capture_output=True)
                released.add(job_id)
        return released == set(killed)

    try:
        output, jobs = run_on_slurm(repo, SUMMARY, "--group-components", "cells=2",
                                    during=kill_when_a_group_runs_there, expect_success=False, timeout_s=900)
        assert killed, f"no group of cells ran on {victim}:\n" + "\n".join(map(jobs.describe, jobs.jobs.values()))
        rows = rows_of(repo, LABEL)
        states = {job["JobId"]: (job.get("JobState"), job.get("NodeList"), job.get("Restarts")) for job in jobs.jobs.values()
                  if job["JobId"] in killed}
        print(f"\nkilled {victim} while job(s) {killed} ran there; they ended as {states}; "
              f"the run exited {jobs.returncode} with {len(rows)} rows on disk")
        if jobs.returncode != 0:
            print("its last lines:\n" + "\n".join(output.splitlines()[-5:]))
        # every row on disk is whole (it parses and has its status), and no temporary file is left
        assert rows["status"].notna().all() and not list((repo / "results").rglob("*.tmp"))
        assert rows["host"].map(lambda host: host.rpartition("/")[2]).isin(list(NODES)).all()

        slurm.start_node(victim)
        subprocess.run(["scontrol", "update", f"NodeName={victim}", "State=RESUME"], capture_output=True)
        slurm.wait_idle(60)
        before = set(rows["path"])
        output, jobs = run_on_slurm(repo, SUMMARY)
        after = rows_of(repo, LABEL)
        summary = pd.read_csv(repo / f"results/{LABEL}/summary.csv")
        measured_again = set(after["path"]) - before
        print(f"the next invocation measured {len(measured_again)} cells; summary {len(summary)} rows")
        assert len(summary) == len(after) == cells
        # the cells kept from the first run were not measured again
        kept = rows.set_index("path")["row_check"]
        assert (after.set_index("path").loc[list(before), "row_check"] == kept.loc[list(before)]).all()
    finally:
        if slurm.node_states().get(victim) != "idle":
            slurm.start_node(victim)
            subprocess.run(["scontrol", "update", f"NodeName={victim}", "State=RESUME"], capture_output=True)
            slurm.wait_idle(60)

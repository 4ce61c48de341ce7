"""Where the Snakefile hands over to the package: the few calls the rules make at the run's
boundaries, each of which turns a refusal into the run's one `error:` line and its exit.

- checked_default_config: before Snakemake reads config/config.yaml (workflow/rules/configfile.smk);
- start_run: the run's plan, built once, its prologue (the run the user started only) and its jobs'
  environment (workflow/rules/common.smk);
- run_started and run_ended: Snakemake's onstart, onsuccess and onerror.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from convlab.paths import REPO_ROOT
from convlab.plan.configfile import DEFAULT_CONFIG_FILE, check_config_files, check_working_directory
from convlab.snakefile.jobenvironment import export_job_environment
from convlab.snakefile.prologue import RunRefused, prologue
from convlab.snakefile.runlife import on_end, on_start, start_beside_the_dag
from convlab.snakefile.runplan import RunPlan
from convlab.status import UserError


def refuse(error: UserError) -> NoReturn:
    """End the run with its one line: a refusal's own, or an `error:` line."""
    sys.exit(str(error) if isinstance(error, RunRefused) else f"error: {error}")


def checked_default_config(workflow: Any) -> str:
    """The default config file, once it is known to parse: a mistake in it is one `error:` line naming
    the file and, for bad YAML, the line and column (Snakemake's own error names neither). The rules
    read kernels/ and config/ where Snakemake runs: `snakemake -s path/Snakefile` from another folder
    is one line that says where to run it. A missing default is a mistake only without --configfile:
    Snakemake then runs on those alone."""
    try:
        check_working_directory(REPO_ROOT)
        if Path(DEFAULT_CONFIG_FILE).exists() or not workflow.config_settings.configfiles:
            check_config_files([DEFAULT_CONFIG_FILE])
    except UserError as error:
        refuse(error)
    return DEFAULT_CONFIG_FILE


def command_line(argv: Sequence[str]) -> Any:
    """The run's command line as Snakemake read it (its own parser, so that every spelling counts;
    Snakemake has parsed it already, so this parse cannot fail). Read here because the workflow does
    not hold these settings yet while the Snakefile is read."""
    from snakemake.cli import get_argument_parser  # here: only the run the user started reads its own command line

    return get_argument_parser().parse_known_args(list(argv))[0]


def params_trigger(arguments: Any) -> bool:
    """Whether Snakemake re-runs a job whose params changed (its default; off with --rerun-triggers
    mtime, say, where the user asked for file times alone)."""
    triggers = getattr(arguments, "rerun_triggers", None)
    return not triggers or any(str(getattr(trigger, "name", trigger)).lower() == "params" for trigger in triggers)


def report_refusal(plan: RunPlan, report: str | None) -> str | None:
    """Why `snakemake --report` cannot make its report yet (None: it can): a device label whose
    summary is not there, which Snakemake would only name among a page of warnings."""
    missing = [f"results/{label}/summary.csv" for label in plan.devices
               if not Path(f"results/{label}/summary.csv").is_file()]
    if not report or not missing:
        return None
    return (f"error: {missing[0]} does not exist, so there is nothing to report yet: run `snakemake --cores 1` "
            f"first (with the same --configfile and --config), then `snakemake --report {report}`")


def start_run(config: Mapping[str, Any], workflow: Any) -> RunPlan:
    """The run's plan; in the run the user started (not a job re-reading the Snakefile on a cluster
    node), its prologue, whose lines go to stderr; and its jobs' environment. The validated config
    carries what the report's intro says of the run, under a key no config file can set."""
    try:
        settings = workflow.config_settings
        plan = RunPlan.build(config, REPO_ROOT, DEFAULT_CONFIG_FILE, settings.configfiles,
                             dict(settings.config))
        if workflow.is_main_process:
            arguments = command_line(sys.argv[1:])
            plan.params_decide = params_trigger(arguments)
            refused = report_refusal(plan, arguments.report or None)
            if refused:
                raise RunRefused(refused)
            # workflow.dryrun is not set yet while the Snakefile is read; the output settings already
            # hold the command line's dry run
            prologue(plan, workflow.output_settings.dryrun, lambda line: print(line, file=sys.stderr))
    except UserError as error:
        refuse(error)
    export_job_environment(plan, workflow.is_main_process)
    if workflow.is_main_process:
        plan.on_first_cell_job = partial(start_beside_the_dag, plan, workflow)
    plan.config["report_intro"] = plan.report.intro()
    return plan


def run_started(plan: RunPlan, workflow: Any) -> None:
    """Snakemake's onstart (convlab.snakefile.runlife.on_start)."""
    try:
        on_start(plan, workflow)
    except UserError as error:
        refuse(error)


def run_ended(failed: bool) -> None:
    """Snakemake's onsuccess and onerror (convlab.snakefile.runlife.on_end)."""
    on_end(failed)

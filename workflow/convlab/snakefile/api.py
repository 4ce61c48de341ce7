"""What the Snakefile's rules take from the package: the one module they import (workflow/rules/
*.smk), so that the rules' contract with the Python code is read here, and a rule reaches no
module's internals.

The rules hold rules, wildcard constraints and one-line lookups on the run's plan
(convlab.snakefile.runplan), which start_run builds once; the jobs then run
`python -m convlab <command>` (convlab.app), never this module.
"""

from __future__ import annotations

from convlab.snakefile.entry import checked_default_config, run_ended, run_started, start_run
from convlab.snakefile.jobshell import logged

__all__ = ["checked_default_config", "logged", "run_ended", "run_started", "start_run"]

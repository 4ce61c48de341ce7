"""The shell line around each job's command: its output in the rule's log, its `warning:` lines and
its one `error:` line on the terminal, and a line of its own for a process that a signal killed,
which could say nothing itself. Written as Snakemake's shell template ({log} is the rule's log;
literal braces are doubled)."""

from __future__ import annotations

import shlex
import signal

from convlab.machinefaults import ASKED_TO_STOP, SIGNAL_FIXES, killed_by

KILLED = "this job's process"


def signal_death(name: str) -> str:
    """The bash case for a job's process that died of signal ``name`` (exit status 128 + its number)."""
    signum = signal.Signals[name].value
    line = shlex.quote("error: " + killed_by(KILLED, signum))
    return f"{128 + signum}) printf '%s\\n' {line} | tee -a {{log}} >&2; exit 1;;"


# Each signal with a cause of its own; a stop asked for in silence (the run says it once, not each
# job); any other signal by the name bash gives it.
SIGNAL_DEATHS = " ".join(
    [signal_death(name) for name in SIGNAL_FIXES]
    + ["|".join(str(128 + signal.Signals[name].value) for name in ASKED_TO_STOP) + ") exit 1;;"]
    + ["129|1[3-9][0-9]) printf 'error: %s\\n' "
       f"\"{KILLED} died of SIG$(kill -l $rc): run again\" | tee -a {{log}} >&2; exit 1;;"]
)


def logged(command: str, then: str | None = None) -> str:
    """``command`` with its output in the rule's log. When it fails, the log's last line (the
    command's one `error:` line) is shown on the terminal too, and `warning:` lines always are;
    a process killed by a signal gets its line in the log and on the terminal. ``then`` runs after
    a success."""
    parts = [
        # a group: bash's own notice of a killed command (the whole command line) goes to the log
        "{{ " + command + "; }}",
        "> {log} 2>&1",
        # the warnings are picked out by bash's builtins: a grep would be one more process per job
        "&& while IFS= read -r line || [[ -n $line ]];",
        "do [[ $line != warning:* ]] || printf '%s\\n' \"$line\" >&2; done < {log}",
        f"|| {{{{ rc=$?; case $rc in {SIGNAL_DEATHS} esac; tail -n 1 {{log}} >&2; exit 1; }}}}",
    ]
    if then:
        parts.append(f"&& {then}")
    return " ".join(parts)

"""The cell job's own entry. The cell rule starts `python -S -m convlab cell --spec … [--image …]
--bandwidth … --out …` once per cell, hundreds of times a run, and the job only sends that cell to
the measurement service: so its line is parsed here and sent with the modules one request needs
(the socket, the protocol, the service's identity), never the command table, which imports
argparse and every command's choices.

convlab.__main__ starts here. Any other line (another command, --help, a line the rule never
writes) and CONVLAB_SERVICE=off go to the whole command line (convlab.app.cli), which parses them
with the command table as always: its help, its usage errors, the cell measured in the job's own
process.
"""

from __future__ import annotations

from convlab.app.console import Console
from convlab.app.service.client import measure_through_service, service_on

# The command this entry sends, and its options as the command table's entry of that name gives
# them (a test holds both): each flag, and whether a cell line must give it.
COMMAND = "cell"
OPTIONS = {"--spec": True, "--image": False, "--bandwidth": False, "--out": True}


def parse(argv: list[str]) -> dict[str, str] | None:
    """``argv`` (what follows `python -m convlab`) as {flag: value} when it is a cell line as the
    rule writes it: `cell`, then options of OPTIONS, each once, as ``--flag value``, the required
    ones all there. None for any other line, which the command table's parser reads."""
    if argv[:1] != [COMMAND] or len(argv) % 2 == 0:
        return None
    options: dict[str, str] = {}
    for flag, value in zip(argv[1::2], argv[2::2]):
        # a value that starts with "-" is a flag to argparse: its parser says what it makes of it
        if flag not in OPTIONS or flag in options or value.startswith("-"):
            return None
        options[flag] = value
    if not all(flag in options for flag, required in OPTIONS.items() if required):
        return None
    return options


def main(argv: list[str]) -> int | None:
    """Send the cell line ``argv`` to the measurement service: the job's exit status. None where
    the whole command line runs ``argv`` instead: any other line, or CONVLAB_SERVICE=off."""
    options = parse(argv)
    if options is None or not service_on():
        return None
    return measure_through_service(options["--spec"], options["--out"], options.get("--image"),
                                   options.get("--bandwidth"), Console())

"""`history-page`: the report's history figure and page (a report-stage job)."""

from __future__ import annotations

import argparse

from convlab.console import Console
from convlab.report.historypage import write_history_page


def history_page(args: argparse.Namespace, console: Console) -> int:
    console.say(write_history_page(args.results, args.verdicts, args.figure, args.out))
    return 0

"""`python -m convlab …`. A cell job's line, most of a run's jobs, goes to its thin entry, which
imports only what one request to the measurement service needs (convlab.app.cellentry); every other
line goes to the whole command line."""

import sys

from convlab.app import cellentry

status = cellentry.main(sys.argv[1:])
if status is None:
    from convlab.app.cli import main

    status = main()
sys.exit(status)

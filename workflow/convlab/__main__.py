import sys

from convlab.app.cli import main

sys.exit(main())

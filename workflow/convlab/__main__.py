import sys

from convlab.cli import main

sys.exit(main())

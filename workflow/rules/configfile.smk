# The default config, read by Snakemake only once it is known to parse: a mistake in it is then one
# `error:` line naming the file and, for bad YAML, the line and column (Snakemake's own error names
# neither). The files of --configfile are read before any of this: the profile checks them
# (profiles/default/config.yaml).
import sys
from pathlib import Path

# the package of this checkout (beside this file's folder), whatever else is installed, and whichever
# Snakefile was read (the root one, or workflow/Snakefile)
sys.path.insert(0, str(Path(str(workflow.current_basedir)).parent))

from convlab.snakefile.api import checked_default_config

DEFAULT_CONFIG = checked_default_config(workflow)


configfile: DEFAULT_CONFIG

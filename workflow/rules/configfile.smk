# The default config, read by Snakemake only once it is known to parse: a mistake in it is then one
# `error:` line naming the file and, for bad YAML, the line and column (Snakemake's own error names
# neither). The files of --configfile are read before any of this: the profile checks them
# (profiles/default/config.yaml).
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from convlab.snakefile.api import (
    DEFAULT_CONFIG_FILE,
    UserError,
    check_config_files,
    check_working_directory,
)

# The rules read kernels/ and config/ where Snakemake runs: `snakemake -s path/Snakefile` from
# another folder is one line that says where to run it, not a missing input of the first cell.
try:
    check_working_directory(workflow.basedir)
except UserError as error:
    sys.exit(f"error: {error}")

# A missing default is a mistake only without --configfile: Snakemake then runs on those alone.
if Path(DEFAULT_CONFIG_FILE).exists() or not workflow.config_settings.configfiles:
    try:
        check_config_files([DEFAULT_CONFIG_FILE])
    except UserError as error:
        sys.exit(f"error: {error}")


configfile: DEFAULT_CONFIG_FILE

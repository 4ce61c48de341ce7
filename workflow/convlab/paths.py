"""Where the checkout's own files are: the repository root, the kernels, the config schema and the
default config (workflow/convlab/paths.py -> three levels up)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = REPO_ROOT / "kernels"
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = REPO_ROOT / "config" / "config.yaml"

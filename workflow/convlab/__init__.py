"""convlab: run the CUDA 2D-convolution lab's cells and check each one against float64."""

from pathlib import Path

__version__ = "0.1.0"

# The repository root: workflow/convlab/__init__.py -> two levels up.
REPO_ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = REPO_ROOT / "kernels"
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = REPO_ROOT / "config" / "config.yaml"

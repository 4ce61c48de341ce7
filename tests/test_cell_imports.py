"""A Cell names its path through its family with the standard library alone: the thin clients, the
Snakefile and the measurement service (`serve` and `serve --stop` run under ``python -S``) read cells
without NumPy, whose import costs a tenth of a second or more."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Every family's cell, its path printed; then every module loaded that is not the standard library's.
PROBE = """
import sys
from convlab.plan.cell import Cell
from convlab.plan.families import FAMILIES
import convlab.service.server
for name in FAMILIES:
    print(Cell(experiment=name, backend="cpu", kernel="k", size=16, stride=1, filter_size=3, padding=1,
               in_channels=3, out_channels=4, filter="random").path)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "yaml", "pandas", "cv2", "cupy")))
"""


def test_a_cell_and_the_service_import_the_standard_library_only():
    result = subprocess.run([sys.executable, "-S", "-c", PROBE], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO / "workflow")})
    assert result.returncode == 0, result.stderr[-3000:]
    *paths, loaded = result.stdout.splitlines()
    assert loaded == "[]"
    assert "results/local/cells/cpu/conv2d/kernel~k/size~16/stride~1/filter~3/default.csv" in paths
    assert len(paths) == len(set(paths)) >= 4

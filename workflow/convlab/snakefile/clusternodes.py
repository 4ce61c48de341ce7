"""What a Slurm cluster's nodes offer: the GPU models of their gres and their features (standard
library only; asked once, by the run that submits, before the first job)."""

from __future__ import annotations

import re
import shutil
import subprocess

# gres entries: gpu:h100:4, gpu:h100:4(S:0-1), gpu:4
GRES_MODEL = re.compile(r"^gpu:([A-Za-z0-9_.]+):\d+")


def node_offers(timeout_s: float = 30.0) -> tuple[set[str], set[str]] | None:
    """The GPU models and node features of every node `sinfo` lists, or None where sinfo is
    missing or fails (then the submission itself says what is wrong)."""
    if shutil.which("sinfo") is None:
        return None
    try:
        listed = subprocess.run(["sinfo", "--noheader", "--Node", "--format", "%G|%f"], capture_output=True,
                                text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:
        return None
    models: set[str] = set()
    features: set[str] = set()
    for line in listed.stdout.splitlines():
        gres, _, feature_list = line.strip().partition("|")
        for entry in gres.split(","):
            match = GRES_MODEL.match(entry.strip())
            if match:
                models.add(match.group(1))
        features.update(f for f in feature_list.split(",") if f and f != "(null)")
    return models, features

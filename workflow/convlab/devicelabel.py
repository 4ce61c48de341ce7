"""The device label that keys a run's results: results/<label>/.

One label per GPU model (or CPU), so that measurements of several GPUs live side by side and a
run on one never mixes into another's summary. The user may name it (config `device:`);
otherwise it is derived on the host that builds the DAG from the GPU model (or CPU) it sees. A
login node without a GPU cannot see the model its jobs will run on, so there it is required.
"""

from __future__ import annotations

import re

from convlab.config import ConfigError
from convlab.hostinfo import cpu_name

LABEL_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
# Vendor words that say nothing about which device it is.
NOISE = re.compile(r"\b(nvidia|amd|intel|\(r\)|\(tm\)|processor|cpu|\d+-core|with radeon graphics)\b|@.*$",
                   re.IGNORECASE)


def slug(model: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3'; 'AMD EPYC 7B13' -> 'epyc-7b13'."""
    words = re.sub(r"[^a-z0-9.]+", "-", NOISE.sub(" ", model).lower()).strip("-.")
    return words[:60] or "unknown"


def choose_label(configured: str | None, backend: str, gpu_names: list[str]) -> tuple[str, str]:
    """The label and one line saying where it came from. Raises ConfigError where none can be
    chosen: a GPU run with no GPU here and no `device:`, or GPUs of two models."""
    if configured:
        if not re.match(LABEL_PATTERN, configured):
            raise ConfigError(f"config device: {configured!r} is not a label (lower-case letters, digits, '.', '_', "
                              "'-'; at most 64)")
        return configured, f"results under results/{configured}/ (config device)"
    if backend == "cpu":
        label = f"cpu-{slug(cpu_name())}"
        return label, f"results under results/{label}/ (this host's CPU)"
    models = sorted(set(gpu_names))
    if len(models) > 1:
        raise ConfigError(f"this host shows GPUs of {len(models)} models ({', '.join(models)}): their results "
                          "would mix; set CUDA_VISIBLE_DEVICES to the GPUs of one model, or run each model "
                          "with its own config device")
    if models:
        label = slug(models[0])
        return label, f"results under results/{label}/ ({models[0]})"
    raise ConfigError("backend cuda on a host without a GPU: name the GPU model the jobs will run on with "
                      "config device (e.g. --config device=h100), so that their results go under results/<device>/")

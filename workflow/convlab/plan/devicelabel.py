"""The device label that keys a run's results: results/<label>/.

One label per GPU model (or CPU), so that measurements of several GPUs live side by side and a
run on one never mixes into another's summary. The user may name it (config `device:`);
otherwise it is derived on the host that builds the DAG from the GPU model (or CPU) it sees. A
login node without a GPU cannot see the model its jobs will run on, so there it is required.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from convlab.measure.hostinfo import cpu_name
from convlab.plan.config import ConfigError

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
                          "would mix; set CUDA_VISIBLE_DEVICES to the UUIDs of the GPUs of one model (nvidia-smi -L "
                          "lists them), or run each model with its own config device")
    if models:
        label = slug(models[0])
        return label, f"results under results/{label}/ ({models[0]})"
    raise ConfigError("backend cuda, but this machine shows no NVIDIA GPU (check nvidia-smi and "
                      "CUDA_VISIBLE_DEVICES): run on the cpu here (--config backend=cpu, or backend: auto), or "
                      "submit to a GPU cluster naming the GPU model the jobs run on "
                      "(--workflow-profile workflow/profiles/slurm --config device=h100)")


@dataclass(frozen=True)
class Placement:
    """One device label of a run, and where its jobs may run on a cluster: nodes with a GPU of
    ``gpu_model`` (gres type), and/or nodes with the feature ``constraint``. Neither: anywhere
    the profile sends jobs."""

    label: str
    gpu_model: str | None = None
    constraint: str | None = None

    def describe(self) -> str:
        where = [f"gpu_model {self.gpu_model}" if self.gpu_model else "",
                 f"constraint {self.constraint}" if self.constraint else ""]
        return f"{self.label} on {' and '.join(filter(None, where))}" if any(where) else self.label


def choose_devices(config: dict, backend: str, gpu_names: list[str]) -> tuple[list[Placement], str]:
    """The run's device labels, and one line saying where their results go. One label (config
    `device`, or the model seen here) unless config `devices` names several, each with where its
    jobs run."""
    devices = config.get("devices")
    if not devices:
        label, line = choose_label(config.get("device"), backend, gpu_names)
        return [Placement(label)], line
    if config.get("device"):
        raise ConfigError("config sets both device and devices: keep devices (several labels) or device (one)")
    if isinstance(devices, list):  # a label is its own GPU model
        devices = {label: {"gpu_model": label} for label in devices}
    kinds = {tuple(sorted(where)) for where in devices.values()}
    if len(kinds) > 1:
        raise ConfigError("config devices: every label must name the same keys (all gpu_model, all constraint, "
                          f"or all both), found {' / '.join(', '.join(kind) for kind in sorted(kinds))}")
    placements = [Placement(label, where.get("gpu_model"), where.get("constraint")) for label, where in devices.items()]
    folders = ", ".join(f"results/{placement.label}/" for placement in placements)
    return placements, (f"results under {folders} (config devices: "
                        f"{'; '.join(placement.describe() for placement in placements)})")


def unplaceable(placements: list[Placement], gpu_models: set[str], features: set[str]) -> str | None:
    """Why a label cannot run on a cluster whose nodes offer these GPU models and features, or
    None when every label has a node."""
    for placement in placements:
        if placement.gpu_model and placement.gpu_model not in gpu_models:
            offered = ", ".join(sorted(gpu_models)) or "no typed GPUs"
            return (f"device {placement.label}: no Slurm node has a GPU of model {placement.gpu_model} "
                    f"(the nodes offer {offered}); fix config devices")
        if placement.constraint:
            wanted = set(re.split(r"[&|,]", placement.constraint.replace("!", ""))) - {""}
            missing = sorted(wanted - features)
            if missing:
                offered = ", ".join(sorted(features)) or "no features"
                return (f"device {placement.label}: no Slurm node has the feature {', '.join(missing)} "
                        f"(the nodes offer {offered}); fix config devices")
    return None

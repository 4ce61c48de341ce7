"""Which backend a run uses, on which device, and why: said in one line when the DAG is built.

Read from files and package metadata only (no CuPy import, no CUDA context), so that building
the DAG stays quick. Whether CuPy really works is found by the first GPU job (the copy
bandwidth), which every cell waits for.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from convlab.measure.hostinfo import NVIDIA_PROC, cpu_name, driver_gpus
from convlab.status import BackendUnavailable

# CUDA 13 needs driver 580 or newer; CUDA 12 needs 525 or newer.
CUDA13_DRIVER = 580
CUDA12_DRIVER = 525


@dataclass(frozen=True)
class BackendChoice:
    requested: str
    backend: str
    line: str  # what the run prints first
    gpus: tuple[str, ...] = ()  # the GPU models seen here (asked once: it may run nvidia-smi)


def _first_version(*distributions: str) -> str | None:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def visible_gpu_names() -> list[str]:
    """The models of the GPUs this process's CUDA sees: the driver's list (its /proc files; else
    nvidia-smi -L), narrowed by CUDA_VISIBLE_DEVICES as CUDA reads it (visible())."""
    setting = os.environ.get("CUDA_VISIBLE_DEVICES")
    if setting == "":
        return []
    listed = [(fields["Model"], fields.get("GPU UUID", "")) for _, fields in driver_gpus() if fields.get("Model")]
    return visible(listed or smi_gpus(), setting, os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID")


def smi_gpus() -> list[tuple[str, str]]:
    """(model, UUID) of each GPU `nvidia-smi -L` lists; empty without it."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [(m.group(1), m.group(2) or "") for m in
            re.finditer(r"^GPU \d+: (.+?)(?: \(UUID: (\S+?)\))?$", listing, re.MULTILINE)]


def visible(listed: list[tuple[str, str]], setting: str | None, bus_order: bool) -> list[str]:
    """The models of the GPUs ``listed`` ((model, UUID) in bus order) that a CUDA_VISIBLE_DEVICES of
    ``setting`` leaves visible. CUDA reads its entries in order up to the first it cannot resolve
    (or one named twice): an index, into the bus order under CUDA_DEVICE_ORDER=PCI_BUS_ID and else
    fastest first; a GPU's UUID or a unique start of one; a MIG instance. Where the models differ and
    an entry cannot be placed here (an index in the fastest-first order, a MIG instance), every
    listed GPU is returned: which models are visible is not known."""
    names = [name for name, _ in listed]
    if setting is None:
        return names
    one_model = len(set(names)) <= 1
    chosen: list[str] = []
    seen: set[str] = set()
    for entry in (part.strip() for part in setting.split(",")):
        if entry.isdigit() and int(entry) < len(listed):
            if not (bus_order or one_model):
                return names
            position = int(entry)
        elif entry.startswith("GPU-"):
            matches = [i for i, (_, uuid) in enumerate(listed) if uuid.startswith(entry)]
            if len(matches) != 1:
                break
            position = matches[0]
        elif entry.startswith("MIG-") and listed:
            if not one_model:
                return names
            chosen.append(names[0])
            continue
        else:
            break
        key = listed[position][1] or str(position)
        if key in seen:
            break
        seen.add(key)
        chosen.append(names[position])
    return chosen


def driver_version() -> str | None:
    try:
        with open(os.path.join(NVIDIA_PROC, "version"), errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return found.group(1) if found else None


def install_hint() -> str:
    """The pip command for this driver's CUDA version."""
    version = driver_version()
    major = int(version.split(".")[0]) if version else None
    if major is not None and major < CUDA12_DRIVER:
        return f"driver {version} is older than CUDA 12 supports ({CUDA12_DRIVER}); update the driver"
    if major is not None and major < CUDA13_DRIVER:
        return f"pip install -r envs/requirements-cuda12.txt (driver {version} supports CUDA 12)"
    if major is not None:
        return f"pip install -r envs/requirements-cuda13.txt (driver {version} supports CUDA 13)"
    return ("pip install -r envs/requirements-cuda13.txt (or -cuda12.txt where nvidia-smi shows "
            "CUDA Version 12.x)")


def _gpu_stack() -> tuple[str | None, str | None]:
    """CuPy's and cuDNN's versions where both import-able, else None for the missing one."""
    cupy = _first_version("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy") \
        if importlib.util.find_spec("cupy") else None
    cudnn = None
    if importlib.util.find_spec("cudnn"):
        cudnn = _first_version("nvidia-cudnn-cu13", "nvidia-cudnn-cu12") or "(version unknown)"
    return cupy, cudnn


def _describe_gpus(names: tuple[str, ...]) -> str:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} x {name}" if n > 1 else name for name, n in counts.items())


def _cpu_line(requested: str, why: str) -> str:
    model = cpu_name()
    versions = f"NumPy {_first_version('numpy')}, OpenCV {_first_version('opencv-python-headless', 'opencv-python')}"
    arrow = "auto → cpu" if requested == "auto" else "cpu"
    return f"backend {arrow}: {model}, {os.cpu_count()} cores ({versions}); {why}"


def choose_backend(requested: str) -> BackendChoice:
    """Resolve ``requested`` (auto, cuda or cpu). Raises BackendUnavailable where ``auto`` sees a
    GPU whose software is missing: measuring the CPU instead would be a surprise."""
    if requested == "cpu":
        return BackendChoice(requested, "cpu", _cpu_line(requested, "set in the config"))
    gpus = tuple(visible_gpu_names())
    cupy, cudnn = _gpu_stack()
    if requested == "cuda":
        if not gpus:
            return BackendChoice(requested, "cuda", "backend cuda (set in the config): no NVIDIA GPU visible on "
                                 "this host; its jobs must run on GPU nodes (a cluster submission)")
        return BackendChoice(requested, "cuda", f"backend cuda: {_describe_gpus(gpus)} (CuPy {cupy or 'missing'}, "
                             f"cuDNN {cudnn or 'missing'}); set in the config", gpus)
    if requested != "auto":
        raise BackendUnavailable(f"unknown backend {requested!r} (use auto, cuda or cpu)")
    if not gpus:
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES") == ""
        return BackendChoice(requested, "cpu", _cpu_line(requested, "CUDA_VISIBLE_DEVICES is empty" if hidden
                                                          else "no NVIDIA GPU visible"))
    missing = [name for name, version in (("CuPy", cupy), ("the cuDNN frontend", cudnn)) if version is None]
    if missing:
        raise BackendUnavailable(
            f"backend auto: this machine has {_describe_gpus(gpus)} but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed: {install_hint()}; "
            "or set backend: cpu to measure the CPU on purpose")
    return BackendChoice(requested, "cuda", f"backend auto → cuda: {_describe_gpus(gpus)} "
                         f"(CuPy {cupy}, cuDNN {cudnn})", gpus)


def refuse_local_cuda_without_gpu(choice: BackendChoice, executor: str) -> None:
    """backend cuda with jobs running on this host needs a GPU here; on a cluster the host that
    submits may have none."""
    if choice.backend == "cuda" and executor in ("local", "dryrun") and not choice.gpus:
        raise BackendUnavailable(
            "backend cuda: no NVIDIA GPU visible on this machine, and jobs run here (check nvidia-smi "
            "and CUDA_VISIBLE_DEVICES; use backend: cpu or auto, or submit to a GPU cluster with "
            "--workflow-profile workflow/profiles/slurm)")

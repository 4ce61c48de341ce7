"""The kernel registry: kernels/registry.yaml names each kernel's launch description."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from convlab import KERNELS_DIR, REPO_ROOT

CPU_TWINS_DIR = Path(__file__).resolve().parent / "cpu_twins"
LIBRARY_MODULES = {"cudnn": Path(__file__).resolve().parent / "backends" / "cudnn_conv.py"}


class RegistryError(ValueError):
    """A kernel that is not registered, or a launch description that is malformed."""


@dataclass(frozen=True)
class KernelSpec:
    """One kernel's launch description (kernels/<name>.yaml)."""

    name: str
    summary: str
    description_path: Path
    layout: dict[str, str]
    precision: str
    tunables: dict[str, list[Any]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None  # the .cu file, for kernels we write
    function: str | None = None
    launch: dict[str, Any] = field(default_factory=dict)
    library: str | None = None  # e.g. cudnn, for vendor-library kernels
    cpu_twin: str | None = None

    def backends(self) -> list[str]:
        names = ["cuda"]
        if self.cpu_twin:
            names.append("cpu")
        return names

    def tunables_for(self, backend: str) -> dict[str, list[Any]]:
        """Launch tunables apply on the GPU only; a cpu twin has none."""
        return dict(self.tunables) if backend == "cuda" else {}

    def files(self, backend: str) -> list[Path]:
        """The files whose change must re-run this kernel's cells on ``backend``."""
        paths = [self.description_path]
        if self.source is not None:
            paths.append(self.source)
        if backend == "cuda" and self.library:
            paths.append(LIBRARY_MODULES[self.library])
        if backend == "cpu" and self.cpu_twin:
            paths.append(CPU_TWINS_DIR / f"{self.cpu_twin}.py")
        return paths


def _parse(name: str, path: Path) -> KernelSpec:
    with open(path) as handle:
        raw = yaml.safe_load(handle) or {}
    if raw.get("name") != name:
        raise RegistryError(f"{path}: name is {raw.get('name')!r}, the registry calls it {name!r}")
    source = raw.get("source")
    library = raw.get("library")
    if bool(source) == bool(library):
        raise RegistryError(f"{path}: give exactly one of 'source' (a .cu file) or 'library'")
    if library and library not in LIBRARY_MODULES:
        raise RegistryError(f"{path}: unknown library {library!r} (known: {sorted(LIBRARY_MODULES)})")
    if source and not raw.get("function"):
        raise RegistryError(f"{path}: a .cu kernel needs 'function', its entry point")
    source_path = (path.parent / source) if source else None
    if source_path is not None and not source_path.is_file():
        raise RegistryError(f"{path}: source {source_path} does not exist")
    twin = raw.get("cpu_twin")
    if twin and not (CPU_TWINS_DIR / f"{twin}.py").is_file():
        raise RegistryError(f"{path}: cpu_twin {twin!r} has no module {CPU_TWINS_DIR / (twin + '.py')}")
    return KernelSpec(
        name=name,
        summary=raw.get("summary", ""),
        description_path=path,
        layout=dict(raw.get("layout", {})),
        precision=raw.get("precision", "fp32"),
        tunables={k: list(v) for k, v in (raw.get("tunables") or {}).items()},
        settings=dict(raw.get("settings") or {}),
        source=source_path,
        function=raw.get("function"),
        launch=dict(raw.get("launch") or {}),
        library=library,
        cpu_twin=twin,
    )


@lru_cache(maxsize=4)
def load_registry(kernels_dir: Path = KERNELS_DIR) -> dict[str, KernelSpec]:
    with open(kernels_dir / "registry.yaml") as handle:
        entries = (yaml.safe_load(handle) or {}).get("kernels", {})
    return {name: _parse(name, kernels_dir / desc) for name, desc in entries.items()}


def get_kernel(name: str, kernels_dir: Path = KERNELS_DIR) -> KernelSpec:
    registry = load_registry(kernels_dir)
    if name not in registry:
        raise RegistryError(f"unknown kernel {name!r}; registered: {', '.join(sorted(registry))}")
    return registry[name]


def relative(path: Path) -> str:
    """A path relative to the repository root, as Snakemake inputs are written."""
    return str(Path(path).resolve().relative_to(REPO_ROOT))

"""The kernel registry: kernels/registry.yaml names each kernel's launch description.

The description format is documented in kernels/README.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from convlab.paths import KERNELS_DIR, REPO_ROOT
from convlab.plan.families import DEFAULT_FAMILY, FAMILIES
from convlab.plan.launch import evaluate, holds
from convlab.plan.yamlfile import safe_load, yaml_problem
from convlab.status import UserError

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # workflow/convlab
CPU_TWINS_DIR = PACKAGE_DIR / "backends" / "cpu_twins"
# More kernel folders (each with its registry.yaml), e.g. the tests' deliberately faulty kernels.
EXTRA_KERNELS_ENV = "CONVLAB_EXTRA_KERNELS"
# The library kernels by name (a description's `library:`), each with the module of
# convlab/backends that wraps it: a file of its cells. Known here without importing the wrappers,
# which import CuPy; the cuda backend alone imports them (convlab.backends.libraries).
LIBRARIES = {"cudnn": "cudnn_conv.py", "cupy_fft": "fft_conv.py", "ndimage": "ndimage_conv.py"}
LAYOUTS = {"input": ("hwc", "chw"), "weights": ("oihw", "ohwi"), "output": ("hwc", "chw")}
KNOWN_KEYS = {"name", "summary", "source", "library", "layout", "precision", "tunables", "settings",
              "supports", "requires", "defines", "scratch", "constants", "stages", "cpu_twin", "experiments"}
SUPPORT_KEYS = {"stride", "filter_size"}


class RegistryError(UserError, ValueError):
    """A kernel that is not registered, or a launch description that is malformed."""


class DescriptionError(RegistryError):
    """A registry or launch description file that cannot be read: missing, not valid YAML, or
    not the mapping of keys kernels/README.md documents."""


# Keys whose value is a mapping, and keys whose value is a list, in a launch description.
MAPPING_KEYS = ("layout", "tunables", "settings", "supports", "defines", "scratch", "constants")
LIST_KEYS = ("stages", "requires", "experiments")


def shown(path: Path) -> str:
    """A path as messages name it: relative to the repository root when inside it
    (kernels/direct.yaml), else as given."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """A registry or description file's top-level mapping ({} for an empty file). Raises
    DescriptionError naming the file for one that is missing, unreadable, not YAML or not a mapping."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw = safe_load(handle)
    except FileNotFoundError:
        raise DescriptionError(f"{shown(path)}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise DescriptionError(f"{shown(path)}: cannot be read ({error})") from None
    except yaml.YAMLError as error:
        raise DescriptionError(f"{shown(path)}: {yaml_problem(error)}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise DescriptionError(f"{shown(path)}: the top level must be a mapping of keys (see kernels/README.md), "
                               f"not a {type(raw).__name__}")
    return raw


@dataclass(frozen=True)
class ConstantFill:
    """A __constant__ symbol filled from a buffer at setup; where ``when`` is given (a condition on
    the problem, the tunables and the evaluated defines), only where it holds: a kernel may then
    declare the symbol under the same condition, since a module that declares one is dearer to
    launch even where its kernel never reads it."""

    buffer: str
    when: str | None = None

    def applies(self, names: dict[str, int]) -> bool:
        """Whether this launch fills the symbol: ``names`` are the problem's, the tunables and the defines."""
        return self.when is None or holds(self.when, names)


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
    supports: dict[str, list[int]] = field(default_factory=dict)
    defines: dict[str, Any] = field(default_factory=dict)
    scratch: dict[str, Any] = field(default_factory=dict)
    constants: dict[str, ConstantFill] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)
    source: Path | None = None  # the .cu file, for kernels we write
    library: str | None = None  # cudnn, cupy_fft, ndimage
    cpu_twin: str | None = None
    twin_path: Path | None = None  # the twin's module: convlab/backends/cpu_twins/, or beside the description
    experiments: tuple[str, ...] = (DEFAULT_FAMILY,)  # the families whose grids include this kernel
    # conditions on the problem and tunables (e.g. 'block >= S'); a cell that fails one is
    # an invalid configuration of this kernel, recorded with the condition
    requires: tuple[str, ...] = ()

    def backends(self) -> list[str]:
        return ["cuda", "cpu"] if self.cpu_twin else ["cuda"]

    def precision_under(self, settings: Mapping[str, Any]) -> str:
        """The precision the kernel computes in under ``settings`` (its own, or a cell's with the config's
        overrides): tf32 where they allow TF32 math, else the description's ``precision``."""
        return "tf32" if settings.get("math") == "tf32" else self.precision

    def tunables_for(self, backend: str) -> dict[str, list[Any]]:
        """Launch tunables apply on the GPU only; a cpu twin has none."""
        return dict(self.tunables) if backend == "cuda" else {}

    def unsupported_reason(self, stride: int, filter_size: int) -> str | None:
        """Why this kernel has no code for the problem, or None when it has."""
        for key, value in (("stride", stride), ("filter_size", filter_size)):
            allowed = self.supports.get(key)
            if allowed is not None and value not in allowed:
                return f"{self.name} implements {key} in {allowed} only, not {value}"
        return None

    def unmet(self, names: dict[str, int]) -> list[str]:
        """Its ``requires`` conditions that do not hold over ``names`` (the problem's and the tunables)."""
        return [condition for condition in self.requires if not holds(condition, names)]

    def evaluated_defines(self, names: dict[str, int]) -> dict[str, int]:
        """The description's -D macros evaluated over ``names`` (the problem's and the tunables)."""
        return {key: evaluate(value, names) for key, value in self.defines.items()}

    def libraries(self, backend: str) -> tuple[str, ...]:
        """The libraries this kernel's cells call on ``backend``: a library kernel's library, the
        compiler of a source kernel (and cuBLAS where a stage is a matmul), NumPy (and OpenCV where
        its source imports it) for a cpu twin. Their versions are part of the kernel's identity."""
        if backend == "cpu":
            if self.twin_path is None:
                return ()
            return ("NumPy", "OpenCV") if _reads_opencv(self.twin_path) else ("NumPy",)
        called: tuple[str, ...] = LIBRARY_CALLS.get(self.library or "", ())
        if self.source is not None:
            called += ("NVRTC",)
        if any(stage.get("op") == "matmul" for stage in self.stages):
            called += ("cuBLAS",)
        return called

    def files(self, backend: str) -> list[Path]:
        """The files whose change must re-run this kernel's cells on ``backend``. The cpu backend
        runs the kernel's twin, never its .cu: an edit of the .cu is measured on a GPU."""
        paths = [self.description_path]
        if backend == "cuda" and self.source is not None:
            paths.append(self.source)
        if backend == "cuda" and self.library:
            paths.append(library_file(self.library))
        if backend == "cpu" and self.twin_path:
            paths.append(self.twin_path)
        return paths


# The libraries behind each library kernel (its description's ``library:``), by the names
# convlab.plan.libraryversions knows them by.
LIBRARY_CALLS = {"cudnn": ("cuDNN",), "cupy_fft": ("cuFFT", "CuPy"), "ndimage": ("CuPy",)}


@cache
def _reads_opencv(twin_path: Path) -> bool:
    return "cv2" in twin_path.read_text()


def library_file(library: str) -> Path:
    """The module that wraps ``library`` (the same file its wrapper's files() names)."""
    return PACKAGE_DIR / "backends" / LIBRARIES[library]


def _check_stage(path: Path, index: int, stage: dict) -> None:
    where = f"{shown(path)}: stages[{index}]"
    if not isinstance(stage, dict) or "name" not in stage:
        raise RegistryError(f"{where}: each stage needs a name")
    if ("function" in stage) == ("op" in stage):
        raise RegistryError(f"{where}: give exactly one of 'function' (an entry point) or 'op'")
    if "function" in stage:
        for key in ("block", "grid", "args"):
            if key not in stage:
                raise RegistryError(f"{where}: a function stage needs '{key}'")
    elif stage["op"] == "matmul":
        for key in ("a", "b", "out"):
            if not (isinstance(stage.get(key), list) and len(stage[key]) in (3, 4)):
                raise RegistryError(f"{where}: matmul needs '{key}: [buffer, rows, cols]' "
                                    "or '[buffer, batch, rows, cols]'")
    else:
        raise RegistryError(f"{where}: unknown op {stage['op']!r} (known: matmul)")


def _constants(path: Path, raw: dict) -> dict[str, ConstantFill]:
    """`symbol: buffer`, or `symbol: {buffer: name, when: condition}`."""
    constants = {}
    for symbol, entry in raw.items():
        if isinstance(entry, str):
            constants[symbol] = ConstantFill(entry)
        elif isinstance(entry, dict) and set(entry) <= {"buffer", "when"} and isinstance(entry.get("buffer"), str) \
                and isinstance(entry.get("when", ""), str):
            constants[symbol] = ConstantFill(entry["buffer"], entry.get("when"))
        else:
            raise RegistryError(f"{shown(path)}: constants.{symbol} must be a buffer name or {{buffer: name, when: condition}}, "
                                f"got {entry!r}")
    return constants


def _check_shapes(where: str, raw: dict[str, Any]) -> None:
    """The description's values have the shapes _parse reads them as, so that a wrong one is
    named instead of failing deep inside with a TypeError."""
    for key in MAPPING_KEYS:
        if raw.get(key) is not None and not isinstance(raw[key], dict):
            raise DescriptionError(f"{where}: {key} must be a mapping, not {raw[key]!r}")
    for key in LIST_KEYS:
        if raw.get(key) is not None and not isinstance(raw[key], list):
            raise DescriptionError(f"{where}: {key} must be a list, not {raw[key]!r}")
    for key in ("tunables", "supports"):
        for entry, values in (raw.get(key) or {}).items():
            if not isinstance(values, list):
                raise DescriptionError(f"{where}: {key}.{entry} must be a list of values, not {values!r}")
            if not values:
                raise DescriptionError(f"{where}: {key}.{entry} is empty: give at least one value")
    # A tunable that sizes the launch (a stage's block or grid) and a supported stride or filter size
    # are counts, and a tunable a define passes to the compiler a whole number: a word or a zero there
    # would fail every cell, or none as it should.
    sizing = " ".join(str(part) for stage in raw.get("stages") or [] if isinstance(stage, dict)
                      for part in [*(stage.get("block") or []), *(stage.get("grid") or [])])
    defined = " ".join(str(value) for value in (raw.get("defines") or {}).values())
    for key, name, values in [*(("tunables", *entry) for entry in (raw.get("tunables") or {}).items()),
                              *(("supports", *entry) for entry in (raw.get("supports") or {}).items())]:
        counts = key == "supports" or re.search(rf"\b{re.escape(str(name))}\b", sizing)
        whole = counts or re.search(rf"\b{re.escape(str(name))}\b", defined)
        least = 1 if counts else 0
        wrong = next((value for value in values
                      if isinstance(value, bool) or not isinstance(value, int) or value < least), None) if whole else None
        if wrong is not None:
            kind = "positive whole numbers" if counts else "whole numbers"
            raise DescriptionError(f"{where}: {key}.{name} must be {kind}, not {wrong!r}")


def _parse(name: str, path: Path) -> KernelSpec:
    raw = read_yaml_mapping(path)
    where = shown(path)
    _check_shapes(where, raw)
    unknown = set(raw) - KNOWN_KEYS
    if unknown:
        raise RegistryError(f"{where}: unknown keys {sorted(unknown)} (see kernels/README.md)")
    if raw.get("name") != name:
        raise RegistryError(f"{where}: name is {raw.get('name')!r}, the registry calls it {name!r}")
    source, library = raw.get("source"), raw.get("library")
    stages = list(raw.get("stages") or [])
    only_ops = bool(stages) and all("op" in stage for stage in stages if isinstance(stage, dict))
    if source and library or not (source or library or only_ops):
        raise RegistryError(f"{where}: give exactly one of 'source' (a .cu file) or 'library', "
                            "or only built-in `op` stages")
    if library and library not in LIBRARIES:
        raise RegistryError(f"{where}: unknown library {library!r} (known: {sorted(LIBRARIES)})")
    source_path = (path.parent / source) if source else None
    if source_path is not None and not source_path.is_file():
        raise RegistryError(f"{where}: source {shown(source_path)} does not exist")
    if source and not stages:
        raise RegistryError(f"{where}: a .cu kernel needs 'stages' (see kernels/README.md)")
    for index, stage in enumerate(stages):
        _check_stage(path, index, stage)
    experiments = tuple(raw.get("experiments") or (DEFAULT_FAMILY,))
    if set(experiments) - set(FAMILIES):
        raise RegistryError(f"{where}: experiments must be among {tuple(FAMILIES)}, got {list(experiments)}")
    for experiment in experiments:
        if FAMILIES[experiment].exclusive and len(experiments) > 1:
            raise RegistryError(f"{where}: a {experiment} kernel takes part in {experiment} only")
    layout = dict(raw.get("layout") or {})
    first = FAMILIES[experiments[0]]
    if first.kernel_layout is not None:
        if layout != first.kernel_layout:
            raise RegistryError(f"{where}: a {first.name} kernel's layout is {first.kernel_layout} "
                                f"({first.kernel_layout_note})")
    else:
        for key, allowed in LAYOUTS.items():
            if layout.get(key) not in allowed:
                raise RegistryError(f"{where}: layout.{key} must be one of {allowed}, got {layout.get(key)!r}")
    if raw.get("precision", "fp32") not in ("fp32", "tf32"):
        raise RegistryError(f"{where}: precision must be fp32 or tf32")
    supports = dict(raw.get("supports") or {})
    if set(supports) - SUPPORT_KEYS:
        raise RegistryError(f"{where}: supports takes {sorted(SUPPORT_KEYS)} only")
    twin = raw.get("cpu_twin")
    twin_path = None
    if twin:
        twin_path = next((folder / f"{twin}.py" for folder in (CPU_TWINS_DIR, path.parent)
                          if (folder / f"{twin}.py").is_file()), None)
        if twin_path is None:
            raise RegistryError(f"{where}: cpu_twin {twin!r} has no module {shown(CPU_TWINS_DIR / (twin + '.py'))}")
    return KernelSpec(
        name=name,
        summary=raw.get("summary", ""),
        description_path=path,
        layout=layout,
        precision=raw.get("precision", "fp32"),
        tunables={k: list(v) for k, v in (raw.get("tunables") or {}).items()},
        settings=dict(raw.get("settings") or {}),
        supports={k: list(v) for k, v in supports.items()},
        defines=dict(raw.get("defines") or {}),
        scratch=dict(raw.get("scratch") or {}),
        constants=_constants(path, raw.get("constants") or {}),
        stages=stages,
        source=source_path,
        library=library,
        cpu_twin=twin,
        twin_path=twin_path,
        experiments=experiments,
        requires=tuple(str(condition) for condition in raw.get("requires") or ()),
    )


def extra_kernel_dirs() -> tuple[Path, ...]:
    return tuple(Path(p).resolve() for p in os.environ.get(EXTRA_KERNELS_ENV, "").split(os.pathsep) if p)


def load_registry(kernels_dir: Path = KERNELS_DIR) -> dict[str, KernelSpec]:
    """The kernels of ``kernels_dir``, and of the folders CONVLAB_EXTRA_KERNELS names. Read once
    per process while its files stay as they were: a service warm across runs reads an edited
    description again."""
    folders = (kernels_dir, *extra_kernel_dirs())
    kept = _LOADED.get(folders)
    if kept is None or kept[1] != _stamps(kept[0]):
        files = [folder / "registry.yaml" for folder in folders]
        stamps = _stamps(files)  # before reading: an edit made meanwhile is read next time
        registry, descriptions = _read_registries(folders)
        files += descriptions
        kept = (files, stamps + _stamps(descriptions), registry)
        _LOADED[folders] = kept
    return kept[2]


# folders -> (the files read, their stamps, the registry they make)
_LOADED: dict[tuple[Path, ...], tuple[list[Path], tuple, dict[str, KernelSpec]]] = {}


def _stamps(files: list[Path]) -> tuple:
    stamps = []
    for path in files:
        try:
            info = path.stat()
            stamps.append((info.st_mtime_ns, info.st_size, info.st_ino))
        except OSError:
            stamps.append(None)
    return tuple(stamps)


def _read_registries(folders: tuple[Path, ...]) -> tuple[dict[str, KernelSpec], list[Path]]:
    """The registry of ``folders``, and the description files it read."""
    registry: dict[str, KernelSpec] = {}
    descriptions: list[Path] = []
    for folder in folders:
        index = folder / "registry.yaml"
        entries = read_yaml_mapping(index).get("kernels") or {}
        if not isinstance(entries, dict):
            raise DescriptionError(f"{shown(index)}: kernels must map each kernel's name to its description file")
        for name, desc in entries.items():
            if name in registry:
                raise RegistryError(f"{shown(index)}: kernel {name!r} is registered twice")
            if not isinstance(desc, str):
                raise DescriptionError(f"{shown(index)}: kernel {name!r} must name its description file, "
                                       f"not {desc!r}")
            if not (folder / desc).is_file():
                raise DescriptionError(f"{shown(index)}: kernel {name!r} names {shown(folder / desc)}, "
                                       "which does not exist")
            registry[name] = _parse(name, folder / desc)
            descriptions.append(folder / desc)
    return registry, descriptions


def read_kernel_folder(folder: Path) -> dict[str, KernelSpec]:
    """The kernels of one folder of its own (its registry.yaml), apart from the registry: a kept
    earlier version of a kernel, made a kernel again."""
    return _read_registries((Path(folder),))[0]


def get_kernel(name: str, kernels_dir: Path = KERNELS_DIR) -> KernelSpec:
    registry = load_registry(kernels_dir)
    if name not in registry:
        raise RegistryError(f"unknown kernel {name!r}; registered: {', '.join(sorted(registry))}")
    return registry[name]


def relative(path: Path) -> str:
    """A path relative to the repository root, as Snakemake inputs are written."""
    return str(Path(path).resolve().relative_to(REPO_ROOT))

"""A kernel version the results database keeps, made a kernel again: its description and source
written into a kernel folder of their own, under a name of their own, so that the registry
(CONVLAB_EXTRA_KERNELS) loads it beside the current version and a backend compiles and runs it.

Only a source kernel's version can run again this way: a library kernel's wrapper and a cpu twin
are modules of the package, which one process loads once. Where both versions of a pair come
from copies of their files (a preview: convlab watch), a cpu twin's version runs again too: its
module is copied under a name of its own, which the cpu backend loads from its file
(convlab.backends.cpu.load_twin), beside the other version's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path, PurePosixPath

import yaml

from convlab.codeversion import fingerprint_contents
from convlab.history import store
from convlab.paths import REPO_ROOT
from convlab.status import UserError

REGISTRY = "registry.yaml"


class VersionUnavailable(UserError, LookupError):
    """The version is not kept, or cannot run again; the message says which and why."""


def version_name(kernel: str, kernel_hash: str) -> str:
    """The name a restored version is registered under: the kernel's and its hash's."""
    return f"{kernel}@{kernel_hash}"


def restore_kernel_version(connection: sqlite3.Connection, kernel: str, kernel_hash: str, into: Path,
                           twins: bool = False) -> str:
    """Write version ``kernel_hash`` of ``kernel`` into the folder ``into`` (its registry.yaml, its
    description and its source); the name it is registered under. ``twins``: a cpu twin's version
    too (copy_kernel_version)."""
    files = store.kernel_version(connection, kernel_hash)
    if not files:
        raise VersionUnavailable(f"{kernel} version {kernel_hash} is not kept in the database (recorded before "
                                 "kernel files were kept)")
    if fingerprint_contents(files) != kernel_hash:
        raise VersionUnavailable(f"{kernel} version {kernel_hash}: its kept files do not hash to it")
    return copy_kernel_version(kernel, kernel_hash, files, into, twins)


def copy_kernel_version(kernel: str, tag: str, files: list[tuple[str, bytes | None]], into: Path,
                        twins: bool = False) -> str:
    """A source kernel's description and .cu (``files``) written into the folder ``into`` as a
    kernel of its own, named ``<kernel>@<tag>``; the name. ``twins``: a description and its cpu
    twin's module too, the module under a name of its own. VersionUnavailable for other files."""
    descriptions = [(path, data) for path, data in files if path.endswith(".yaml") and data is not None]
    sources = [(path, data) for path, data in files if path.endswith(".cu") and data is not None]
    twin_modules = [(path, data) for path, data in files if path.endswith(".py") and data is not None]
    if twins and len(descriptions) == 1 and len(twin_modules) == 1 and len(files) == 2:
        return _copy_twin_version(kernel, tag, descriptions[0], twin_modules[0][1], into)
    if len(descriptions) != 1 or len(sources) != 1 or len(files) != 2:
        raise VersionUnavailable(f"{kernel} version {tag} is not a source kernel's description and .cu "
                                 f"({', '.join(path for path, _ in files)}): only those run again")
    description = yaml.safe_load(descriptions[0][1].decode())
    name = version_name(kernel, tag)
    source = PurePosixPath(sources[0][0]).name
    description.update(name=name, source=source)
    into.mkdir(parents=True, exist_ok=True)
    (into / source).write_bytes(sources[0][1])
    (into / f"{name}.yaml").write_text(yaml.safe_dump(description, sort_keys=False))
    (into / REGISTRY).write_text(yaml.safe_dump({"kernels": {name: f"{name}.yaml"}}))
    return name


def _copy_twin_version(kernel: str, tag: str, description_file: tuple[str, bytes], twin: bytes, into: Path) -> str:
    """A description and its cpu twin's module written into ``into`` as a kernel of its own; the
    module under a name no other version has, so that the registry finds it there and not among
    the package's twins."""
    path, data = description_file
    try:
        description = yaml.safe_load(data.decode())
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise VersionUnavailable(f"{kernel} version {tag}: {path} is not a description ({error})") from None
    if not isinstance(description, dict) or not description.get("cpu_twin"):
        raise VersionUnavailable(f"{kernel} version {tag}: {path} names no cpu twin")
    name = version_name(kernel, tag)
    module = f"{description['cpu_twin']}_{tag}"
    description.update(name=name, cpu_twin=module)
    if description.get("source"):
        # the cpu runs the twin, never the .cu, which this version's files do not hold: the
        # description names the checkout's, so that the registry reads it as the kernel it is
        description["source"] = str(REPO_ROOT / PurePosixPath(path).parent / description["source"])
    into.mkdir(parents=True, exist_ok=True)
    (into / f"{module}.py").write_bytes(twin)
    (into / f"{name}.yaml").write_text(yaml.safe_dump(description, sort_keys=False))
    (into / REGISTRY).write_text(yaml.safe_dump({"kernels": {name: f"{name}.yaml"}}))
    return name

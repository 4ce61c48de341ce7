"""The kernel registry as a long-lived process reads it."""

from __future__ import annotations

import shutil

import pytest

from convlab.paths import KERNELS_DIR
from convlab.plan.registry import load_registry


def test_an_edited_description_is_read_again_by_a_long_lived_process(tmp_path):
    """A service warm across runs asks the registry for every cell: unchanged files are not read
    again, an edited description is."""
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNELS_DIR, kernels)
    first = load_registry(kernels)
    assert load_registry(kernels) is first
    description = kernels / "direct.yaml"
    description.write_text(description.read_text().replace("block: [8, 16, 32]", "block: [8, 16]"))
    again = load_registry(kernels)
    assert again is not first
    assert again["direct"].tunables["block"] == [8, 16] and first["direct"].tunables["block"] == [8, 16, 32]


def test_a_kept_kernel_version_is_restored_as_a_kernel_of_its_own(tmp_path):
    """The database keeps a version's files by its hash; restored, the registry loads it beside the
    current one, its source byte for byte."""
    from convlab.codeversion import file_contents, fingerprint
    from convlab.history import store
    from convlab.history.kernelversions import VersionUnavailable, restore_kernel_version
    from convlab.paths import REPO_ROOT

    current = load_registry()["direct"]
    files = current.files("cuda")
    kernel_hash = fingerprint(files, root=REPO_ROOT)
    connection, _ = store.open_for_writing(tmp_path / "history.sqlite")
    store.add_measurements(connection, "host", [], {kernel_hash: file_contents(files, root=REPO_ROOT)})
    name = restore_kernel_version(connection, "direct", kernel_hash, tmp_path / "old")
    restored = load_registry(tmp_path / "old")[name]
    assert name == f"direct@{kernel_hash}"
    assert restored.source.read_bytes() == current.source.read_bytes()
    assert restored.stages == current.stages and restored.tunables == current.tunables
    with pytest.raises(VersionUnavailable, match="not kept"):
        restore_kernel_version(connection, "direct", "0" * 12, tmp_path / "none")
    cpu_files = current.files("cpu")
    cpu_hash = fingerprint(cpu_files, root=REPO_ROOT)
    store.add_measurements(connection, "host", [], {cpu_hash: file_contents(cpu_files, root=REPO_ROOT)})
    with pytest.raises(VersionUnavailable, match="only those run again"):
        restore_kernel_version(connection, "direct", cpu_hash, tmp_path / "twin")

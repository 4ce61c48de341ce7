"""The kernel registry as a long-lived process reads it."""

from __future__ import annotations

import shutil

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

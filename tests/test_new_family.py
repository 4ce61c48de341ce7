"""A new experiment family is its module, its operands' entry, its schema and its config section: with only
those (and a kernel that takes part), the config validates, the grid has its cells under their own path, the
registry accepts its kernel and a cell measures to an ok row. Nothing else in the package is edited (the
report's entry, convlab.report.familydisplay, is the report's alone)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import convlab.plan.config as config_module
from convlab.backends.cpu import CpuBackend
from convlab.plan.cell import Cell
from convlab.plan.config import validate_config
from convlab.plan.families import FAMILIES
from convlab.plan.families.base import Family
from convlab.plan.families.inputs import OPERANDS
from convlab.plan.grid import build_cells
from convlab.plan.operands import GemmOperands
from convlab.problem.geometry import GemmProblem
from convlab.run.runner import run_cell


class RectangularGemm(Family):
    """A toy family, as its own module would hold it: C (m x n) = A (m x k) @ B (k x n)."""

    name = "rect_gemm"
    problem_columns = ("gemm_m", "gemm_n", "gemm_k")
    kernel_layout = {"input": "rowmajor", "weights": "rowmajor", "output": "rowmajor"}
    kernel_layout_note = "a, b and output row-major"
    exclusive = True
    size_overrides = False

    def problems(self, section: dict, config: dict) -> Iterator[dict]:
        for m, n, k in itertools.product(section["m"], section["n"], section["k"]):
            # the Cell's generic fields carry the shape: size = m, width = n, in_channels = k
            yield dict(size=m, width=n, in_channels=k, stride=0, filter_size=0, padding=0, out_channels=0,
                       filter="random")

    def path_fragment(self, cell: Cell) -> str:
        return f"shape~{cell.size}x{cell.width}x{cell.in_channels}"


def rectangular_operands(cell: Cell, image_path: str | Path | None) -> GemmOperands:
    """The toy family's entry in OPERANDS: random A and B."""
    rng = np.random.default_rng(cell.verify["seed"])
    m, n, k = cell.size, cell.width, cell.in_channels
    a = rng.uniform(-1.0, 1.0, (m, k)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (k, n)).astype(np.float32)
    return GemmOperands(GemmProblem(m, n, k), a, b)


SCHEMA = """
section:
  description: A toy family of rectangular GEMMs.
  type: object
  additionalProperties: false
  default: {}
  properties:
    enabled: {type: boolean, default: true}
    m: {type: array, items: {type: integer, minimum: 1}, default: [48]}
    n: {type: array, items: {type: integer, minimum: 1}, default: [40]}
    k: {type: array, items: {type: integer, minimum: 1}, default: [24]}
    kernels: {oneOf: [{const: all}, {type: array, items: {type: string}}], default: all}
"""

KERNEL = """
name: rect_blas
summary: "A BLAS matmul of the toy family."
experiments: [rect_gemm]
layout: {input: rowmajor, weights: rowmajor, output: rowmajor}
precision: fp32
stages:
  - name: gemm
    op: matmul
    a: [a, M, K]
    b: [b, K, N]
    out: [output, M, N]
cpu_twin: matmul_blas
"""


@pytest.fixture
def new_family(tmp_path, monkeypatch):
    """The toy family and its operands in their tables, its schema file, and a kernel folder with one kernel of
    it."""
    monkeypatch.setitem(FAMILIES, RectangularGemm.name, RectangularGemm())
    monkeypatch.setitem(OPERANDS, RectangularGemm.name, rectangular_operands)
    schema = tmp_path / "rect_gemm.schema.yaml"
    schema.write_text(SCHEMA)
    shipped = config_module.family_schema_path
    monkeypatch.setattr(config_module, "family_schema_path",
                        lambda family: schema if family == RectangularGemm.name else shipped(family))
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "registry.yaml").write_text("kernels:\n  rect_blas: rect_blas.yaml\n")
    (kernels / "rect_blas.yaml").write_text(KERNEL)
    monkeypatch.setenv("CONVLAB_EXTRA_KERNELS", str(kernels))


def _only_the_new_family(**section) -> dict:
    others = {name: {"enabled": False} for name in FAMILIES if name != RectangularGemm.name}
    return validate_config({**others, RectangularGemm.name: section, "backend": "cpu"})


def test_its_config_section_is_validated_with_its_schema(new_family):
    config = _only_the_new_family(m=[32, 64])
    assert config["rect_gemm"] == {"enabled": True, "m": [32, 64], "n": [40], "k": [24], "kernels": "all"}
    with pytest.raises(config_module.ConfigError, match="rect_gemm"):
        _only_the_new_family(rows=[3])


def test_its_cells_are_in_the_grid_under_their_own_path_and_measure_ok(new_family):
    cells = build_cells(_only_the_new_family(m=[32, 64]), "cpu")
    assert [cell.path for cell in cells] == [
        f"results/local/cells/cpu/rect_gemm/kernel~rect_blas/shape~{m}x40x24/default.csv" for m in (32, 64)]
    row = run_cell(cells[0], backend=CpuBackend())
    assert row["status"] == "ok", row["reason"]
    assert (row["gemm_m"], row["gemm_n"], row["gemm_k"]) == (32, 40, 24)
    assert row["max_rel_err"] < 1e-5

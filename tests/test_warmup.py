"""A worker's warm-up (convlab.run.warmup): it covers every layout and kind of problem a
registered kernel's cells have, leaves nothing kept and the device's lock free, and a service's
worker does it after its hello, before its first cell, which is measured as before."""

from __future__ import annotations

import fcntl
import os

import pytest
from service_helpers import ServiceSandbox, read_row

from convlab.backends import get_backend
from convlab.backends.devicelock import lock_path
from convlab.plan.operands import ConvOperands, GemmOperands
from convlab.plan.problemcache import PROBLEMS
from convlab.plan.registry import load_registry
from convlab.run import warmup
from convlab.run.warmup import warm_problems, warm_up


def test_the_warm_problems_cover_every_registered_kernels_layouts_and_problem_kinds():
    warmed = list(warm_problems())
    conv_layouts = {(layout["input"], layout["output"]) for operands, layout in warmed
                    if isinstance(operands, ConvOperands)}
    inputs = {pair[0] for pair in conv_layouts}
    outputs = {pair[1] for pair in conv_layouts}
    # CuPy builds its kernels per rank: an output in each layout, one picture and a batch of them
    batched = {(operands.problem.batched, layout["output"]) for operands, layout in warmed
               if isinstance(operands, ConvOperands)}
    for spec in load_registry().values():
        if spec.layout.get("input") == "rowmajor":
            assert any(isinstance(operands, GemmOperands) for operands, _ in warmed), spec.name
            continue
        assert spec.layout["input"] in inputs and spec.layout["output"] in outputs, (spec.name, spec.layout)
        for is_batched in (False, True):
            assert (is_batched, spec.layout["output"]) in batched, (spec.name, is_batched)


def test_the_warm_problems_are_never_zeros():
    for operands, _ in warm_problems():
        arrays = (operands.image, operands.weights) if isinstance(operands, ConvOperands) else (operands.a, operands.b)
        assert all(float(abs(array).min()) > 0 for array in arrays)


def test_a_warm_up_compares_each_problem_and_leaves_nothing_kept_and_the_lock_free(monkeypatch):
    compared = []
    real_compare = warmup.compare

    def counting_compare(output, reference, tolerance, xp):
        compared.append((tuple(output.shape), tuple(reference.shape)))
        return real_compare(output, reference, tolerance, xp)

    monkeypatch.setattr(warmup, "compare", counting_compare)
    backend = get_backend("cpu")
    kept_before = len(PROBLEMS)
    assert warm_up(backend) > 0
    assert len(compared) == 2 * len(list(warm_problems()))  # each problem twice: made, then kept
    assert all(output == reference for output, reference in compared)
    assert len(PROBLEMS) == kept_before
    descriptor = os.open(lock_path(backend.device_key()), os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the warm-up still held it
    finally:
        os.close(descriptor)


@pytest.fixture
def sandbox(tmp_path):
    box = ServiceSandbox(tmp_path, "cpu")
    yield box
    box.close()


def test_a_service_worker_warms_up_before_its_first_cell_which_is_measured_as_before(sandbox, tmp_path):
    out = tmp_path / "row.csv"
    result = sandbox.run(sandbox.cell("direct"), out)
    assert result.returncode == 0, result.stderr
    assert read_row(out)["status"] == "ok"
    assert "cpu worker 0: warmed up in " in sandbox.logs()

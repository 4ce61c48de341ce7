"""Running cell jobs against a private measurement service: its own runtime folder, the tests'
faulty kernels registered, and every service it started stopped afterwards."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
from workflow_helpers import VOLATILE, convlab

from convlab.plan.cell import Cell
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells

REPO = Path(__file__).resolve().parents[1]
FAULT_KERNELS = REPO / "tests" / "kernels"


class ServiceSandbox:
    """A runtime folder of its own, so that tests never meet another service, and the environment
    cell jobs run with."""

    def __init__(self, root: Path, backend: str) -> None:
        self.root, self.backend = root, backend
        self.runtime = root / "run"
        self.runtime.mkdir(mode=0o700)
        self.image = root / "input_64.png"
        cv2.imwrite(str(self.image), np.random.default_rng(5).integers(0, 256, (64, 64, 3), dtype=np.uint8))
        python_path = os.pathsep.join(filter(None, [str(REPO / "workflow"), os.environ.get("PYTHONPATH")]))
        self.env = dict(os.environ, PYTHONPATH=python_path, CONVLAB_RUNTIME_DIR=str(self.runtime),
                        CONVLAB_EXTRA_KERNELS=str(FAULT_KERNELS), CONVLAB_SERVICE_IDLE_S="30",
                        CONVLAB_CELL_TIMEOUT_S="120")
        self.env.pop("CONVLAB_SERVICE", None)

    def cell(self, kernel: str, size: int = 64, stride: int = 1, block: int = 16) -> Cell:
        """One cell of ``kernel`` (on cuda, with this block edge where the kernel takes one)."""
        # as it was afterwards: a test that took the sandbox's environment keeps it, and so finds its
        # service where a job with that environment looks
        before = os.environ.get("CONVLAB_EXTRA_KERNELS")
        os.environ["CONVLAB_EXTRA_KERNELS"] = str(FAULT_KERNELS)
        try:
            from convlab.plan.registry import get_kernel

            tunables = get_kernel(kernel).tunables
            overrides = {kernel: {"block": [block]}} if "block" in tunables else {}
            if "plan" in tunables:
                overrides = {kernel: {"plan": ["heuristic"]}}
            config = validate_config({
                "kernels": overrides,
                "backend": self.backend, "source_size": 64,
                "conv2d": {"sizes": [size], "strides": [stride], "kernels": [kernel]},
                "cpu": {"sizes": [size], "budget_s": 0.05, "tiling": {"sizes": [64]}},
                "tiling": {"enabled": False}, "winograd_layers": {"enabled": False}, "gemm": {"enabled": False},
                "timing": {"budget_s": 0.05, "min_reps": 3, "e2e_reps": 1}})
            (cell,) = build_cells(config, self.backend)
        finally:
            if before is None:
                os.environ.pop("CONVLAB_EXTRA_KERNELS", None)
            else:
                os.environ["CONVLAB_EXTRA_KERNELS"] = before
        return cell

    def command(self, cell: Cell, out: Path, image: Path | None = None) -> list[str]:
        image = self.image if image is None else image
        # `python -S`, as the cell rule runs it
        return [sys.executable, "-S", "-m", "convlab", "cell", "--spec", cell.to_json(), "--image", str(image),
                "--out", str(out)]

    def run(self, cell: Cell, out: Path, image: Path | None = None, timeout: float = 300,
            **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(cell, out, image), env={**self.env, **env}, cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)

    def start(self, cell: Cell, out: Path, **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(cell, out), env={**self.env, **env}, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def convlab(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return convlab(*args, service=None, timeout=120, **{**self.env, **env})

    def info(self) -> dict:
        """The running service's record (pid, identity), waiting a little for it to appear."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for path in self.runtime.glob("*.json"):
                try:
                    return json.loads(path.read_text())
                except (OSError, json.JSONDecodeError):
                    pass
            time.sleep(0.05)
        raise AssertionError(f"no service record in {self.runtime}")

    def status(self) -> dict:
        result = self.convlab("serve", "--status")
        assert result.returncode == 0, result.stdout + result.stderr
        return json.loads(result.stdout)

    def logs(self) -> str:
        return "".join(path.read_text(errors="replace") for path in self.runtime.glob("*.log"))

    def close(self) -> None:
        self.convlab("serve", "--stop", "--quiet")
        for path in self.runtime.glob("*.json"):
            try:
                os.kill(int(json.loads(path.read_text())["pid"]), signal.SIGKILL)
            except (OSError, ValueError, KeyError, json.JSONDecodeError):
                pass


def read_row(path: Path) -> dict[str, str]:
    with open(path, newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    return row


def stable_part(row: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in row.items() if key not in VOLATILE}


def wait_for_exit(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def differences(row: dict[str, str], reference: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The stable columns in which two rows differ: (row's value, reference's value)."""
    mine, theirs = stable_part(row), stable_part(reference)
    return {key: (mine.get(key), theirs.get(key)) for key in mine.keys() | theirs.keys() if mine.get(key) != theirs.get(key)}


def check_a_hang_times_out(sandbox: ServiceSandbox, out_dir: Path, timeout_s: int, within_s: float) -> None:
    """A hung kernel becomes an `error` row after ``timeout_s`` (the whole job within
    ``within_s``), and the next cell on that device is measured, ok."""
    started = time.monotonic()
    hung = sandbox.run(sandbox.cell("fault_hang"), out_dir / "hung.csv", CONVLAB_CELL_TIMEOUT_S=str(timeout_s))
    assert hung.returncode == 0, hung.stderr
    row = read_row(out_dir / "hung.csv")
    assert (row["status"], row["reason"]) == ("error", f"timeout after {timeout_s} s")
    assert time.monotonic() - started < within_s
    assert sandbox.run(sandbox.cell("direct"), out_dir / "next.csv").returncode == 0
    assert read_row(out_dir / "next.csv")["status"] == "ok"

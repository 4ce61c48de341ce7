"""`convlab watch --once` on a real GPU (marker gpu): after a run has recorded a kernel, a planted
slow-down in its .cu is SLOWER in the preview, paired with the recorded version, writes nothing
under results/, and is SLOWER in the run after it, both saying why (its FMAs, by Nsight Compute,
the config's verdicts.why; `--no-why` says none), as `compare @previous @latest --why` does from the
database's two versions; a syntax error in the .cu is one block naming
the file and the line."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
import yaml
from gpu_helpers import planted_slow_down
from workflow_helpers import convlab, copy_repo, latest_verdicts, one_gpu, run_to_verdicts, snakemake_env

pytestmark = [pytest.mark.gpu, pytest.mark.pipeline]
DEVICE = "gpu-watch-test"
CONFIG = "config/watch-gpu.yaml"
KERNEL = "sgemm_shared"
PLANTED = planted_slow_down("M", 4096, "C[0]")
ANCHOR = "    if (row < M && col < N) C[(i64)row * N + col] = sum;\n"
BROKEN = ("    float sum = 0.0f;\n", "    float sum = ;\n")


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """A checkout whose run recorded one SGEMM cell (random data: no picture to make)."""
    repo = copy_repo(tmp_path_factory.mktemp("gpu-watch") / "repo")
    config = {"backend": "cuda", "device": DEVICE, "gemm": {"sizes": [1024], "kernels": [KERNEL]},
              "kernels": {KERNEL: {"block": [16]}}, "verdicts": {"why": True},
              **{family: {"enabled": False} for family in ("conv2d", "tiling", "winograd_layers")}}
    (repo / CONFIG).write_text(yaml.safe_dump(config))
    run_to_verdicts(repo, DEVICE, CONFIG)
    return repo


def preview(repo: Path, *args: str):
    """`convlab watch --once` in ``repo``, through its measurement service."""
    package = os.pathsep.join(filter(None, [str(repo / "workflow"), os.environ.get("PYTHONPATH")]))
    return convlab("watch", "--once", "--configfile", CONFIG, *args, cwd=repo, service=None, timeout=300,
                   PYTHONPATH=package, TMPDIR=snakemake_env(repo)["TMPDIR"], **one_gpu())


def results_tree(repo: Path) -> dict[str, tuple[bytes, int]]:
    return {str(path.relative_to(repo)): (path.read_bytes(), path.stat().st_mtime_ns)
            for path in sorted((repo / "results").rglob("*")) if path.is_file()}


def test_a_planted_slow_down_in_a_cu_is_slower_in_the_preview_and_in_the_run_after_it(lab):
    source = lab / "kernels" / f"{KERNEL}.cu"
    original = source.read_text()
    assert ANCHOR in original
    source.write_text(original.replace(ANCHOR, PLANTED + ANCHOR, 1))
    try:
        before = results_tree(lab)
        without_why = preview(lab, "--fail-on", "slower", "--no-why")
        result = preview(lab, "--fail-on", "slower")  # the config's verdicts.why: true
        after = results_tree(lab)
        run_to_verdicts(lab, DEVICE, CONFIG)
        recorded = latest_verdicts(lab, DEVICE)
        # the two runs' versions, restored from the database, explained on request
        package = os.pathsep.join(filter(None, [str(lab / "workflow"), os.environ.get("PYTHONPATH")]))
        compared = convlab("compare", "@previous", "@latest", "--why", "--floor", "0.03", cwd=lab, PYTHONPATH=package,
                           **one_gpu())
        with open(lab / f"results/{DEVICE}/verdicts/latest.csv", newline="") as handle:
            (run_row,) = list(csv.DictReader(handle))
    finally:
        source.write_text(original)
    print(without_why.stdout)
    print(result.stdout)
    assert list(recorded.values()) == ["SLOWER"], recorded
    # why, in the preview and in the run: the planted FMAs, a thread each, and the bytes unchanged
    assert not [line for line in without_why.stdout.splitlines() if "why:" in line], without_why.stdout
    why = [line.strip() for line in result.stdout.splitlines() if "why: " in line]
    assert len(why) == 1 and why[0].startswith(f"{KERNEL}: why: instructions executed +"), result.stdout
    said = result.stdout.splitlines()  # the verdict first, its why after it
    assert said.index(next(line for line in said if line.startswith(f"  {KERNEL} "))) < said.index(f"  {why[0]}")
    assert "(FMA +4096 a thread)" in why[0] and "DRAM bytes same" in why[0], why
    assert run_row["why"].startswith("why: instructions executed +") and "(FMA +4096 a thread)" in run_row["why"]
    assert float(run_row["why_fma_per_thread_new"]) - float(run_row["why_fma_per_thread_previous"]) >= 4096 * 0.95
    print(compared.stdout)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    why = [line.strip() for line in compared.stdout.splitlines() if "why: " in line]
    assert len(why) == 1 and "why: instructions executed +" in why[0] and "(FMA +4096 a thread)" in why[0], why
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith(f"preview verdict: 1 cells of {DEVICE} re-measured") for line in lines), lines
    kernel_line = next(line for line in lines if line.startswith(f"  {KERNEL} "))
    assert "1 SLOWER" in kernel_line and "1 paired" in kernel_line and "changed: kernel files" in kernel_line
    assert after == before
    assert "Traceback" not in result.stderr


def test_a_syntax_error_in_a_cu_is_one_block_with_its_file_and_line(lab):
    source = lab / "kernels" / f"{KERNEL}.cu"
    original = source.read_text()
    assert BROKEN[0] in original
    source.write_text(original.replace(*BROKEN, 1))
    line = original.splitlines().index(BROKEN[0].rstrip("\n")) + 1
    try:
        result = preview(lab)
    finally:
        source.write_text(original)
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith("compile error: "))
    assert lines[start].startswith(f"compile error: kernels/{KERNEL}.cu:{line}: error"), lines[start]
    assert lines[start + 1].split("|", 1)[1].strip() == BROKEN[1].strip()
    assert sum(text.startswith("compile error: ") for text in lines) == 1
    assert not any(text.startswith("preview verdict") for text in lines)
    assert "Traceback" not in result.stderr

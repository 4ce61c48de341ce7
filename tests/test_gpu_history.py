"""On a real GPU: a planted slow-down in a kernel's source is SLOWER in every cell it touches,
and taking it out again is FASTER, in the verdict the run ends with (marker gpu)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from gpu_helpers import planted_slow_down
from workflow_helpers import REPO, copy_repo, latest_verdicts, run_to_verdicts

pytestmark = [pytest.mark.gpu, pytest.mark.pipeline]
DEVICE = "gpu-history-test"
PLANTED = planted_slow_down("H", 512, "output[0]")
ANCHOR = "    float acc[CONV_K];\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    repo = copy_repo(tmp_path_factory.mktemp("gpu-history") / "repo")
    for picture in [*(REPO / "data").glob("*.png"), *(REPO / "data").glob("*.json")]:  # no ffmpeg on a device: the pictures and their records
        (repo / "data").mkdir(exist_ok=True)
        shutil.copy2(picture, repo / "data" / picture.name)
    config = {"backend": "cuda", "device": DEVICE, "conv2d": {"sizes": [1024, 2048], "strides": [1, 2],
                                                              "kernels": ["direct"]},
              "kernels": {"direct": {"block": [16]}},
              "tiling": {"enabled": False}, "winograd_layers": {"enabled": False}, "gemm": {"enabled": False}}
    (repo / "config" / "history-gpu.yaml").write_text(yaml.safe_dump(config))
    return repo


def verdict_lines(text: str) -> list[str]:
    """The verdict a run ends with: its first line and the indented lines under it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("verdict: "))
    return [lines[start], *[line for line in lines[start + 1:start + 15] if line.startswith("  ")]]


def run(repo: Path) -> str:
    result = run_to_verdicts(repo, DEVICE, "config/history-gpu.yaml")
    return result.stdout + result.stderr


def test_a_planted_slow_down_is_slower_in_every_cell_and_its_removal_faster(lab):
    run(lab)
    source = lab / "kernels" / "direct.cu"
    original = source.read_text()
    assert ANCHOR in original
    source.write_text(original.replace(ANCHOR, ANCHOR + PLANTED, 1))
    slowed = run(lab)
    judged = latest_verdicts(lab, DEVICE)
    assert len(judged) == 4 and set(judged.values()) == {"SLOWER"}, judged
    print("\n".join(verdict_lines(slowed)))
    assert "4 SLOWER" in verdict_lines(slowed)[0] and "changed: kernel files" in verdict_lines(slowed)[1]
    source.write_text(original)
    restored = run(lab)
    judged = latest_verdicts(lab, DEVICE)
    assert len(judged) == 4 and set(judged.values()) == {"FASTER"}, judged
    print("\n".join(verdict_lines(restored)))
    assert "4 FASTER" in verdict_lines(restored)[0]

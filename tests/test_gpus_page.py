"""The page comparing every device folder under results/ (cpu, from synthetic summaries)."""

from __future__ import annotations

import json

import pandas as pd

from convlab.measure.row import COLUMNS
from convlab.report.gpus import device_summaries, gpus_html, pair_table


def summary(folder, device: str, scale: float) -> None:
    rows = []
    for kernel in ("direct", "cudnn"):
        for size in (1024, 4096):
            ms = size / 1000 * scale
            rows.append({**dict.fromkeys(COLUMNS, ""), "experiment": "conv2d", "kernel": kernel, "variant": "default",
                         "backend": "cuda", "size": size, "stride": 1, "filter_size": 3, "status": "ok",
                         "kernel_ms": ms, "kernel_ms_iqr": ms * 0.01, "device": device, "throttled": "no"})
    folder.mkdir(parents=True)
    pd.DataFrame(rows, columns=COLUMNS).to_csv(folder / "summary.csv", index=False)
    (folder / "device").mkdir()
    (folder / "device" / "cuda_copy_bandwidth.json").write_text(json.dumps({"device": device, "copy_gbps": 4000.0}))


def test_every_device_folder_is_listed_and_each_pair_compared(tmp_path):
    summary(tmp_path / "h100", "NVIDIA H100", 1.0)
    summary(tmp_path / "h200", "NVIDIA H200", 0.5)
    (tmp_path / "logs").mkdir()  # not a device: no summary
    assert list(device_summaries(tmp_path)) == ["h100", "h200"]
    pairs, per_kernel = pair_table(device_summaries(tmp_path))
    assert pairs.loc[0, "geomean B/A"] == 0.5 and pairs.loc[0, "FASTER"] == 4 and pairs.loc[0, "SAME"] == 0
    page = gpus_html(tmp_path)
    assert "NVIDIA H100" in page and "NVIDIA H200" in page and "4000 GB/s" in page
    assert "conv2d direct: geomean B/A 0.50 over 2 cells; 2 FASTER" in page


def test_one_device_says_what_to_do(tmp_path):
    summary(tmp_path / "h100", "NVIDIA H100", 1.0)
    assert "Only one device has results here" in gpus_html(tmp_path)

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


def test_the_seed_column_names_the_ratio_as_it_is_computed(tmp_path):
    """A seed time of 2 ms against 1 ms here is a ratio of 2: this device is faster, and the column's
    name says which way the ratio goes."""
    from convlab.report.gpus import SPEED_RATIO, seed_table

    summary(tmp_path / "h200", "NVIDIA H200", 1.0)
    (tmp_path / "h200" / "seeds").mkdir()
    pd.DataFrame([{"seed": "001", "seed_gpu": "RTX 3050", "unit": "ms", "seed_value": 2.0, "this_value": 1.0,
                   "ratio": 2.0}]).to_csv(tmp_path / "h200" / "seeds" / "comparison.csv", index=False)
    table = seed_table({"h200": tmp_path / "h200" / "summary.csv"})
    assert table[SPEED_RATIO].tolist() == [2.0]
    assert SPEED_RATIO.startswith("median speed ratio (seed time / this time") and "> 1: faster here" in SPEED_RATIO

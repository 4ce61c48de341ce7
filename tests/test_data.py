"""Input images through ffmpeg (the system's, or the imageio-ffmpeg wheel's)."""

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from convlab.pictures import source as data


def test_generated_source_is_deterministic_and_textured(tmp_path: Path):
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    data.generate_source(first, 256)
    data.generate_source(second, 256)
    a, b = cv2.imread(str(first)), cv2.imread(str(second))
    assert a.shape == (256, 256, 3)
    assert np.array_equal(a, b)
    # real edges and texture, not a flat pattern: a Laplacian finds many strong responses
    edges = np.abs(cv2.Laplacian(cv2.cvtColor(a, cv2.COLOR_BGR2GRAY), cv2.CV_32F))
    assert (edges > 20).mean() > 0.01
    assert len(np.unique(a.reshape(-1, 3), axis=0)) > 500
    record = json.loads((tmp_path / "a.json").read_text())  # the sidecar says how it was made
    assert record["source_image"] is None and "mandelbrot" in record["generated"]
    assert record["conversions"] == []


def test_downscale_makes_the_requested_size(tmp_path: Path):
    source = tmp_path / "source.png"
    data.generate_source(source, 128)
    data.downscale(source, tmp_path / "input_48.png", 48)
    assert cv2.imread(str(tmp_path / "input_48.png")).shape == (48, 48, 3)


def test_user_image_is_brought_to_square_rgb(tmp_path: Path):
    user = tmp_path / "photo.png"
    cv2.imwrite(str(user), np.random.default_rng(0).integers(0, 256, (90, 120, 4), dtype=np.uint8))  # RGBA
    record = data.import_source(user, tmp_path / "source.png", 64)
    assert cv2.imread(str(tmp_path / "source.png"), cv2.IMREAD_UNCHANGED).shape == (64, 64, 3)
    assert record["original"] == {"width": 120, "height": 90, "channels": 4, "bit_depth": 8}
    assert json.loads((tmp_path / "source.json").read_text()) == record


def test_downscale_refuses_to_upscale(tmp_path: Path):
    source = tmp_path / "source_64.png"
    data.generate_source(source, 64)
    with pytest.raises(data.DataError, match="raise config source_size to at least 96"):
        data.downscale(source, tmp_path / "input_96.png", 96)


def test_missing_user_image_names_the_key(tmp_path: Path):
    with pytest.raises(data.DataError, match="source_image"):
        data.import_source(tmp_path / "nope.png", tmp_path / "source.png", 64)


def test_ffmpeg_is_found_without_a_system_install(monkeypatch):
    monkeypatch.setattr(data.shutil, "which", lambda name: None)
    assert Path(data.ffmpeg_executable()).is_file()

"""A source picture larger than ffmpeg can scale is refused up front, from its header and before it
is decoded, with the limit in its one line; an ffmpeg step that fails all the same ends with
ffmpeg's cause, not its last line, and keeps the rest of what ffmpeg said before it."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import pytest
from workflow_helpers import assert_no_traceback, assert_refused_before_the_dag, convlab

from convlab.pictures import source as data
from convlab.pictures.header import FFMPEG_MAX_EDGE, header_size

PNG_BILEVEL = 0  # IHDR colour type grey, at bit depth 1: a huge picture in a small, quickly made file


def huge_png(path: Path, width: int, height: int) -> Path:
    """An all-black 1-bit PNG, compressed a row at a time (the whole picture is never in memory)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    compressor = zlib.compressobj(1)
    row = bytes(1 + (width + 7) // 8)  # filter byte 0, then the row's bits
    stream = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, PNG_BILEVEL, 0, 0, 0)
    path.write_bytes(data.PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", stream) + chunk(b"IEND", b""))
    return path


@pytest.fixture(scope="module")
def huge(tmp_path_factory) -> Path:
    return huge_png(tmp_path_factory.mktemp("huge") / "photo.png", 20000, 20000)


def too_large(picture: Path) -> str:
    return (f"error: config source_image: {picture}: 20000x20000 is larger than ffmpeg scales (at most "
            f"{FFMPEG_MAX_EDGE}x{FFMPEG_MAX_EDGE}); scale it down to at most {FFMPEG_MAX_EDGE} pixels a side, "
            "or set source_image: null to generate one")


def test_the_size_comes_from_the_header(huge):
    assert header_size(huge) == (20000, 20000)
    assert header_size(Path(__file__)) is None  # no picture: left to OpenCV, which refuses it


def test_a_picture_too_large_for_ffmpeg_is_refused_before_it_is_decoded(huge, monkeypatch):
    def decode(*args):
        raise AssertionError("the picture was decoded")

    monkeypatch.setattr(cv2, "imread", decode)
    with pytest.raises(data.DataError) as raised:
        data.check_source_image(huge, huge.with_suffix(".json"))
    assert f"error: {raised.value}" == too_large(huge)


def test_the_source_command_refuses_it_in_one_line(huge, tmp_path):
    result = convlab("source", "--size", "64", "--user-image", str(huge), "--out", str(tmp_path / "source_64.png"))
    assert result.returncode == 2
    assert_no_traceback(result)
    assert result.stderr.splitlines() == [too_large(huge)]


def test_only_the_square_it_is_cropped_to_counts(tmp_path):
    picture = tmp_path / "wide.png"
    data.refuse_too_large(picture, 40000, FFMPEG_MAX_EDGE)
    with pytest.raises(data.DataError) as raised:
        data.refuse_too_large(picture, 40000, FFMPEG_MAX_EDGE + 1)
    assert str(raised.value) == (
        f"config source_image: {picture}: 40000x16256 is centre-cropped to 16256x16256, larger than ffmpeg scales "
        f"(at most {FFMPEG_MAX_EDGE}x{FFMPEG_MAX_EDGE}); scale it down to at most {FFMPEG_MAX_EDGE} pixels on its "
        "shorter side, or set source_image: null to generate one")


FFMPEG_OUTPUT = """\
[IMGUTILS @ 0x7fff7153bce0] Picture size 20000x20000 is invalid
[png @ 0x55c18898da40] [IMGUTILS @ 0x7fff7153b5f0] Picture size 20000x20000 is invalid
[png @ 0x55c18898da40] Invalid image size
[vist#0:0/png @ 0x55c188990c00] [dec:png @ 0x55c188988500] Decoding error: Invalid data found when processing input
[out#0/image2 @ 0x55c18898eac0] Nothing was written into output file, because at least one of its streams received \
no packets.
"""


def test_the_cause_of_an_ffmpeg_failure_is_its_first_line():
    assert data.ffmpeg_cause(FFMPEG_OUTPUT) == "Picture size 20000x20000 is invalid"
    assert data.ffmpeg_cause("/x/y.png: No such file or directory\n") == "/x/y.png: No such file or directory"
    assert data.ffmpeg_cause("") == ""


def test_a_failed_ffmpeg_step_ends_with_its_cause_and_keeps_the_rest(tmp_path):
    """What the rule's log keeps and, as its last line, what the terminal shows."""
    source = huge_png(tmp_path / "source_16256.png", FFMPEG_MAX_EDGE + 1, FFMPEG_MAX_EDGE + 1)
    result = convlab("downscale", "--source", str(source), "--size", "64", "--out", str(tmp_path / "input_64.png"))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[-1] == f"error: ffmpeg failed to scale {source} to 64x64: Picture size 16256x16256 is invalid"
    assert any("Nothing was written into output file" in line for line in lines[:-1]), result.stderr


@pytest.mark.pipeline
def test_ffmpeg_scales_the_largest_square_and_no_larger(tmp_path):
    """The limit is ffmpeg's own: the pipeline's scale of a picture of FFMPEG_MAX_EDGE pixels a side
    works, one pixel more is "Picture size ... is invalid"."""
    largest = huge_png(tmp_path / "largest.png", FFMPEG_MAX_EDGE, FFMPEG_MAX_EDGE)
    data.downscale(largest, tmp_path / "input_64.png", 64, warn=lambda text: None)
    assert header_size(tmp_path / "input_64.png") == (64, 64)
    larger = huge_png(tmp_path / "larger.png", FFMPEG_MAX_EDGE + 1, FFMPEG_MAX_EDGE + 1)
    with pytest.raises(data.DataError, match="Picture size 16256x16256 is invalid$"):
        data.downscale(larger, tmp_path / "input_64.png", 64, warn=lambda text: None)


@pytest.mark.pipeline
def test_a_picture_too_large_stops_the_run_before_the_dag_with_only_its_line(tmp_path, huge):
    assert_refused_before_the_dag(tmp_path, huge, too_large(huge))

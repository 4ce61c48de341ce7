"""Input images: a deterministic 4096^2 source made with ffmpeg (or the user's own), downscaled per size.

The user's picture (config ``source_image``) is inspected before anything else runs. A file that
OpenCV cannot decode, or a truncated/corrupt PNG, is refused with a one-line message naming the
key and the file. Anything else is brought to a square 8-bit RGB picture, and every conversion
(16-bit to 8-bit, grayscale to RGB, dropped alpha, centre crop, upscaling) is recorded in a JSON
sidecar next to the source, ``data/source_<size>.json``, which stays for provenance.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ffmpeg
import numpy as np

from convlab.codeversion import data_version
from convlab.machinefaults import killed_by
from convlab.pictures.header import FFMPEG_MAX_EDGE, header_size
from convlab.status import UserError

# A Mandelbrot render: sharp edges, smooth gradients and fine texture, the same on every machine.
SOURCE_FILTER = "mandelbrot=size={size}x{size}:maxiter=512"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# IHDR's colour type of a grayscale picture with alpha, which OpenCV decodes to four equal-grey BGRA channels
PNG_GRAY_ALPHA = 4
BIT_DEPTHS = {np.dtype(np.uint8): 8, np.dtype(np.uint16): 16}
# What to do, appended to every refusal of the user's picture.
SOURCE_ADVICE = ("give an 8- or 16-bit RGB, RGBA or grayscale picture (PNG, JPEG, TIFF, ...), "
                 "or set source_image: null to generate one")
# The `[png @ 0x55c18898da40] ` (or nested `[dec:png @ 0x...] `) an ffmpeg line starts with.
FFMPEG_PREFIX = re.compile(r"^(?:\[[^\]]* @ 0x[0-9a-f]+\] )+")


class DataError(UserError, ValueError):
    """The source image cannot be prepared; the message says which file and what to do."""


def ffmpeg_executable() -> str:
    """System ffmpeg if installed, else the binary shipped in the imageio-ffmpeg wheel."""
    found = shutil.which("ffmpeg")
    if found:
        return found
    try:
        import imageio_ffmpeg
    except ImportError as error:
        raise DataError("no ffmpeg on PATH and imageio-ffmpeg is not installed: "
                        "pip install imageio-ffmpeg (or install ffmpeg)") from error
    return imageio_ffmpeg.get_ffmpeg_exe()


def warn_on_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def ffmpeg_cause(output: str) -> str:
    """The cause of an ffmpeg failure: its first error line, without the `[component @ address]`
    it starts with; the lines after it say what else the failure broke (its last, typically
    "Nothing was written into output file", says nothing of why)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return FFMPEG_PREFIX.sub("", lines[0]) if lines else ""


def _run(output: Callable[[str], Any], out: Path, what: str, warn: Callable[[str], None]) -> None:
    """Runs ffmpeg, whose ``output(path)`` stream writes a picture to ``path``: a partial file
    beside ``out``, renamed to ``out`` once whole, so that a failed or killed ffmpeg leaves no
    picture behind. On failure its whole output goes to ``warn`` (the command's standard error,
    which the rule's log keeps) and the DataError, the command's last line, names the cause."""
    partial = out.with_name(f".{out.stem}.partial{out.suffix}")
    command = output(str(partial)).overwrite_output().global_args("-v", "error").compile(cmd=ffmpeg_executable())
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode == 0:
            os.replace(partial, out)
            return
    finally:
        partial.unlink(missing_ok=True)
    output = done.stderr.decode(errors="replace").strip()
    if output:
        warn(output)
    if done.returncode < 0:  # killed: ffmpeg could say nothing
        raise DataError(f"could not {what}: {killed_by('ffmpeg', -done.returncode)}")
    raise DataError(f"ffmpeg failed to {what}: {ffmpeg_cause(output) or f'exit code {done.returncode}'}")


def sidecar_path(out: str | Path) -> Path:
    """The provenance record next to a source image: data/source_4096.png -> data/source_4096.json."""
    return Path(out).with_suffix(".json")


def _write_sidecar(out: str | Path, record: dict[str, Any]) -> dict[str, Any]:
    """Write the record with the code that made the pictures (another makes them again before a
    run's jobs read them); the record as written."""
    record = {**record, "code": data_version()}
    sidecar_path(out).write_text(json.dumps(record, indent=2) + "\n")
    return record


def made_by_other_code(image: str | Path) -> bool:
    """Whether the source picture ``image`` was made by other picture code than this (by its
    record; one without a readable record too)."""
    try:
        return json.loads(sidecar_path(image).read_text()).get("code") != data_version()
    except (OSError, ValueError, AttributeError):
        return True


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def picture_hash(path: str | Path) -> str:
    """A picture's content as a cell's measurement records it (the results database's input_hash)."""
    return file_sha256(path)[:12]


def generated_by(size: int) -> str:
    """How the generated source of ``size`` pixels is made, as its record says."""
    return f"ffmpeg -f lavfi -i {SOURCE_FILTER.format(size=size)}"


def source_disagrees(user_image: str | Path | None, image: str | Path) -> str | None:
    """Why the source picture ``image`` is not the one the config asks for (``user_image``, or the
    generated one where None), by its record (data/source_<size>.json): the picture it was made
    from, that picture's content, and the source's own content. None where it is, or where the
    picture is missing (the source rule makes it). A picture without its record cannot be checked:
    it disagrees."""
    image = Path(image)
    record_path = sidecar_path(image)
    if not image.is_file():
        return None
    if not record_path.is_file():
        return f"it has no record ({record_path}) of what it was made from"
    try:
        record = json.loads(record_path.read_text())
        made_from = record["source_image"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"its record {record_path} cannot be read"
    wanted = str(user_image) if user_image else None
    if made_from != wanted:
        return (f"made from {made_from or 'the generated picture'}, but config source_image is "
                f"{wanted or 'null (the generated picture)'}")
    if wanted is None and record.get("generated") != generated_by(int(record.get("size") or 0)):
        return "generated otherwise than this checkout generates it"
    if wanted is not None and Path(wanted).is_file() and record.get("sha256") != file_sha256(wanted):
        return f"{wanted} changed since the source was made from it"
    if record.get("png_sha256") and record["png_sha256"] != file_sha256(image):
        return f"its content is not what {record_path} says it made"
    return None


def generate_source(out: str | Path, size: int, warn: Callable[[str], None] = warn_on_stderr) -> dict[str, Any]:
    """Render the deterministic source image (one frame of ffmpeg's lavfi mandelbrot); ffmpeg's
    output on failure goes to ``warn``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # zlib's fastest level: the same pixels, a third larger, and 2.3 of the 6.7 s a 4096^2 source
    # took on a 2-core cpu machine at the default level (every size is decoded from it once)
    rendered = ffmpeg.input(SOURCE_FILTER.format(size=size), f="lavfi")
    _run(lambda path: rendered.output(path, vframes=1, pix_fmt="rgb24", compression_level=1), out,
         f"render the {size}x{size} source", warn)
    record = {"source_image": None, "generated": generated_by(size), "size": size, "conversions": [],
              "png_sha256": file_sha256(out)}
    return _write_sidecar(out, record)


def png_problem(blob: bytes) -> str | None:
    """Why a PNG file is truncated or corrupt, from its chunk structure; None when it is whole.

    Every chunk must fit in the file and pass its CRC, and the file must reach IEND.
    """
    position = len(PNG_SIGNATURE)
    while True:
        if position + 8 > len(blob):
            return f"the PNG is truncated: it ends after {len(blob)} bytes without an IEND chunk"
        length, kind = struct.unpack(">I4s", blob[position:position + 8])
        end = position + 12 + length
        name = kind.decode("latin-1")
        if end > len(blob):
            return (f"the PNG is truncated: its {name} chunk at byte {position} needs {end} bytes, "
                    f"the file has {len(blob)}")
        (crc,) = struct.unpack(">I", blob[end - 4:end])
        if zlib.crc32(blob[position + 4:end - 4]) != crc:
            return f"the PNG is corrupt: its {name} chunk at byte {position} fails the CRC check"
        if kind == b"IEND":
            return None
        position = end


def inspect_source(user_image: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read the user's picture as stored (OpenCV, IMREAD_UNCHANGED) and describe it.

    Returns the pixels (HxW or HxWxC, OpenCV channel order) and {width, height, channels,
    bit_depth}. Raises DataError, naming ``config source_image`` and the file, for a missing,
    undecodable, truncated or corrupt file and for sample types other than 8/16-bit integers.
    """
    import cv2

    user_image = Path(user_image)

    def refuse(problem: str) -> DataError:
        return DataError(f"config source_image: {user_image}: {problem}; {SOURCE_ADVICE}")

    if not user_image.is_file():
        what = "is a directory, not a file" if user_image.is_dir() else "does not exist"
        raise DataError(f"config source_image: {user_image} {what} "
                        f"(a relative path starts at the directory snakemake runs in); {SOURCE_ADVICE}")
    blob = user_image.read_bytes()
    if not blob:
        raise refuse("the file is empty")
    if blob.startswith(PNG_SIGNATURE):
        problem = png_problem(blob)
        if problem:
            raise refuse(problem)
    size = header_size(user_image)
    if size:
        refuse_too_large(user_image, *size)
    pixels = cv2.imread(str(user_image), cv2.IMREAD_UNCHANGED)
    if pixels is None or pixels.size == 0:
        raise refuse("OpenCV cannot decode this file (not a picture, or a truncated or corrupt one)")
    refuse_too_large(user_image, pixels.shape[1], pixels.shape[0])
    if pixels.dtype not in BIT_DEPTHS:
        raise refuse(f"its samples are {pixels.dtype} ({pixels.dtype.itemsize * 8}-bit); "
                     "save it with 8- or 16-bit integer samples")
    if (blob.startswith(PNG_SIGNATURE) and blob[12:16] == b"IHDR" and blob[25] == PNG_GRAY_ALPHA
            and pixels.ndim == 3 and pixels.shape[2] == 4):
        pixels = pixels[:, :, [0, 3]]  # grey and alpha, as stored: its conversion to RGB is then said
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    if channels not in (1, 2, 3, 4):
        raise refuse(f"it has {channels} channels")
    original = {"width": int(pixels.shape[1]), "height": int(pixels.shape[0]), "channels": channels,
                "bit_depth": BIT_DEPTHS[pixels.dtype]}
    return pixels, original


def refuse_too_large(user_image: Path, width: int, height: int) -> None:
    """DataError for a picture whose square, the centre crop of its shorter side, ffmpeg cannot
    scale to source_size: before it is decoded where its header says its size."""
    edge = min(width, height)
    if edge <= FFMPEG_MAX_EDGE:
        return
    square = " is" if width == height else f" is centre-cropped to {edge}x{edge},"
    side = "a side" if width == height else "on its shorter side"
    raise DataError(
        f"config source_image: {user_image}: {width}x{height}{square} larger than ffmpeg scales (at most "
        f"{FFMPEG_MAX_EDGE}x{FFMPEG_MAX_EDGE}); scale it down to at most {FFMPEG_MAX_EDGE} pixels {side}, "
        "or set source_image: null to generate one")


def to_square_rgb8(pixels: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """8-bit, three channels (OpenCV's BGR order), centre-cropped to a square: never stretched.

    Returns the picture and one sentence per conversion made.
    """
    import cv2

    conversions: list[str] = []
    if pixels.dtype == np.uint16:
        # 65535 -> 255, rounded to nearest
        pixels = ((pixels.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
        conversions.append("converted 16-bit samples to 8-bit (value * 255 / 65535, rounded)")
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]
    if pixels.ndim == 3 and pixels.shape[2] in (2, 4):
        alpha = pixels[:, :, -1]
        translucent = int(np.count_nonzero(alpha < 255))
        conversions.append(
            f"dropped the alpha channel ({translucent} of {alpha.size} pixels were not fully opaque; "
            "their stored colour is kept, not blended with a background)")
        pixels = pixels[:, :, :-1]
        if pixels.shape[2] == 1:
            pixels = pixels[:, :, 0]
    if pixels.ndim == 2:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_GRAY2BGR)
        conversions.append("converted grayscale to RGB (the grey value in all three channels)")
    height, width = pixels.shape[:2]
    if height != width:
        edge = min(height, width)
        top, left = (height - edge) // 2, (width - edge) // 2
        pixels = pixels[top:top + edge, left:left + edge]
        conversions.append(
            f"centre-cropped {width}x{height} to {edge}x{edge} (kept columns {left}-{left + edge - 1} and "
            f"rows {top}-{top + edge - 1}; the picture is cropped, not stretched)")
    return np.ascontiguousarray(pixels), conversions


def import_source(user_image: str | Path, out: str | Path, size: int,
                  warn: Callable[[str], None] = warn_on_stderr) -> dict[str, Any]:
    """Bring the user's picture to a square 8-bit RGB PNG of ``size`` pixels.

    Returns the provenance record, which is also written to ``sidecar_path(out)``. Each conversion
    is also one ``warning:`` line, given to ``warn`` (the command's console).
    """
    import cv2

    pixels, original = inspect_source(user_image)
    square, conversions = to_square_rgb8(pixels)
    edge = square.shape[0]
    if edge < size:
        conversions.append(
            f"upscaled {edge}x{edge} to {size}x{size} (bicubic): the picture is smaller than source_size, "
            "so the added pixels are interpolated, not detail")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if edge == size:
        if not cv2.imwrite(str(out), square):
            raise DataError(f"could not write {out}")
    else:
        fd, normalised = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".png", dir=out.parent)
        os.close(fd)
        try:
            if not cv2.imwrite(normalised, square):
                raise DataError(f"could not write {normalised}")
            scaled = ffmpeg.input(normalised).filter("scale", size, size, flags="bicubic")
            _run(lambda path: scaled.output(path, vframes=1, pix_fmt="rgb24"), out,
                 f"scale {user_image} to {size}x{size}", warn)
        finally:
            Path(normalised).unlink(missing_ok=True)
    record = {
        "source_image": str(user_image),
        "sha256": hashlib.sha256(Path(user_image).read_bytes()).hexdigest(),
        "original": original,
        "size": size,
        "scaled": "none" if edge == size else f"{edge}x{edge} to {size}x{size}, ffmpeg bicubic",
        "conversions": conversions,
        "png_sha256": file_sha256(out),
    }
    record = _write_sidecar(out, record)
    # warning: lines reach the terminal (the source rule copies them from its log): the picture
    # measured is not quite the one given
    for conversion in conversions:
        warn(f"warning: config source_image: {user_image}: {conversion}")
    return record


def check_source_image(user_image: str | Path, record: str | Path) -> None:
    """Refuse an unusable user picture before the workflow runs (DataError, the same one line
    the source job would print). Skipped when ``record``, the source's provenance sidecar, shows
    that this very file (same path and sha256) was already accepted."""
    user_image = Path(user_image)
    try:
        accepted = json.loads(Path(record).read_text())
        if (accepted.get("source_image") == str(user_image) and user_image.is_file()
                and accepted.get("sha256") == hashlib.sha256(user_image.read_bytes()).hexdigest()):
            return
    except (OSError, ValueError, AttributeError):
        pass  # no usable record: inspect the picture
    inspect_source(user_image)


def image_size(path: str | Path) -> tuple[int, int]:
    """(width, height) of an image: from its header, else decoded by OpenCV."""
    path = Path(path)
    size = header_size(path)
    if size:
        return size
    import cv2

    pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if pixels is None:
        raise DataError(f"{path}: OpenCV cannot decode this file; delete it and re-run")
    return int(pixels.shape[1]), int(pixels.shape[0])


def downscale(source: str | Path, out: str | Path, size: int, warn: Callable[[str], None] = warn_on_stderr) -> None:
    """Scale the source to ``size`` x ``size`` (bicubic, as the seeds' ffmpeg -vf scale=...); ffmpeg's
    output on failure goes to ``warn``.

    A size larger than the source is refused: it would invent pixels without saying so.
    """
    width, height = image_size(source)
    if size > min(width, height):
        raise DataError(
            f"{source} is {width}x{height}, smaller than the requested {size}x{size}: raise config "
            f"source_size to at least {size}, or drop {size} from conv2d.sizes / cpu.sizes")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    scaled = ffmpeg.input(str(source)).filter("scale", size, size, flags="bicubic")
    _run(lambda path: scaled.output(path, vframes=1, pix_fmt="rgb24"), out, f"scale {source} to {size}x{size}", warn)

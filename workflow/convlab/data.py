"""Input images: a deterministic 4096^2 source made with ffmpeg (or the user's own), downscaled per size."""

from __future__ import annotations

import shutil
from pathlib import Path

import ffmpeg

# A Mandelbrot render: sharp edges, smooth gradients and fine texture, the same on every machine.
SOURCE_FILTER = "mandelbrot=size={size}x{size}:maxiter=512"


class DataError(ValueError):
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


def _run(stream, what: str) -> None:
    try:
        stream.overwrite_output().global_args("-v", "error").run(cmd=ffmpeg_executable(), capture_stderr=True)
    except ffmpeg.Error as error:
        message = (error.stderr or b"").decode(errors="replace").strip()
        raise DataError(f"ffmpeg failed to {what}: {message or error}") from error


def generate_source(out: str | Path, size: int) -> None:
    """Render the deterministic source image (one frame of ffmpeg's lavfi mandelbrot)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stream = ffmpeg.input(SOURCE_FILTER.format(size=size), f="lavfi").output(
        str(out), vframes=1, pix_fmt="rgb24")
    _run(stream, f"render the {size}x{size} source")


def import_source(user_image: str | Path, out: str | Path, size: int) -> None:
    """Bring the user's picture to a square 8-bit RGB PNG of ``size`` pixels."""
    user_image = Path(user_image)
    if not user_image.is_file():
        raise DataError(f"config source_image: {user_image} does not exist (give a path to an RGB picture, "
                        "or null to generate one)")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stream = ffmpeg.input(str(user_image)).filter("scale", size, size, flags="bicubic").output(
        str(out), vframes=1, pix_fmt="rgb24")
    _run(stream, f"read {user_image}")


def downscale(source: str | Path, out: str | Path, size: int) -> None:
    """Scale the source to ``size`` x ``size`` (bicubic, as the seeds' ffmpeg -vf scale=...)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stream = ffmpeg.input(str(source)).filter("scale", size, size, flags="bicubic").output(
        str(out), vframes=1, pix_fmt="rgb24")
    _run(stream, f"scale {source} to {size}x{size}")

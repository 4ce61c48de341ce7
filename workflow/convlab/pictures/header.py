"""A picture's size read from its header, nothing decoded, and the largest picture ffmpeg takes: a
picture too large for the data stage is refused before it is decoded (a 20000x20000 RGB picture
decodes to 1.2 GB, its conversions to several times that)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image, UnidentifiedImageError

# ffmpeg takes no picture, to decode, scale or encode, unless 8 * (width + 128) * (height + 128) is
# below 2**31 (libavutil's av_image_check_size); any other is "Picture size WxH is invalid". The
# pipeline's pictures are square: at most 16255x16255 (tried with the ffmpeg it runs: 16255 is
# decoded, scaled and encoded, 16256 refused at each step). The config's source_size has this maximum.
FFMPEG_MAX_EDGE = 16255


def header_size(path: str | Path) -> tuple[int, int] | None:
    """(width, height) as the picture's header gives them, without decoding its pixels; None for a
    file Pillow does not know (OpenCV, which decodes more formats, may still read it)."""
    # Pillow refuses a header of more than twice MAX_IMAGE_PIXELS pixels, as a possible
    # decompression bomb, before anything is decoded; nothing is decoded here
    limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
    try:
        with Image.open(path) as picture:
            return picture.size
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None
    finally:
        Image.MAX_IMAGE_PIXELS = limit

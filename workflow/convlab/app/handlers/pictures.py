"""The pictures: the square source (generated, or the user's own converted) and its downscaled copies."""

from __future__ import annotations

import argparse

from convlab.console import Console
from convlab.pictures.source import downscale as downscale_picture
from convlab.pictures.source import generate_source, import_source


def source(args: argparse.Namespace, console: Console) -> int:
    if args.user_image:
        import_source(args.user_image, args.out, args.size, warn=console.warn)
    else:
        generate_source(args.out, args.size, warn=console.warn)
    return 0


def downscale(args: argparse.Namespace, console: Console) -> int:
    downscale_picture(args.source, args.out, args.size, warn=console.warn)
    return 0

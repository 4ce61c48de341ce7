"""The pictures: the square source (generated, or the user's own converted) and its downscaled copies."""

from __future__ import annotations

import argparse

from convlab.app import data
from convlab.app.console import Console


def source(args: argparse.Namespace, console: Console) -> int:
    if args.user_image:
        data.import_source(args.user_image, args.out, args.size, warn=console.warn)
    else:
        data.generate_source(args.out, args.size, warn=console.warn)
    return 0


def downscale(args: argparse.Namespace, console: Console) -> int:
    data.downscale(args.source, args.out, args.size, warn=console.warn)
    return 0

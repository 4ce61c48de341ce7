"""The report's standalone HTML pages: one skeleton, written atomically."""

from __future__ import annotations

from pathlib import Path

from convlab.atomicfile import write_text_atomically


def html_page(title: str, style: str, body: str) -> str:
    """A whole HTML document around ``body`` (HTML, already escaped), styled by the CSS ``style``."""
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>{style}</style>"
            f"</head>\n<body>\n{body}\n</body></html>\n")


def write_page(out_html: str | Path, page: str) -> Path:
    """Write ``page`` at ``out_html``, its folder made: a reader never sees half a page."""
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out_html, page)
    return out_html

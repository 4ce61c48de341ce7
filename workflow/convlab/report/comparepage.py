"""The page `compare` writes beside its CSV: the two sides, the summary lines, and every cell
with its verdict, coloured."""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from convlab.atomicfile import write_text_atomically
from convlab.history.compare import Comparison, cell_names, compare_result_sets, load_set, ms_text, percent_text
from convlab.history.verdictrule import FASTER, MISSING, SAME, SLOWER, UNCLEAR


def render_html(table: pd.DataFrame, header: list[str], summary: list[str], title: str) -> str:
    """A standalone page: the two sets, the summary lines, and every cell with its verdict."""
    colours = {SAME: "#eef5ee", FASTER: "#cfe8cf", SLOWER: "#f6cccc", UNCLEAR: "#fff2c2", MISSING: "#e4e4e4"}
    names = cell_names(table)
    head = ("cell", "status A", "status B", "A ms", "spread A", "B ms", "spread B", "B/A", "floor", "noise", "verdict")
    why = "why" in table and bool((table["why"] != "").any())  # compare --why
    head += ("why",) * why
    body = []
    for index, row in table.iterrows():
        values = (names[index], row["status_a"], row["status_b"], ms_text(row["kernel_ms_a"]), percent_text(row["spread_a"]),
                  ms_text(row["kernel_ms_b"]), percent_text(row["spread_b"]),
                  "" if math.isnan(row["ratio"]) else f"{row['ratio']:.3f}", percent_text(row["floor"]),
                  percent_text(row["noise"]), row["verdict"], *([row["why"]] if why else []))
        colour = colours.get(row["verdict"], "#e4e4e4")
        body.append(f'<tr style="background:{colour}">'
                    + "".join(f"<td>{html.escape('' if pd.isna(v) else str(v))}</td>" for v in values) + "</tr>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title>\n<style>"
            "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
            "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f0f0f0}"
            "pre{background:#f7f7f7;padding:0.6em}"
            "</style></head>\n<body>\n"
            f"<h2>{html.escape(title)}</h2>\n<pre>{html.escape(chr(10).join(header))}</pre>\n"
            f"<h3>By kernel</h3>\n<pre>{html.escape(chr(10).join(summary))}</pre>\n"
            "<h3>Every cell</h3>\n<p>Verdict rule: see <code>convlab/history/verdictrule.py</code>; the floor and the noise "
            "are relative to the median time.</p>\n<table>\n<tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>\n" + "\n".join(body)
            + "\n</table>\n</body></html>\n")


def write_comparison_page(comparison: Comparison, out: str | Path | None = None) -> Path:
    """The comparison's page (default: beside its CSV, as .html)."""
    page = Path(out) if out else comparison.out.with_suffix(".html")
    write_text_atomically(page, render_html(comparison.table, comparison.header, comparison.summary, comparison.title))
    return page


def compare_paths(a_path: str | Path, b_path: str | Path, floor: float, out: str | Path | None = None,
                  html_out: str | Path | None = None) -> str:
    """Compare two summaries (files or folders) against the drift ``floor``, write the CSV and the
    page, and return what `compare` prints."""
    comparison = compare_result_sets(load_set(a_path), load_set(b_path), out, floor)
    page = write_comparison_page(comparison, html_out)
    return f"{comparison.text}\nwrote {comparison.out} and {page}"

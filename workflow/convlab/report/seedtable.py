"""One HTML page per seed: a section per seed table with every seed number beside this run's, the ratio,
this run's status and the seed's defects spelled out."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from convlab.report.pages import html_page, write_page
from convlab.report.seedcompare import gpu_names, ratio_text


def _fmt(value: float) -> str:
    if value != value:
        return ""
    return f"{value:.4g}"


def seed_table_html(comparison: pd.DataFrame, seed: str, out_html: str | Path) -> Path:
    """One HTML page per seed, a section per seed table, with defects and this run's status spelled out."""
    part = comparison[comparison["seed"] == seed]
    seed_gpu, this_gpu = gpu_names(part)
    sections = []
    for table, rows in part.groupby("table", sort=False):
        shown = pd.DataFrame({
            "method": rows["method"], "kernel": rows["kernel"], "variant": rows["variant"],
            "ran as": rows["ran_as"] if "ran_as" in rows.columns else "",
            "size": rows["size"].map(lambda v: "" if v != v else f"{v:g}"),
            "stride": rows["stride"].map(lambda v: "" if v != v else f"{v:g}"), "block": rows["block"],
            "unit": rows["unit"], f"seed ({seed_gpu})": rows["seed_value"].map(_fmt),
            f"this run ({this_gpu})": rows["this_value"].map(_fmt), "ratio this/seed": rows["ratio"].map(_fmt),
            "this run's status": rows["this_status"] + rows["this_reason"].map(lambda r: f": {r}" if r else ""),
            "seed defect": rows["defect"] + rows["defect_note"].where(rows["defect"] != "", "").map(
                lambda n: f" ({n})" if n else ""),
        })
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in dict.fromkeys(rows["note"]) if n)
        sections.append(f"<h3>Seed {seed}, table {html.escape(table)}</h3>\n<p>{ratio_text(rows)}</p>\n"
                        + (f"<ul>{notes}</ul>\n" if notes else "")
                        + shown.to_html(index=False, escape=True, border=0, na_rep=""))
    style = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}"
             "th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f0f0f0}")
    body = (f"<h2>Seed {seed} ({html.escape(seed_gpu)}) vs this run ({html.escape(this_gpu)})</h2>\n"
            "<p>Ratio = this run's speed relative to the seed's (seed ms / this ms; this GFLOPS / seed GFLOPS; "
            "this speed-up / seed speed-up): above 1 this run was faster. A seed number whose launch never ran has "
            "no ratio; this run's status is shown instead.</p>\n" + "\n".join(sections))
    return write_page(out_html, html_page(f"Seed {seed} vs this run", style, body))

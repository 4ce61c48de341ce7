"""Findings computed from the summary and the seed comparison, never written by hand: the fastest kernel of
each problem and how it compares with cuDNN (or cuBLAS), which cells failed and why, and how this device
compares with the seeds' GPUs. Written as one HTML page for the Snakemake report.

Kernels are named by what actually ran (on the cpu backend, the twin: 'cudnn → OpenCV filter2D ...'), and
kernels that ran the same code are never ranked or compared against each other. Kernels are ranked within one
precision (convlab.report.precision): the headline and the fastest-per-problem table rank strict fp32 kernels
only, and TF32 (or any other reduced precision) kernels have a line and a table of their own."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from convlab.history.summary import read_summary
from convlab.plan.families import FAMILIES
from convlab.report.aggregate import mixed_code_note, throttled_note
from convlab.report.codelabels import TWIN_BACKENDS, code_identity, code_labels
from convlab.report.familydisplay import display
from convlab.report.pages import html_page, write_page
from convlab.report.precision import STRICT, UNKNOWN, precision_name, row_precisions
from convlab.report.roofline import load_device, roof_notes, roofline_points
from convlab.report.seedcompare import NEVER_RAN, problem_sizes, ratio_text, read_comparison, seed_ratios
from convlab.status import OK


def _title(experiment: str) -> str:
    """The experiment's heading, with the seeds it reproduces."""
    name, seeds = display(experiment).label, display(experiment).seeds
    if not seeds:
        return name
    return f"{name} (seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)})"


TITLES = {experiment: _title(experiment) for experiment in FAMILIES}


def fastest(summary: pd.DataFrame, experiment: str, precision: str = STRICT) -> pd.DataFrame:
    """Per problem, among the kernels of ``precision`` only (strict fp32 by default): the fastest ok code (its
    best kernel and variant), the runner-up among other code, and the library of that precision against the
    fastest code that is not the library's.

    Kernels that ran the same code (on the cpu backend, several kernels share one numpy twin) are one entry,
    named by every kernel and the twin: never ranked against each other, never a speed-up of one over the
    other. ``speedup_over_library`` is library ms / ms of the fastest other code (above 1: faster than the
    library)."""
    # the library kernels: the first one with a time in this precision is what ours is compared with
    keys, libraries = list(FAMILIES[experiment].problem_columns), list(display(experiment).library_kernels)
    rows = summary[(summary["experiment"] == experiment) & (summary["status"] == OK) & summary["kernel_ms"].notna()]
    rows = rows[row_precisions(rows) == precision]
    rows = rows.assign(size=problem_sizes(rows, experiment))
    rows = rows.assign(_code=code_identity(rows))
    labels = code_labels(rows)  # over the whole experiment: a code reads the same in every problem
    # One pass over plain lists: pandas' per-group indexing cost most of the page on a large grid.
    grouped = rows.groupby(keys, sort=True)
    problems = list(grouped.size().index)
    members: list[list[int]] = [[] for _ in problems]
    for position, number in enumerate(grouped.ngroup().tolist()):
        if number >= 0:  # a row with no problem key is in no group (NaN)
            members[int(number)].append(position)
    kernels, variants = rows["kernel"].tolist(), rows["variant"].tolist()
    times, codes = rows["kernel_ms"].tolist(), rows["_code"].tolist()
    out = []
    for problem, part in zip(problems, members):
        # one position per code that ran, at its best time (a stable sort keeps the summary's order on ties)
        best: list[int] = []
        for position in sorted(part, key=times.__getitem__):
            if all(codes[position] != codes[kept] for kept in best):
                best.append(position)
        first = best[0]
        record = dict(zip(keys, problem if isinstance(problem, tuple) else (problem,)))
        record.update(fastest=labels[codes[first]], variant=variants[first], fastest_ms=times[first],
                      runner_up=labels[codes[best[1]]] if len(best) > 1 else "",
                      runner_up_ms=times[best[1]] if len(best) > 1 else float("nan"),
                      library="", library_ms=float("nan"), best_non_library="",
                      best_non_library_ms=float("nan"))
        for library in libraries:
            hit = [position for position in part if kernels[position] == library]
            if not hit:
                continue
            code = codes[hit[0]]
            # the library's code at its best time, so that one label never shows two times
            record.update(library=labels[code],
                          library_ms=times[next(position for position in best if codes[position] == code)])
            others = [position for position in best if codes[position] != code]
            if others:
                record.update(best_non_library=labels[codes[others[0]]], best_non_library_ms=times[others[0]])
            break
        record["speedup_over_library"] = record["library_ms"] / record["best_non_library_ms"]
        out.append(record)
    return pd.DataFrame(out)


def reduced_precision_fastest(summary: pd.DataFrame, experiment: str,
                              strict: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per precision other than strict fp32 (TF32) and per problem: the fastest code of that precision, named
    with the precision, and the fastest strict fp32 code of the same problem. ``speedup_over_fp32`` is strict
    fp32 ms / reduced-precision ms (above 1: the reduced precision is faster). Empty where no kernel of a
    reduced precision ran ok. ``strict``: fastest(summary, experiment), where the caller has it already."""
    keys = list(FAMILIES[experiment].problem_columns)
    rows = summary[(summary["experiment"] == experiment) & (summary["status"] == OK) & summary["kernel_ms"].notna()]
    strict = fastest(summary, experiment) if strict is None else strict
    if not strict.empty:
        strict = strict[keys + ["fastest", "fastest_ms"]].rename(
            columns={"fastest": "fastest_fp32", "fastest_ms": "fastest_fp32_ms"})
    parts = []
    for precision in sorted(set(row_precisions(rows)) - {STRICT}):
        part = fastest(summary, experiment, precision)[keys + ["fastest", "variant", "fastest_ms"]]
        part.insert(len(keys), "precision", precision_name(precision))
        if strict.empty:
            part = part.assign(fastest_fp32="", fastest_fp32_ms=float("nan"))
        else:
            part = part.merge(strict, on=keys, how="left")
        parts.append(part)
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    table["fastest_fp32"] = table["fastest_fp32"].fillna("")
    table["speedup_over_fp32"] = table["fastest_fp32_ms"] / table["fastest_ms"]
    return table


def shared_code_groups(summary: pd.DataFrame, experiment: str) -> list[str]:
    """The labels of code that several kernels of ``experiment`` ran (the cpu twins): one entry each."""
    rows = summary[(summary["experiment"] == experiment) & (summary["implementation"] != "")] \
        if "implementation" in summary.columns else summary.iloc[:0]
    codes = code_identity(rows)
    several = [code for code, kernels in rows.groupby(codes)["kernel"].nunique().items() if kernels > 1]
    labels = code_labels(rows)
    return [labels[code] for code in several]


def failures(summary: pd.DataFrame) -> pd.DataFrame:
    failed = summary[summary["status"] != OK]
    if failed.empty:
        return pd.DataFrame(columns=["experiment", "kernel", "variant", "status", "reason", "cells"])
    return (failed.groupby(["experiment", "kernel", "variant", "status", "reason"]).size().rename("cells")
            .reset_index().sort_values(["experiment", "kernel", "variant"]))


def gpu_comparison(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per seed: this run's speed ratio over the seed's numbers, by seed_ratios() (the figures' reading)."""
    out = []
    for seed, part in comparison.groupby("seed"):
        stats = seed_ratios(part)
        out.append({"seed": seed, "seed_gpu": ", ".join(sorted(set(part["seed_gpu"].replace("unnamed", "GPU not named")))),
                    "this_gpu": next((g for g in part["this_gpu"] if g), ""), "numbers": len(part),
                    "compared": stats.compared, "defective_left_out": stats.left_out,
                    "median_ratio": stats.median, "min_ratio": stats.low, "max_ratio": stats.high})
    return pd.DataFrame(out)


def _num(value: float, digits: int = 3) -> str:
    if value != value:
        return ""
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"


def _problem_text(row: pd.Series, keys: list[str]) -> str:
    if keys == ["filter_size", "size", "stride"]:
        return f"{row['size']:g}² stride {row['stride']:g} ({row['filter_size']:g}x{row['filter_size']:g})"
    if keys == ["filter_size", "size"]:
        return f"{row['size']:g}² with a {row['filter_size']:g}x{row['filter_size']:g} filter"
    if keys == ["size"]:
        return f"M = N = K = {row['size']:g}"
    return f"layer C={row['C_in']:g} {row['H']:g}x{row['W']:g} K={row['C_out']:g}, batch {row['batch']:g}"


def _sentences(table: pd.DataFrame, experiment: str, shared: list[str]) -> list[str]:
    keys = list(FAMILIES[experiment].problem_columns)
    lines = []
    if shared:
        # said first: the table below has one entry for each of these, not one per kernel
        lines.append("Ran the same code on this backend, so one entry each and never ranked or compared with each "
                     "other: " + "; ".join(f"<b>{html.escape(label)}</b>" for label in shared) + ".")
    wins = table["fastest"].value_counts()
    lines.append(f"Among {precision_name(STRICT)} kernels, <b>{html.escape(wins.index[0])}</b> is the fastest in "
                 f"{wins.iloc[0]} of {len(table)} problems"
                 + (f"; also fastest: {', '.join(f'{html.escape(k)} ({n})' for k, n in wins.iloc[1:].items())}."
                    if len(wins) > 1 else "."))
    order = dict(display(experiment).headline_order)
    largest = (table.sort_values(list(order), ascending=list(order.values())).iloc[0] if order
               else table.iloc[-1])
    text = (f"At {_problem_text(largest, keys)}, among {precision_name(STRICT)} kernels the fastest is "
            f"<b>{html.escape(largest['fastest'])}</b> "
            f"({html.escape(largest['variant'])}) at {_num(largest['fastest_ms'], 4)} ms")
    if largest["library"] and largest["library"] == largest["fastest"]:
        text += ", the library baseline itself"
        if largest["best_non_library"]:
            text += (f"; the fastest other code, {html.escape(largest['best_non_library'])}, runs at "
                     f"{_num(largest['speedup_over_library'])}x its speed ({_num(largest['best_non_library_ms'], 4)} ms)")
    elif largest["library"]:
        text += (f", {_num(largest['speedup_over_library'])}x the speed of {html.escape(largest['library'])} "
                 f"({_num(largest['library_ms'], 4)} ms)")
    lines.append(text + ".")
    libraries = table["library"].replace("", pd.NA).dropna()
    if not libraries.empty:
        library = libraries.mode().iloc[0]
        speedups = table[table["library"] == library]["speedup_over_library"].dropna()
        if speedups.empty:
            lines.append(f"No speed-up over {html.escape(library)}: no other code ran the same problems.")
        else:
            lines.append(f"Speed-up over {html.escape(library)} of the fastest other code: median "
                         f"{_num(speedups.median())}x, from {_num(speedups.min())}x to {_num(speedups.max())}x over "
                         f"{len(speedups)} problems (above 1: faster than the library).")
    return lines


def _reduced_sentences(table: pd.DataFrame) -> list[str]:
    """The reduced-precision winners, each named with its precision and set against strict fp32."""
    lines = []
    for precision, part in table.groupby("precision", sort=False):
        name = html.escape(precision)
        wins = part["fastest"].value_counts()
        text = (f"Ranked apart, {name}: <b>{html.escape(wins.index[0])}</b> ({name}) is the fastest {name} code "
                f"in {wins.iloc[0]} of {len(part)} problems")
        if len(wins) > 1:
            text += "; also fastest: " + ", ".join(f"{html.escape(k)} ({n})" for k, n in wins.iloc[1:].items())
        speedups = part["speedup_over_fp32"].dropna()
        if speedups.empty:
            text += f"; no {precision_name(STRICT)} code ran the same problems"
        else:
            text += (f"; the fastest {name} code runs at a median {_num(speedups.median())}x the speed of the fastest "
                     f"{precision_name(STRICT)} code, from {_num(speedups.min())}x to {_num(speedups.max())}x over "
                     f"{len(speedups)} problems")
        why = ("are not in kernels/registry.yaml, so their precision is not known" if precision == precision_name(UNKNOWN)
               else f"do not compute in {precision_name(STRICT)}")
        lines.append(text + f". {name} kernels {why}, so they are never ranked with the {precision_name(STRICT)} "
                            "kernels above.")
    return lines


def _breakable(value: object) -> str:
    """A table cell's text, escaped, with a line-break opportunity after each _ ~ / and each comma that is not a
    thousands separator, so that long kernel labels, variants and column names wrap at their parts (and numbers
    never break)."""
    return re.sub(r"([_~/]|,(?!\d))", r"\1<wbr>", html.escape(str(value)))


def _table_html(frame: pd.DataFrame) -> str:
    shown = frame.copy()
    for column in shown.columns:
        if shown[column].dtype.kind == "f":
            shown[column] = shown[column].map(lambda v: _num(v, 4))
    shown = shown.fillna("").astype(str).map(_breakable)
    shown.columns = [_breakable(column) for column in shown.columns]
    return shown.to_html(index=False, escape=False, border=0, na_rep="")


def findings_html(summary: pd.DataFrame, comparison: pd.DataFrame, bandwidth: dict, ceiling: dict) -> str:
    devices = sorted(set(summary["device"]) - {""}) if "device" in summary.columns else []
    # the cpu backend measures a copy within host memory: there is no device to copy to
    copy = "host memory copy" if bandwidth.get("backend") in TWIN_BACKENDS else "device-to-device copy"
    parts = [f"<h2>Findings: {html.escape(', '.join(devices) or 'no device')}</h2>",
             f"<p>{len(summary)} cells; {int((summary['status'] == OK).sum())} ok. Measured {copy} "
             f"bandwidth: {_num(bandwidth.get('copy_gbps', float('nan')), 4)} GB/s; FP32 SGEMM ceiling: "
             f"{_num(ceiling.get('sgemm_gflops', float('nan')), 4)} GFLOP/s"
             f"{' (' + html.escape(str(ceiling.get('math'))) + ')' if ceiling.get('math') else ''}. "
             "Every sentence below is computed from this run's summary and the seed comparison.</p>"]
    measured = {"flops", "bytes", "kernel_ms"} <= set(summary.columns)
    above = roof_notes(roofline_points(summary), bandwidth, ceiling) if measured else []
    if above:
        # the roofline figure carries the same sentences
        parts.append("<p><strong>Above a measured roof:</strong> " + " ".join(html.escape(n) for n in above) + "</p>")
    twins = summary[summary["backend"].isin(TWIN_BACKENDS)] if "backend" in summary.columns else summary.iloc[:0]
    if not twins.empty:
        parts.append("<p>This run used the cpu backend: every kernel ran its cpu twin (numpy or OpenCV), named "
                     "below as <i>kernel → twin</i>. No GPU library (cuDNN, cuBLAS) ran.</p>")
    mixed = mixed_code_note(summary)
    if mixed:
        parts.append(f"<p><strong>Warning:</strong> {html.escape(mixed)}. Run snakemake without "
                     "--rerun-triggers to measure every cell with the current code.</p>")
    throttled = throttled_note(summary)
    if throttled:
        parts.append(f"<p><strong>Warning:</strong> {html.escape(throttled)}.</p>")
    for experiment, title in TITLES.items():
        table = fastest(summary, experiment)
        reduced = reduced_precision_fastest(summary, experiment, table)
        parts.append(f"<h3>Fastest kernel: {html.escape(title)}</h3>")
        if table.empty and reduced.empty:
            parts.append("<p>Not run in this configuration (no ok cell).</p>")
            continue
        if table.empty:
            parts.append(f"<p>No {precision_name(STRICT)} kernel ran ok.</p>")
        else:
            sentences = _sentences(table, experiment, shared_code_groups(summary, experiment))
            parts.append("<ul>" + "".join(f"<li>{s}</li>" for s in sentences) + "</ul>")
            parts.append(f"<p>Fastest {precision_name(STRICT)} code per problem:</p>")
            parts.append(_table_html(table))
        if not reduced.empty:
            parts.append("<ul>" + "".join(f"<li>{s}</li>" for s in _reduced_sentences(reduced)) + "</ul>")
            parts.append(f"<p>Fastest code of each other precision per problem, beside the fastest "
                         f"{precision_name(STRICT)} code:</p>")
            parts.append(_table_html(reduced))
    failed = failures(summary)
    parts.append("<h3>Cells that failed, and why</h3>")
    if failed.empty:
        parts.append(f"<p>None: all {len(summary)} cells passed verification.</p>")
    else:
        by_status = failed.groupby("status")["cells"].sum()
        parts.append("<p>" + ", ".join(f"{n} {html.escape(s)}" for s, n in by_status.items())
                     + f" of {len(summary)} cells.</p>")
        parts.append(_table_html(failed))
    parts.append("<h3>This device against the seeds' GPUs</h3>")
    gpus = gpu_comparison(comparison)
    items = []
    for seed, part in comparison.groupby("seed"):
        row = gpus[gpus["seed"] == seed].iloc[0]
        # ratio_text() is the seed figures' own sentence: the two pages cannot disagree
        numbers = f"{row['numbers']} seed number{'s' if row['numbers'] != 1 else ''}"
        text = (f"Seed {seed} ({html.escape(row['seed_gpu'])}, {numbers}) against "
                f"{html.escape(row['this_gpu'] or 'this run')}: {html.escape(ratio_text(part))}")
        if row["compared"] > 1:
            text += f", from {_num(row['min_ratio'])}x to {_num(row['max_ratio'])}x"
        items.append(text + ".")
    parts.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
    never = comparison[comparison["defect"].isin(NEVER_RAN)]
    if not never.empty:
        statuses = never["this_status"].value_counts()
        parts.append(f"<p>{len(never)} seed numbers come from launches that never ran; this run recorded them as "
                     + ", ".join(f"{html.escape(s)} ({n})" for s, n in statuses.items()) + ".</p>")
    parts.append(_table_html(gpus))
    # Tables fit the window: auto layout within its width, cells wrapping at the <wbr> of _breakable()
    # (break-word, not anywhere, so that a number's digits are never split).
    style = ("body{font-family:sans-serif;margin:1.5em}"
             "table{border-collapse:collapse;margin-bottom:1em;table-layout:auto;max-width:100%;font-size:13px}"
             "th,td{border:1px solid #ccc;padding:3px 5px;text-align:left;vertical-align:top;"
             "overflow-wrap:break-word}th{background:#f0f0f0}li{overflow-wrap:break-word}")
    return html_page("Findings", style, "\n".join(parts))


def write_findings(summary_csv: str | Path, comparison_csv: str | Path, bandwidth_json: str | Path,
                   ceiling_json: str | Path, out_html: str | Path) -> Path:
    summary = read_summary(summary_csv)
    comparison = read_comparison(comparison_csv)
    return write_page(out_html, findings_html(summary, comparison, load_device(bandwidth_json),
                                              load_device(ceiling_json)))


"""The verdict on each re-measured cell against its previous measurement, and the few lines a
run ends with.

A cell's verdict is compare's rule (convlab.history.verdictrule.verdict: SAME, FASTER, SLOWER or UNCLEAR,
by the relative change against a floor and the two measurements' spreads) applied to its latest
earlier ``ok`` measurement on the same device label; "new" where there is none, and the cell's
status where the new measurement is not ``ok``. The floor is the cell's own where its history
holds enough reruns with nothing changed (convlab.history.noise), else the drift floor, and a FASTER or SLOWER where
either measurement cannot be vouched for (convlab.history.vouching: a busy host, the new one or
the baseline) is UNCLEAR (``unconfirmed`` says why). A cell measured side by side with its
previous kernel version (convlab.history.pairing) is judged by that pair's interval against the
threshold instead: its verdict needs no history and holds on a busy host.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from convlab.history import whyline
from convlab.history.noise import CellNoise
from convlab.history.pairfile import PairRow
from convlab.history.store import MeasuredCell, Measurement
from convlab.history.verdictpolicy import DRIFT_FLOOR
from convlab.history.verdictrule import (
    FASTER,
    SAME,
    SLOWER,
    TIMED_VERDICTS,
    UNCLEAR,
    Ratio,
    geomean,
    verdict,
    verdict_of_interval,
)
from convlab.history.vouching import NEIGHBOURED, doubt
from convlab.history.whyline import NOT_READ
from convlab.measure.row import finite_number

NEW = "new"
# What a change between two measurements of a cell is called, by the field that differs.
CHANGE_NAMES = {"kernel_hash": "kernel files", "code_version": "measurement code", "spec_hash": "config",
                "gpu_uuid": "GPU board", "input_hash": "input picture"}
# Most kernel lines a run's verdict prints; the rest are summed up in one line.
MAX_KERNEL_LINES = 10
# Kernels with these verdicts are listed first.
ORDER = (SLOWER, FASTER, UNCLEAR, SAME)


@dataclass(frozen=True)
class CellVerdict(MeasuredCell):
    """One newly kept measurement's verdict against the cell's previous ok one (if any)."""

    previous_ms: float | None
    previous_run: str | None
    previous_check: str | None
    verdict: str
    changed: tuple[str, ...]
    # new / previous: its interval by the cell's pair or its own floor, its rounds where it was paired
    ratio: Ratio = Ratio()
    floor: float | None = None  # the cell's own floor, where its history gave one
    unconfirmed: str | None = None  # why a FASTER/SLOWER is UNCLEAR: a side the lab cannot vouch for
    neighbours: str = ""  # the other processes that used the GPU while it was timed ("pid name;...")
    why: str = ""  # why its pair is FASTER or SLOWER (convlab.history.whyline), or why that was not read
    why_previous: Mapping[str, object] | None = None  # both versions' hardware counts behind ``why``
    why_new: Mapping[str, object] | None = None




# The versions a row records, by the name a change of them is called.
VERSION_NAMES = {"driver_version": "driver", "runtime_version": "CUDA runtime", "cupy_version": "CuPy",
                 "cudnn_version": "cuDNN", "cublas_version": "cuBLAS", "cufft_version": "cuFFT", "compiler": "compiler"}


def version_text(column: str, value: object) -> str:
    """A recorded version as its library writes it: CUDA's and cuDNN's numbers (13000, 91900)
    as 13.0 and 9.19.0."""
    text = str(value)
    if not text.isdigit():
        return text
    number = int(text)
    if column in ("driver_version", "runtime_version"):
        return f"{number // 1000}.{number % 1000 // 10}"
    if column in ("cudnn_version", "cublas_version") and number >= 10000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return text


def _parts(column: str, value: object) -> dict[str, str]:
    """A version column as named parts: the cpu backend's runtime_version holds several
    ('numpy 2.4.6, opencv 4.12.0'), every other column one."""
    text = str(value or "")
    if column == "runtime_version" and not text.isdigit() and text:
        named = dict(part.strip().partition(" ")[::2] for part in text.split(","))
        return {{"numpy": "NumPy", "opencv": "OpenCV"}.get(name, name): version for name, version in named.items()}
    return {VERSION_NAMES[column]: version_text(column, text)} if text else {}


def version_changes(new_row: Mapping[str, object], previous_row: Mapping[str, object]) -> tuple[str, ...]:
    """Each library version that differs between two rows, as 'cuDNN 9.19.0 → 9.20.0'. A version
    either row lacks is not known, so not named."""
    changes = []
    for column in VERSION_NAMES:
        before, after = _parts(column, previous_row.get(column)), _parts(column, new_row.get(column))
        changes += [f"{name} {before[name]} → {after[name]}" for name in before
                    if name in after and before[name] != after[name]]
    return tuple(changes)


def what_changed(new: Mapping[str, object], previous: Measurement) -> tuple[str, ...]:
    """The names of what differs between a new measurement and an earlier one. A field the earlier
    one never recorded (NULL: kept before the field existed) is not known, so not named."""
    fields = tuple(name for field, name in CHANGE_NAMES.items()
                   if getattr(previous, field) is not None
                   and str(new.get(field) or "") != str(getattr(previous, field) or ""))
    return fields + version_changes(_row(new), _row({"row_json": previous.row_json}))


def judge(new: Mapping[str, object], previous: Measurement | None, noise: CellNoise | None = None,
          pair: PairRow | None = None, *, threshold: float) -> CellVerdict:
    """The verdict on one new measurement (a mapping with the store's measurement fields), with
    the cell's learned ``noise`` where its history gave one (else the drift floor); by ``pair``'s
    interval against ± ``threshold`` (config verdicts.threshold) where it was measured side by side
    with the previous measurement's kernel."""
    ms, iqr = finite_number(new.get("kernel_ms")), finite_number(new.get("kernel_ms_iqr"))
    status = str(new.get("status") or "")
    ratio = Ratio()
    unconfirmed = None
    if status != "ok" or not ms or ms <= 0:
        word = status or "unknown"
    elif previous is None or not previous.kernel_ms:
        word = NEW
    elif pair is not None and pair.measured:
        ratio = pair.ratio
        word = verdict_of_interval(ratio.low, ratio.high, threshold)
        # interleaved rounds cancel a steady neighbour's share of the GPU; one that came and went
        # leaves the rounds short of their precision, and then the change is not confirmed
        if word in (FASTER, SLOWER) and (pair.neighbours or neighbours_of(new)) and pair.stop != "precise":
            word, unconfirmed = UNCLEAR, f"measured while {NEIGHBOURED}"
    else:
        previous_iqr = previous.kernel_ms_iqr if previous.kernel_ms_iqr is not None else math.nan
        iqr = iqr if iqr is not None else math.nan
        if noise is None:
            word, value, _, _ = verdict(previous.kernel_ms, previous_iqr, ms, iqr, DRIFT_FLOOR)
            ratio = Ratio(value)
        else:
            word, value, _, _ = verdict(previous.kernel_ms, previous_iqr, ms, iqr, noise.floor, own_floor=True)
            ratio = Ratio(value, *noise.interval(value))
        if word in (FASTER, SLOWER):
            unconfirmed = doubt(_row(new), _row({"row_json": previous.row_json}), previous.run_id)
            if unconfirmed:
                word = UNCLEAR
    return CellVerdict(
        cell=str(new["cell"]), experiment=str(new.get("experiment") or ""), kernel=str(new.get("kernel") or ""),
        variant=str(new.get("variant") or ""), status=status, kernel_ms=ms,
        previous_ms=previous.kernel_ms if previous else None, previous_run=previous.run_id if previous else None,
        previous_check=previous.row_check if previous else None, verdict=word,
        changed=what_changed(new, previous) if previous else (), ratio=ratio,
        floor=noise.floor if noise and ratio.value and ratio.rounds is None else None, unconfirmed=unconfirmed,
        neighbours=";".join(part for part in (neighbours_of(new), pair.neighbour_names if pair else "") if part),
        **({"why": pair.why, "why_previous": pair.why_previous, "why_new": pair.why_new} if pair and pair.why else {}))


def neighbours_of(new: Mapping[str, object]) -> str:
    """The other processes a new measurement's row says used the GPU while it was timed."""
    row = _row(new)
    count = finite_number(row.get("gpu_neighbours"))
    return str(row.get("gpu_neighbour_names") or "unnamed") if count and count > 0 else ""


def _row(new: Mapping[str, object]) -> Mapping[str, object]:
    row = new.get("row_json")
    try:
        values = json.loads(row) if isinstance(row, str) else {}
    except ValueError:
        return {}
    return values if isinstance(values, dict) else {}




def _kernel_line(kernel: str, verdicts: list[CellVerdict], width: int) -> str:
    counts = Counter(v.verdict for v in verdicts)
    words = [f"{counts[w]} {w}" for w in ORDER if counts[w]]
    words += [f"{n} {w}" for w, n in sorted(counts.items()) if w not in ORDER]
    ratios = [v.ratio.value for v in verdicts if v.ratio.value]
    line = f"  {kernel:<{width}}  {', '.join(words)}"
    if ratios:
        digits = 3 if any(v.ratio.rounds is not None for v in verdicts) else 2
        paired = sum(1 for v in verdicts if v.ratio.rounds)
        same_code = sum(1 for v in verdicts if v.ratio.rounds == 0)
        basis = "".join(f", {count} {what}" for count, what in ((paired, "paired"), (same_code, "the same machine code"))
                        if count)
        line += f"; time x{geomean(ratios):.{digits}f}{_interval(verdicts)} (geomean new/previous{basis})"
    changed = sorted({name for v in verdicts for name in v.changed})
    compared = [v for v in verdicts if v.previous_run]
    if compared:
        line += f"; changed: {', '.join(changed) if changed else 'nothing recorded'}"
    return line


def _why_lines(verdicts: list[CellVerdict]) -> list[str]:
    """Under a kernel's line, the why of its cell that changed most (of those FASTER or SLOWER that
    have one), and how many more have theirs in the details."""
    explained = [v for v in verdicts if v.why and not v.why.startswith(NOT_READ) and v.verdict in (FASTER, SLOWER)]
    if not explained:
        return []
    shown = max(explained, key=lambda v: abs(math.log(v.ratio.value)) if v.ratio.value else 0.0)
    more = f" ({len(explained) - 1} more cells' in the details)" if len(explained) > 1 else ""
    problem = "/".join(shown.cell.removesuffix(".csv").split("/")[-2:])
    return [f"    {shown.why} [{problem}]{more}"]


def _unread_lines(verdicts: list[CellVerdict]) -> list[str]:
    """Why no why was read, once per reason."""
    unread = Counter(v.why.removeprefix(NOT_READ) for v in verdicts if v.why.startswith(NOT_READ))
    return [f"  why: not read for {n} {'cell' if n == 1 else 'cells'}: {reason}" for reason, n in unread.most_common()]


def why_lines(verdicts: list[CellVerdict]) -> list[str]:
    """The whys alone, as a summary puts them under its kernel lines: each kernel's (of its cell
    that changed most), then the reasons none was read. A preview says them after its verdicts."""
    by_kernel: dict[str, list[CellVerdict]] = defaultdict(list)
    for v in verdicts:
        by_kernel[v.kernel].append(v)
    lines = [f"  {kernel}: {line.strip()}" for kernel in sorted(by_kernel) for line in _why_lines(by_kernel[kernel])]
    return lines + _unread_lines(verdicts)


def _interval(verdicts: list[CellVerdict]) -> str:
    """The geomean's interval, where every compared cell has one (its pair's, or its own floor's):
    the cells' errors taken as independent, the geomean's half-width is their root mean square
    over the square root of their number."""
    halves = [v.ratio.half_width for v in verdicts if v.ratio.value]
    if not halves or any(half is None for half in halves):
        return ""
    ratio = geomean(v.ratio.value for v in verdicts if v.ratio.value)
    half = math.sqrt(sum(h * h for h in halves) / len(halves)) / math.sqrt(len(halves))
    digits = 3 if half < 0.02 else 2
    return f" [{ratio * math.exp(-half):.{digits}f}, {ratio * math.exp(half):.{digits}f}]"


def _rank(verdicts: list[CellVerdict]) -> tuple[int, int]:
    words = {v.verdict for v in verdicts}
    for rank, word in enumerate(ORDER):
        if word in words:
            return rank, -len(verdicts)
    return len(ORDER), -len(verdicts)


def summary_lines(verdicts: list[CellVerdict], device: str, run_id: str, details: str) -> list[str]:
    """At most MAX_KERNEL_LINES + 3 lines: the counts, one line per kernel (the ones that
    changed first) and where the details are."""
    if not verdicts:
        return [f"history: no cell of {device} was re-measured in this run"]
    counts = Counter(v.verdict for v in verdicts)
    compared = sum(counts[w] for w in ORDER)
    if not compared:
        # a cell that failed has its status as its verdict: said here, or a run's errors go unnoticed
        failed = ", ".join(f"{n} {w}" for w, n in sorted(counts.items()) if w != NEW)
        return [f"history: {len(verdicts)} cells of {device} measured for the first time here (run {run_id})"
                + (f", of them {failed}" if failed else "")
                + "; the next run that re-measures them says whether they got faster or slower",
                f"  details: {details}"]
    head = ", ".join(f"{counts[w]} {w}" for w in ORDER if counts[w])
    rest = ", ".join(f"{n} {w}" for w, n in sorted(counts.items()) if w not in ORDER)
    lines = [f"verdict: {compared} cells of {device} re-measured against their previous measurement (run {run_id}): "
             + head + (f"; also {rest}" if rest else "")]
    by_kernel: dict[str, list[CellVerdict]] = defaultdict(list)
    for v in verdicts:
        by_kernel[v.kernel].append(v)
    ranked = sorted(by_kernel, key=lambda k: (_rank(by_kernel[k]), k))
    width = max(len(k) for k in ranked[:MAX_KERNEL_LINES])
    for kernel in ranked[:MAX_KERNEL_LINES]:
        lines.append(_kernel_line(kernel, by_kernel[kernel], width))
        lines += _why_lines(by_kernel[kernel])
    hidden = ranked[MAX_KERNEL_LINES:]
    if hidden:
        hidden_counts = Counter(v.verdict for k in hidden for v in by_kernel[k])
        lines.append(f"  ... and {len(hidden)} more kernels: "
                     + ", ".join(f"{n} {w}" for w, n in hidden_counts.most_common()))
    lines += _unread_lines(verdicts)
    busy = Counter(v.unconfirmed for v in verdicts if v.unconfirmed)
    lines += [f"  unconfirmed: {n} FASTER/SLOWER called UNCLEAR, {why}: a paired re-measurement would tell"
              for why, n in busy.most_common()]
    beside = [v for v in verdicts if v.neighbours]
    if beside:
        names = sorted({name for v in beside for name in v.neighbours.split(";") if name})
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        lines.append(f"  warning: {len(beside)} cells were timed while other processes used the GPU ({shown}): "
                     "their changes are not confirmed")
    lines.append(f"  details: {details}")
    return lines


CSV_COLUMNS = ("cell", "experiment", "kernel", "variant", "status", "previous_ms", "kernel_ms", "ratio", "verdict",
               "changed", "previous_run", "ratio_low", "ratio_high", "own_floor", "unconfirmed", "paired_rounds", "why",
               *whyline.COLUMNS)


def csv_records(verdicts: list[CellVerdict]) -> list[dict[str, object]]:
    """The verdicts as rows of the verdict CSV (verdicts/<run>.csv and latest.csv: read_latest_verdicts reads them)."""
    return [{"cell": v.cell, "experiment": v.experiment, "kernel": v.kernel, "variant": v.variant,
             "status": v.status, "previous_ms": v.previous_ms, "kernel_ms": v.kernel_ms, "ratio": v.ratio.value,
             "verdict": v.verdict, "changed": ";".join(v.changed), "previous_run": v.previous_run or "",
             "ratio_low": v.ratio.low, "ratio_high": v.ratio.high, "own_floor": v.floor,
             "unconfirmed": v.unconfirmed or "", "paired_rounds": v.ratio.rounds, "why": v.why,
             **whyline.columns(v.why_previous or {}, v.why_new or {})}
            for v in verdicts]


def csv_text(verdicts: list[CellVerdict]) -> str:
    """The verdict CSV's whole text: its header and a row per verdict."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_records(verdicts))
    return text.getvalue()


@dataclass(frozen=True)
class LatestVerdict:
    """One timed row of verdicts/latest.csv, as the history page reads it: the latest run's verdict on a cell and
    its ratio."""

    verdict: str
    ratio: Ratio


def latest_rows(latest_csv: str | Path) -> list[dict[str, str]]:
    """Every row of a verdict CSV, as its text."""
    with open(latest_csv, newline="") as handle:
        return list(csv.DictReader(handle))


def read_latest_verdicts(latest_csv: str | Path) -> dict[str, LatestVerdict]:
    """The timed verdicts of verdicts/latest.csv by cell (an absent file has none); a ratio or an end of its
    interval that is not a positive number is none."""
    path = Path(latest_csv)
    if not path.exists():
        return {}
    return {row["cell"]: LatestVerdict(row["verdict"], Ratio(
                _positive(row.get("ratio")), _positive(row.get("ratio_low")), _positive(row.get("ratio_high")),
                int(row["paired_rounds"]) if row.get("paired_rounds") else None))
            for row in latest_rows(path) if row.get("verdict") in TIMED_VERDICTS}


def _positive(text: str | None) -> float | None:
    number = finite_number(text)
    return number if number is not None and number > 0 else None

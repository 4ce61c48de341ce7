"""paired.csv: the side-by-side measurements of a run's paired cells (convlab.history.pairing),
as the `pair` step hands them to the record step, and the verdict of a paired interval."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

from convlab.atomicfile import write_text_atomically
from convlab.history import whyline
from convlab.history.verdictrule import Ratio
from convlab.measure.row import finite_number


@dataclass(frozen=True)
class PairRow:
    """One line of paired.csv: a cell's side-by-side measurement, or why it has none (``note``)."""

    cell: str
    kernel: str
    previous_hash: str
    kernel_hash: str
    ratio: Ratio = Ratio()  # new / previous, its interval and its rounds (none where it has no measurement)
    previous_ms: float | None = None
    new_ms: float | None = None
    stop: str = ""
    clock_normalised: str = ""
    note: str = ""
    neighbours: int | None = None  # other processes that used the GPU during the rounds (None: not known)
    neighbour_names: str = ""
    sampling: str = ""  # how both versions were sampled, alike ("graph of 33 launches", "per launch")
    unproved: str = ""  # why the pair's times were not checked against the rows' ('' where they were)
    # why a FASTER or SLOWER pair is so (convlab.pairs.whyprofile): its line (or "not read: …") and
    # both versions' hardware counts, where asked for (config verdicts.why)
    why: str = ""
    why_previous: dict = field(default_factory=dict, compare=False)
    why_new: dict = field(default_factory=dict, compare=False)

    @property
    def measured(self) -> bool:
        return self.ratio.bounded

    def columns(self) -> dict[str, object]:
        """The row by paired.csv's columns, in their order: its fields, its ratio as ratio, low, high and rounds."""
        values: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Ratio):
                values.update(ratio=value.value, low=value.low, high=value.high, rounds=value.rounds)
            elif f.name == "why_previous":
                values.update(whyline.columns(self.why_previous, self.why_new))
            elif f.name != "why_new":
                values[f.name] = value
        return values


# PairRow's fields in order, its ratio spelled out in the columns PairRow.columns gives it.
PAIR_COLUMNS = tuple(PairRow("", "", "", "").columns())


def write_pairs(path: str | Path, rows: Iterable[PairRow]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=PAIR_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({name: ("" if value is None else value) for name, value in row.columns().items()})
    write_text_atomically(path, text.getvalue())


def read_pairs(path: str | Path | None) -> dict[str, PairRow]:
    """paired.csv by cell; empty where there is no such file (a run without the step)."""
    if not path or not Path(path).is_file():
        return {}
    pairs = {}
    with open(path, newline="") as handle:
        for record in csv.DictReader(handle):
            rounds, neighbours = finite_number(record.get("rounds")), finite_number(record.get("neighbours"))
            pairs[record["cell"]] = PairRow(
                cell=record["cell"], kernel=record.get("kernel", ""), previous_hash=record.get("previous_hash", ""),
                kernel_hash=record.get("kernel_hash", ""),
                ratio=Ratio(finite_number(record.get("ratio")), finite_number(record.get("low")),
                            finite_number(record.get("high")), int(rounds) if rounds is not None else None),
                previous_ms=finite_number(record.get("previous_ms")),
                new_ms=finite_number(record.get("new_ms")), stop=record.get("stop", ""),
                clock_normalised=record.get("clock_normalised", ""), note=record.get("note", ""),
                neighbours=int(neighbours) if neighbours is not None else None,
                neighbour_names=record.get("neighbour_names", ""), sampling=record.get("sampling", ""),
                unproved=record.get("unproved", ""), why=record.get("why", ""),
                **dict(zip(("why_previous", "why_new"), _counts(record))))
    return pairs


def _counts(record: dict[str, str]) -> tuple[dict, dict]:
    """Both sides' hardware counts from a row's why_ columns; none where it has none."""
    previous, new = whyline.sides_of(record)
    return tuple({k: v for k, v in side.items() if v is not None} for side in (previous, new))  # type: ignore[return-value]

"""The line under a FASTER or SLOWER verdict that says why: what moved most between the previous
version's hardware counts and the new one's (convlab.measure.whycounters), with its numbers, then
the counts a kernel's author checks next.

    why: instructions executed +31 % (FMA +40 a thread); DRAM bytes same; registers 32 → 32

Standard library only (as the counts' names are): the verdicts, the preview and the history page
read it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from convlab.measure.whycounters import COUNTS

# A why that could not be read says so, with the reason.
NOT_READ = "why: not read: "
# A count within this share of the other side's is "same".
SAME_WITHIN = 0.02
# An FMA difference under this many a thread is not named.
FMA_NAMED = 0.5
# Occupancy that moved less than this many points is named only beside a change of registers.
OCCUPANCY_POINTS = 5.0
# L2 traffic's change counts this much against the others' in ranking what moved most.
L2_WEIGHT = 0.5
# Local-memory traffic under this share of the DRAM traffic is not named.
LOCAL_SHARE = 0.01


def columns(previous: Mapping[str, object], new: Mapping[str, object],
            sides: tuple[str, str] = ("previous", "new")) -> dict[str, object]:
    """Both sides' counts as the verdict CSVs' columns: why_<count>_previous and why_<count>_new
    (``sides``: other names for them, as compare's a and b)."""
    return {f"why_{count}_{side}": counts.get(count) for count in COUNTS
            for side, counts in zip(sides, (previous, new))}


COLUMNS = tuple(columns({}, {}))


def sides_of(record: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """The two sides' counts back from a CSV row's why_ columns (numbers where they read as one)."""
    def value(text: object) -> object:
        if text is None or text == "":
            return None
        try:
            return float(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return str(text)
    return tuple({count: value(record.get(f"why_{count}_{side}")) for count in COUNTS}  # type: ignore[return-value]
                 for side in ("previous", "new"))


def _number(counts: Mapping[str, object], name: str) -> float | None:
    value = counts.get(name)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _change(before: float | None, after: float | None) -> float | None:
    """after / before (None where either is unknown; inf from nothing to something)."""
    if before is None or after is None:
        return None
    if before == 0:
        return 1.0 if after == 0 else math.inf
    return after / before


def _percent(ratio: float) -> str:
    if math.isinf(ratio):
        return "from none"
    if abs(ratio - 1) < SAME_WITHIN:
        return "same"
    change = (ratio - 1) * 100
    return f"{change:+.0f} %" if abs(change) >= 10 else f"{change:+.1f} %"


def _bytes(value: float) -> str:
    size = abs(value)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{value / scale:+.1f} {unit}" if value else "0"
    return f"{value:+.0f} B"


def _score(ratio: float | None) -> float:
    if ratio is None:
        return 0.0
    if math.isinf(ratio):
        return 10.0
    return abs(math.log(ratio)) if ratio > 0 else 10.0


def _instructions(previous: Mapping[str, object], new: Mapping[str, object]) -> tuple[float, str] | None:
    ratio = _change(_number(previous, "instructions"), _number(new, "instructions"))
    if ratio is None:
        return None
    text = f"instructions executed {_percent(ratio)}"
    before, after = _number(previous, "fma_per_thread"), _number(new, "fma_per_thread")
    if before is not None and after is not None and abs(after - before) >= FMA_NAMED:
        difference = after - before
        text += f" (FMA {difference:+.0f} a thread)" if abs(difference) >= 10 else f" (FMA {difference:+.1f} a thread)"
    return _score(ratio), text


def _dram(previous: Mapping[str, object], new: Mapping[str, object]) -> tuple[float, str] | None:
    reads = _number(previous, "dram_read_bytes"), _number(new, "dram_read_bytes")
    writes = _number(previous, "dram_write_bytes"), _number(new, "dram_write_bytes")
    if None in reads:
        return None
    before, after = reads[0] + (writes[0] or 0.0), reads[1] + (writes[1] or 0.0)
    ratio = _change(before, after)
    text = f"DRAM bytes {_percent(ratio)}"
    if abs(ratio - 1) >= SAME_WITHIN:
        parts = [f"{what} {_bytes(b - a)}" for what, (a, b) in (("read", reads), ("written", writes))
                 if a is not None and b is not None and abs(b - a) >= SAME_WITHIN * max(before, after)]
        if parts:
            text += f" ({', '.join(parts)})"
    return _score(ratio), text


def _l2(previous: Mapping[str, object], new: Mapping[str, object]) -> tuple[float, str] | None:
    """L2's traffic, which moves with DRAM's (every DRAM byte passes L2) and with L1's misses: ranked
    at half its change, so that DRAM is named first where both moved."""
    ratio = _change(_number(previous, "l2_bytes"), _number(new, "l2_bytes"))
    return None if ratio is None else (L2_WEIGHT * _score(ratio), f"L2 traffic {_percent(ratio)}")


def _registers(previous: Mapping[str, object], new: Mapping[str, object]) -> tuple[float, str] | None:
    before, after = _number(previous, "registers"), _number(new, "registers")
    if before is None or after is None:
        return None
    text = f"registers {before:.0f} → {after:.0f}"
    occupancy = _number(previous, "occupancy_pct"), _number(new, "occupancy_pct")
    moved = None not in occupancy and abs(occupancy[1] - occupancy[0]) >= OCCUPANCY_POINTS
    if (before != after or moved) and None not in occupancy:
        text += f", occupancy {occupancy[0]:.0f} % → {occupancy[1]:.0f} %"
        theoretical = _number(previous, "theoretical_occupancy_pct"), _number(new, "theoretical_occupancy_pct")
        if None not in theoretical and round(theoretical[0]) != round(theoretical[1]):
            text += f" (at most {theoretical[0]:.0f} % → {theoretical[1]:.0f} %)"
    score = _score(_change(before, after))
    if moved:
        score = max(score, _score(_change(occupancy[0], occupancy[1])))
    return score, text


def _local(previous: Mapping[str, object], new: Mapping[str, object]) -> tuple[float, str] | None:
    before, after = _number(previous, "local_bytes"), _number(new, "local_bytes")
    if before is None or after is None or before == after:
        return None
    traffic = max((_number(c, "dram_read_bytes") or 0.0) + (_number(c, "dram_write_bytes") or 0.0)
                  for c in (previous, new))
    if abs(after - before) < LOCAL_SHARE * traffic:
        return None
    return _score(_change(before, after)), f"local memory (spills) {_bytes(after - before)}"


def _stall(previous: Mapping[str, object], new: Mapping[str, object]) -> tuple[float, str] | None:
    before, after = previous.get("top_stall"), new.get("top_stall")
    if not before or not after or before == after:
        return None
    return 0.05, f"top stall {before} → {after}"


def why_line(previous: Mapping[str, object], new: Mapping[str, object]) -> str:
    """'why: …': the count that moved most first, then instructions, DRAM bytes and registers
    where they are not it, and spills, L2 traffic or a new top stall where they moved. Empty where
    neither side has counts."""
    if not previous or not new:
        return ""
    anchors = [_instructions(previous, new), _dram(previous, new), _registers(previous, new)]
    others = [_local(previous, new), _l2(previous, new), _stall(previous, new)]
    said = [item for item in anchors if item is not None]
    movers = said + [item for item in others if item is not None]
    if not movers:
        return ""
    top = max(movers, key=lambda item: item[0])
    rest = [item for item in said if item is not top]
    rest += [item for item in others if item is not None and item is not top and item[0] >= L2_WEIGHT * math.log1p(0.05)]
    return "why: " + "; ".join(text for _, text in [top, *rest])

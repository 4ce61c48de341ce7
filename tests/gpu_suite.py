"""Run the whole GPU suite (every test marked `gpu`, in every test file) and print its tally.

    python tests/gpu_suite.py            # on a machine with an NVIDIA GPU and CuPy: the timing
                                         # verdicts' files alone, then two halves at once
    python tests/gpu_suite.py --serial   # one after the other

Prints one line per test file and a total naming the GPU. Exits 0 only when every GPU test ran
and passed: a skipped GPU test counts against the suite (it did not run here).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def gpu_name() -> str:
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "no nvidia-smi"
    return "; ".join(listed.splitlines()) or "no GPU listed"


def outcome(case: ET.Element) -> str:
    for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        if case.find(tag) is not None:
            return name
    return "passed"


# The suite runs as two halves at once (one GPU takes both: a half waits on the host as often as on
# the GPU), so that it ends within a device machine's ten minutes a command. The first half: the
# kernels and families, about as long as all the rest together.
FIRST_HALF = ("test_gpu.py", "test_gpu_kernels.py", "test_gpu_families.py", "test_gpu_graph.py",
              "test_gpu_shared_memory.py", "test_gpu_uuid.py")


# Files whose tests assert a timed verdict (SAME for one version against itself or a kept version,
# FASTER or SLOWER for a planted slow-down): they run first, alone on the GPU. Beside the other
# half's kernels the lab sees a neighbour on the GPU and rightly calls such a pair UNCLEAR, which is
# not what these tests check. The why's counts too: a GPU's DRAM counters count every process's bytes.
ALONE_FIRST = ("test_gpu_paired.py", "test_gpu_history.py", "test_gpu_kept_versions.py", "test_gpu_watch.py",
               "test_gpu_why.py")


def gpu_files() -> list[str]:
    return sorted(path.name for path in TESTS.glob("test_*.py") if "mark.gpu" in path.read_text())


def halves() -> list[list[str]]:
    """The test files of each half (every file that holds a GPU test and does not run alone is in one)."""
    files = [name for name in gpu_files() if name not in ALONE_FIRST]
    first = [name for name in files if name in FIRST_HALF]
    return [first, [name for name in files if name not in FIRST_HALF]]


def phases(serial: bool) -> list[list[list[str]]]:
    """The suite's phases, one after another; each phase's groups of files run at once."""
    if serial:
        return [[gpu_files()]]
    return [[[name for name in gpu_files() if name in ALONE_FIRST]], halves()]


def main() -> int:
    serial = "--serial" in sys.argv[1:]
    per_file: dict[str, Counter] = defaultdict(Counter)
    took: list[list[float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        started = time.monotonic()
        for phase, groups in enumerate(phases(serial)):
            running = []
            for index, group in enumerate(groups):
                report = Path(scratch) / f"gpu{phase}-{index}.xml"
                command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rfE",
                           f"--junitxml={report}", *(str(TESTS / name) for name in group)]
                running.append((report, subprocess.Popen(command, cwd=TESTS.parent), time.monotonic()))
            took.append([])
            for report, process, began in running:
                process.wait()
                took[-1].append(time.monotonic() - began)
                if not report.is_file():
                    print(f"error: pytest wrote no report ({report.name}): the suite did not run")
                    return 1
                for case in ET.parse(report).getroot().iter("testcase"):
                    per_file[case.get("classname", "?").split(".")[-1]][outcome(case)] += 1
        seconds = time.monotonic() - started
    total = sum(per_file.values(), Counter())
    print(f"\nGPU suite by file ({gpu_name()}):")
    for name, tally in sorted(per_file.items()):
        print(f"  {name}: " + ", ".join(f"{count} {kind}" for kind, count in sorted(tally.items())))
    parts = "" if serial else (f" (the timed verdicts alone: {took[0][0]:.0f} s; then two halves at once: "
                               f"{', '.join(f'{t:.0f} s' for t in took[1])})")
    print(f"GPU suite: {total['passed']} passed, {total['failed']} failed, {total['error']} errors, "
          f"{total['skipped']} skipped in {seconds:.0f} s{parts}")
    return 0 if total["passed"] and not (total["failed"] or total["error"] or total["skipped"]) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Run the whole GPU suite (every test marked `gpu`, in every test file) and print its tally.

    python tests/gpu_suite.py            # on a machine with an NVIDIA GPU and CuPy: two halves at once
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


def halves() -> list[list[str]]:
    """The test files of each half (every file that holds a GPU test is in one)."""
    files = sorted(path.name for path in TESTS.glob("test_*.py") if "mark.gpu" in path.read_text())
    first = [name for name in files if name in FIRST_HALF]
    return [first, [name for name in files if name not in FIRST_HALF]]


def main() -> int:
    serial = "--serial" in sys.argv[1:]
    groups = [[name for group in halves() for name in group]] if serial else halves()
    with tempfile.TemporaryDirectory() as scratch:
        started = time.monotonic()
        running = []
        for index, group in enumerate(groups):
            report = Path(scratch) / f"gpu{index}.xml"
            command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rfE",
                       f"--junitxml={report}", *(str(TESTS / name) for name in group)]
            running.append((report, subprocess.Popen(command, cwd=TESTS.parent), time.monotonic()))
        per_file: dict[str, Counter] = defaultdict(Counter)
        took = []
        for report, process, began in running:
            process.wait()
            took.append(time.monotonic() - began)
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
    parts = "" if serial else f" (two halves at once: {', '.join(f'{t:.0f} s' for t in took)})"
    print(f"GPU suite: {total['passed']} passed, {total['failed']} failed, {total['error']} errors, "
          f"{total['skipped']} skipped in {seconds:.0f} s{parts}")
    return 0 if total["passed"] and not (total["failed"] or total["error"] or total["skipped"]) else 1


if __name__ == "__main__":
    sys.exit(main())

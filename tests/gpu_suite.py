"""Run the whole GPU suite (every test marked `gpu`, in every test file) and print its tally.

    python tests/gpu_suite.py            # on a machine with an NVIDIA GPU and CuPy

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


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "gpu.xml"
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rfE",
                        f"--junitxml={report}", str(TESTS)], cwd=TESTS.parent)
        seconds = time.monotonic() - started
        if not report.is_file():
            print("error: pytest wrote no report: the suite did not run")
            return 1
        cases = ET.parse(report).getroot().iter("testcase")
        per_file: dict[str, Counter] = defaultdict(Counter)
        for case in cases:
            per_file[case.get("classname", "?").split(".")[-1]][outcome(case)] += 1
    total = sum(per_file.values(), Counter())
    print(f"\nGPU suite by file ({gpu_name()}):")
    for name, tally in sorted(per_file.items()):
        print(f"  {name}: " + ", ".join(f"{count} {kind}" for kind, count in sorted(tally.items())))
    print(f"GPU suite: {total['passed']} passed, {total['failed']} failed, {total['error']} errors, "
          f"{total['skipped']} skipped in {seconds:.0f} s")
    return 0 if total["passed"] and not (total["failed"] or total["error"] or total["skipped"]) else 1


if __name__ == "__main__":
    sys.exit(main())

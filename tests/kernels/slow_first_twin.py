"""The direct twin, a second late on its first call in a process: a window to kill the service
mid-cell. It touches the file CONVLAB_TEST_MARKER names when the delay begins."""

import os
import time
from pathlib import Path

from convlab.backends.cpu_twins import direct_hwc

IMPLEMENTATION = "numpy sliding-window, first call delayed (a fault test)"
FIRST_CALL_DELAY_S = 1.0
_calls = []


def convolve(image, weights, problem, out) -> None:
    if not _calls:
        if os.environ.get("CONVLAB_TEST_MARKER"):
            Path(os.environ["CONVLAB_TEST_MARKER"]).touch()
        time.sleep(FIRST_CALL_DELAY_S)
    _calls.append(1)
    direct_hwc.convolve(image, weights, problem, out)

"""A cpu twin that kills its own process: the cpu's stand-in for a GPU worker lost mid-cell."""

import os
import signal

IMPLEMENTATION = "kills its own process (a fault test)"


def convolve(image, weights, problem, out) -> None:
    os.kill(os.getpid(), signal.SIGKILL)

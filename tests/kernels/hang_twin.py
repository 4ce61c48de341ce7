"""A cpu twin that never returns in time: the cpu's stand-in for a hung kernel."""

import time

IMPLEMENTATION = "sleeps for an hour (a fault test)"


def convolve(image, weights, problem, out) -> None:
    time.sleep(3600)

"""The observers every cell's measurement has (convlab.measure.observers says how they are called)."""

from __future__ import annotations

from convlab.measure.observers.base import Observer
from convlab.measure.observers.kerneltime import TimingObserver
from convlab.measure.observers.setupinfo import SetupObserver
from convlab.measure.observers.throughput import ThroughputObserver
from convlab.measure.observers.verification import VerificationObserver

# Every cell's, without state; the runner adds the cell's own stage times, phase clock and telemetry.
OBSERVERS: tuple[Observer, ...] = (SetupObserver(), TimingObserver(), ThroughputObserver(), VerificationObserver())

"""Each cell's own floor, learned from its reruns with nothing changed, on synthetic histories of
known drift: the false calls of a rerun and the power to see a planted change; and a FASTER or
SLOWER measured on a busy host stays UNCLEAR."""

from __future__ import annotations

import json
import math
import random

import pytest

from convlab.history import store
from convlab.history.noise import MIN_PAIRS, cell_noise, quiet_log_ratios
from convlab.history.verdicts import judge, summary_lines
from convlab.history.vouching import why_unvouched

THRESHOLD = 0.02  # config verdicts.threshold's default
BASE = {"kernel_hash": "k1", "code_version": "v1", "spec_hash": "c1", "gpu_uuid": "GPU-a", "input_hash": "i1"}


def kept(ms: float, index: int, **changed: str) -> store.Measurement:
    fields = {**BASE, **changed}
    return store.Measurement("cell", "conv2d", "direct", "default", "ok", ms, f"check{index}", f"run{index}",
                             ms * 0.005, f"t{index:04d}", "commit", fields["code_version"], fields["kernel_hash"],
                             fields["spec_hash"], fields["gpu_uuid"], "{}", input_hash=fields["input_hash"])


def new(ms: float, backend: str = "cuda", lock_wait: float = 0.02, **changed: str) -> dict:
    row = {"backend": backend, "phase_ms": f"startup=10;lock_wait={lock_wait};timing=5"}
    return {"cell": "cell", "kernel": "direct", "status": "ok", "kernel_ms": ms, "kernel_ms_iqr": ms * 0.005,
            **BASE, **changed, "row_json": json.dumps(row)}


def drifting_history(rng: random.Random, sigma: float, runs: int, ms: float = 0.05) -> list[store.Measurement]:
    return [kept(ms * math.exp(rng.gauss(0, sigma)), i) for i in range(runs)]


def test_only_reruns_with_nothing_changed_teach_the_floor():
    history = [kept(1.0, 0), kept(1.01, 1), kept(2.0, 2, kernel_hash="k2"), kept(2.02, 3, kernel_hash="k2")]
    assert quiet_log_ratios(history) == pytest.approx([math.log(1.01), math.log(1.01)])
    assert cell_noise(history, THRESHOLD) is None  # fewer than MIN_PAIRS quiet pairs: the drift floor
    assert cell_noise([kept(1.0 + i / 1000, i) for i in range(MIN_PAIRS + 1)], THRESHOLD) is not None


def test_a_rerun_with_nothing_changed_is_rarely_called_a_change():
    """Drift of 2 % (a quiet GPU): of 2000 cells, each with 8 reruns of history, at most 1 % of a
    further rerun's verdicts are FASTER or SLOWER."""
    rng = random.Random(3)
    calls = 0
    for _ in range(2000):
        history = drifting_history(rng, 0.02, 9)
        latest = 0.05 * math.exp(rng.gauss(0, 0.02))
        judged = judge(new(latest), history[-1], cell_noise(history, THRESHOLD), threshold=THRESHOLD)
        calls += judged.verdict in ("FASTER", "SLOWER")
    assert calls / 2000 <= 0.01


@pytest.mark.parametrize(("slow_down", "power"), [(1.10, 0.95), (1.05, 0.95)])
def test_a_planted_slow_down_clear_of_a_quiet_cells_drift_is_slower(slow_down, power):
    """Drift of 0.5 %: a 10 % and a 5 % slow-down are SLOWER in at least 95 % of the cells (the
    8 % drift floor would call the 5 % one SAME), each with its interval around the ratio."""
    rng = random.Random(5)
    slower = 0
    for _ in range(500):
        history = drifting_history(rng, 0.005, 9, ms=1.0)
        judged = judge(new(slow_down * math.exp(rng.gauss(0, 0.005))), history[-1], cell_noise(history, THRESHOLD),
                       threshold=THRESHOLD)
        slower += judged.verdict == "SLOWER"
        assert judged.ratio.low < judged.ratio.value < judged.ratio.high
    assert slower / 500 >= power
    common = judge(new(1.05), kept(1.0, 0), None, threshold=THRESHOLD)
    assert common.verdict == "SAME" and common.ratio.low is None


def test_a_change_on_a_busy_host_is_unclear_and_the_run_says_why():
    history = [kept(1.0, i) for i in range(3)]
    on_cpu = judge(new(1.5, backend="cpu"), history[-1], threshold=THRESHOLD)
    beside_another = judge(new(1.5, lock_wait=250.0), history[-1], threshold=THRESHOLD)
    quiet = judge(new(1.5), history[-1], threshold=THRESHOLD)
    assert (on_cpu.verdict, beside_another.verdict, quiet.verdict) == ("UNCLEAR", "UNCLEAR", "SLOWER")
    assert on_cpu.unconfirmed == "measured while the cpu backend shares its host"
    assert beside_another.unconfirmed == "measured while another process measured on this GPU"
    assert judge(new(1.001, backend="cpu"), history[-1], threshold=THRESHOLD).verdict == "SAME"
    lines = summary_lines([on_cpu, beside_another, quiet], "dev", "run9", "details.csv")
    assert "  unconfirmed: 1 FASTER/SLOWER called UNCLEAR, measured while the cpu backend shares its host: " \
           "a paired re-measurement would tell" in lines


def test_the_threshold_is_the_least_floor_a_quiet_cell_gets():
    """config verdicts.threshold: a very quiet cell's floor is the threshold, a noisy one's its own."""
    quiet = [kept(1.0 + (i % 2) * 1e-4, i) for i in range(8)]
    assert cell_noise(quiet, THRESHOLD).floor == pytest.approx(THRESHOLD)
    assert cell_noise(quiet, 0.05).floor == pytest.approx(0.05)
    assert judge(new(1.03), quiet[-1], cell_noise(quiet, 0.05), threshold=0.05).verdict == "SAME"
    assert judge(new(1.03), quiet[-1], cell_noise(quiet, THRESHOLD), threshold=THRESHOLD).verdict == "SLOWER"
    noisy = drifting_history(random.Random(2), 0.05, 9, ms=1.0)
    assert cell_noise(noisy, 0.05).floor > 0.05


def test_a_throttled_gpu_is_a_host_that_cannot_be_trusted_to_be_quiet():
    assert "throttled" in why_unvouched({"backend": "cuda", "throttled": "yes", "phase_ms": "lock_wait=0.1"})
    assert why_unvouched({"backend": "cuda", "throttled": "no", "phase_ms": "lock_wait=0.1"}) is None

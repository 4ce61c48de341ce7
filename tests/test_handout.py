"""Which free worker a waiting cell gets: the one holding its problem first, and never a worker left
idle while a cell waits."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from convlab.service import worker
from convlab.service.handout import FreeWorkers, problem_of

SPEC = {"backend": "cuda", "experiment": "conv2d", "size": 4096, "stride": 1, "filter": "laplacian",
        "filter_size": 3, "image": "data/input_4096.png", "kernel": "direct", "settings": {},
        "tunables": {"block": 16}, "timing": {"budget_s": 1.0}, "verify": {"seed": 0}}


@dataclass(frozen=True)
class FakeWorker:
    index: int


def waiting_job(free: FreeWorkers, problem: str, got: dict[str, FakeWorker]) -> threading.Thread:
    """A job of ``problem`` waiting for a worker in a thread; its worker lands in ``got``. Returns
    once the job waits."""
    before = free.waiting
    thread = threading.Thread(target=lambda: got.__setitem__(problem, free.get(problem, timeout_s=5)))
    thread.start()
    deadline = time.monotonic() + 5
    while thread.is_alive() and free.waiting == before and time.monotonic() < deadline:
        time.sleep(0.001)
    return thread


def two_busy_gpus() -> tuple[FreeWorkers, FakeWorker, FakeWorker]:
    """Two GPUs measuring: GPU 0 a cell of problem P, GPU 1 one of Q (so each holds that problem)."""
    free = FreeWorkers()
    for index in (0, 1):
        free.put(FakeWorker(index))
    return free, free.get("P"), free.get("Q")


def test_cells_of_one_problem_share_a_key_and_other_problems_do_not() -> None:
    other_kernel = {**SPEC, "kernel": "cudnn", "settings": {"math": "strict"}, "tunables": {}}
    assert problem_of(other_kernel) == problem_of(SPEC)
    assert problem_of({**SPEC, "stride": 2}) != problem_of(SPEC)
    assert problem_of({**SPEC, "image": "data/input_2048.png", "size": 2048}) != problem_of(SPEC)


# Two jobs wait, in this order, while GPU 0 (holding P) and GPU 1 (holding Q) measure; then the GPU
# named first comes free, then the other: which job gets which.
HANDOUTS = {
    # GPU 1 holds the longer-waiting job's problem: GPU 0 goes to the job of P, which it holds
    "a freed worker goes to the waiting job whose problem it holds": ("Q", "P", 0, {"P": 0, "Q": 1}),
    # the job of R does not take GPU 0 from the job of P, which does; no GPU stays idle
    "a worker held for a waiting job is left to it": ("R", "P", 0, {"P": 0, "R": 1}),
    # GPU 0, busy, holds P: the job of P leaves GPU 1 to the job of R, whose problem none holds
    "a job whose problem a busy worker holds leaves a free one to a job whose problem none holds":
        ("P", "R", 1, {"R": 1, "P": 0}),
}


@pytest.mark.parametrize(("first", "second", "freed", "expected"), HANDOUTS.values(), ids=HANDOUTS)
def test_which_waiting_job_gets_a_freed_worker(first: str, second: str, freed: int, expected: dict[str, int]) -> None:
    free, *gpus = two_busy_gpus()
    got: dict[str, FakeWorker] = {}
    jobs = {first: waiting_job(free, first, got), second: waiting_job(free, second, got)}
    for index in (freed, 1 - freed):
        free.put(gpus[index])
        taker = next(problem for problem, gpu in expected.items() if gpu == index)
        jobs[taker].join(5)
        assert got[taker] == gpus[index]
    assert got == {problem: gpus[index] for problem, index in expected.items()}


def test_a_job_whose_problem_no_one_holds_takes_a_free_worker_no_waiting_job_needs() -> None:
    free, gpu0, gpu1 = two_busy_gpus()
    free.put(gpu0)
    free.put(gpu1)
    assert free.get("R") in (gpu0, gpu1)  # no job waits for either: work is never held back


def test_a_fresh_worker_holds_nothing_and_a_job_with_no_worker_gives_up_at_its_timeout() -> None:
    free = FreeWorkers()
    free.put(FakeWorker(0))
    gpu0 = free.get("P")
    assert free.holds(gpu0, "P")
    assert free.get("P", timeout_s=0.05) is None
    free.put(gpu0, fresh=True)  # its replacement after a crash, or the worker after a rest
    assert not free.holds(gpu0, "P")
    assert free.take_all() == [gpu0]
    assert free.take_all() == []


def test_a_job_waits_for_no_holder_when_it_alone_waits() -> None:
    free, _, gpu1 = two_busy_gpus()  # GPU 0 stays busy
    got: dict[str, FakeWorker] = {}
    housed = waiting_job(free, "P", got)
    free.put(gpu1)  # GPU 0 still measures: the job of P takes GPU 1 rather than leave it idle
    housed.join(5)
    assert got == {"P": gpu1}


def test_a_worker_is_remembered_for_as_many_problems_as_it_keeps() -> None:
    free = FreeWorkers()
    free.put(FakeWorker(0))
    for problem in range(worker.PROBLEMS_KEPT + 1):
        free.put(free.get(problem))
    gpu0 = free.take_all()[0]
    assert [free.holds(gpu0, problem) for problem in range(worker.PROBLEMS_KEPT + 1)] == [
        False, *[True] * worker.PROBLEMS_KEPT]

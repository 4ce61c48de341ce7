"""The timing loop's stopping rules, with a synthetic clock (tests check behaviour, not speed)."""

import itertools
from types import SimpleNamespace

import pytest

from convlab.measure import timing
from convlab.measure.timing import STAGES_IN_RUN_MS, StagedSample, Stages, measure, time_stages_alone

SETTINGS = {"mode": "warm", "warmup": 2, "min_reps": 10, "max_reps": 200, "batch": 5,
            "stable_rel": 0.01, "budget_s": 60.0}


def fake_batches(values):
    source = itertools.cycle(values)
    calls = []

    def time_batch(run, n, cold):
        calls.append((n, cold))
        return [next(source) for _ in range(n)]

    return time_batch, calls


def test_stops_when_the_median_is_stable():
    time_batch, calls = fake_batches([1.0, 1.02, 0.98])
    result = measure(lambda: None, time_batch, SETTINGS)
    assert result.stop == "stable"
    assert result.reps >= SETTINGS["min_reps"]
    assert result.median_ms == pytest.approx(1.0, rel=0.03)
    assert calls[:2] == [(1, False), (1, False)]  # warm-up first (1 + warmup-1 runs), untimed


def test_stops_at_max_reps_when_never_stable():
    drifting = (float(i) for i in itertools.count(1))
    result = measure(lambda: None, lambda run, n, cold: [next(drifting) for _ in range(n)],
                     dict(SETTINGS, stable_rel=1e-9))
    assert result.stop == "max_reps" and result.reps == 200


def test_stops_at_the_budget():
    drifting = (float(i) for i in itertools.count(1))
    result = measure(lambda: None, lambda run, n, cold: [next(drifting) for _ in range(n)],
                     dict(SETTINGS, stable_rel=1e-9, max_reps=10**9, budget_s=0.0))
    assert result.stop == "budget" and result.reps == 3  # the floor once the budget is spent


def test_a_slow_kernel_stops_at_three_repeats_once_the_budget_is_spent():
    calls = []

    def slow(run, n, cold):
        calls.append(n)
        # about 2 s per launch, like seed 001's row-partition GEMM at 4096^2, never stable
        return [2000.0 + 100.0 * len(calls) + i for i in range(n)]

    result = measure(lambda: None, slow, dict(SETTINGS, budget_s=0.0))
    assert result.reps == 3 and result.stop == "budget"
    assert calls[0] == 1 and len(calls) == 3  # one warm-up, timed as the first repeat, then batches of one


@pytest.mark.parametrize("first_ms, counted", [(150.0, True), (50.0, False)])
def test_only_a_slow_kernels_one_warm_up_is_a_repeat(first_ms, counted):
    """After the launch step's run, a kernel of a tenth of the budget or more needs one warm-up,
    which is then as warm as any repeat; a faster kernel's warm-up runs stay out of its samples."""
    runs = itertools.chain([first_ms], itertools.repeat(first_ms * 0.8))
    result = measure(lambda: None, lambda run, n, cold: [next(runs) for _ in range(n)], dict(SETTINGS, budget_s=1.0))
    assert (result.max_ms == first_ms) is counted


def test_cold_mode_is_passed_to_the_backend_and_recorded():
    time_batch, calls = fake_batches([2.0])
    result = measure(lambda: None, time_batch, dict(SETTINGS, mode="cold"))
    assert all(cold for _, cold in calls) and result.mode == "cold"
    assert result.min_ms == result.max_ms == 2.0 and result.iqr_ms == 0.0


GRAPH = dict(SETTINGS, mode="graph")


def fake_capture(per_run_ms):
    """A graph whose replays take ``per_run_ms`` per run; records the sizes captured."""
    captured = []

    def capture(run, launches):
        captured.append(launches)
        return lambda n: [per_run_ms] * n

    return capture, captured


def test_graph_mode_sizes_one_replay_to_about_a_millisecond():
    time_batch, calls = fake_batches([0.004])  # the event floor: above the kernel's real 0.001 ms
    capture, captured = fake_capture(0.001)
    result = measure(lambda: None, time_batch, GRAPH, capture)
    # sized from the warm-up first (1 / 0.004), then captured again once a replay took 0.25 ms
    assert captured == [250, 1000]
    assert result.mode == "graph" and result.applied == "graph" and result.launches == 1000
    assert result.median_ms == pytest.approx(0.001) and result.fallback == ""
    assert all(n >= 1 for n, _ in calls) and len(calls) == 2  # only the warm-up went per launch


def test_graph_mode_keeps_a_replay_already_long_enough():
    time_batch, _ = fake_batches([0.3])
    capture, captured = fake_capture(0.3)
    result = measure(lambda: None, time_batch, GRAPH, capture)
    assert captured == [4] and result.launches == 4 and result.median_ms == pytest.approx(0.3)


def test_a_slow_kernel_is_a_graph_of_one_run_and_is_not_replayed_to_size_it():
    replays = []
    time_batch, _ = fake_batches([5.0])

    def capture(run, launches):
        return lambda n: replays.append(n) or [5.0] * n

    result = measure(lambda: None, time_batch, GRAPH, capture)
    assert result.launches == 1 and result.applied == "graph"
    assert sum(replays) == result.reps  # every replay is a timed sample


@pytest.mark.parametrize("capture", [None, "refuses"])
def test_a_run_that_cannot_be_captured_is_timed_per_launch_and_says_why(capture):
    from convlab.measure.timing import GraphRefused

    def refuses(run, launches):
        raise GraphRefused("NotImplementedError: calling cuBLAS API during stream capture is currently unsupported")

    time_batch, calls = fake_batches([0.02])
    result = measure(lambda: None, time_batch, GRAPH, refuses if capture else None)
    assert result.mode == "graph" and result.applied == "warm" and result.launches is None
    assert result.fallback.startswith("graph capture refused, timed per launch")
    assert ("cuBLAS" in result.fallback) if capture else ("no graph capture" in result.fallback)
    assert result.median_ms == pytest.approx(0.02) and result.reps >= SETTINGS["min_reps"]
    assert not any(cold for _, cold in calls)


def test_warm_and_cold_never_capture():
    def capture(run, launches):
        raise AssertionError("only mode graph captures")

    for mode in ("warm", "cold"):
        time_batch, _ = fake_batches([1.0])
        result = measure(lambda: None, time_batch, dict(SETTINGS, mode=mode), capture)
        assert result.applied == mode and result.launches is None and result.fallback == ""


def test_a_slow_kernels_stages_share_one_budget(monkeypatch):
    """Two stages of 150 ms each, never stable, on a synthetic clock: with the cell's 1 s budget
    split between them each stops after 4 runs (its warm-up counted), where a budget each would
    have taken 7."""
    clock = [0.0]
    runs: dict[str, int] = {}

    def time_batch(run, n, cold):
        runs[run.__name__] = runs.get(run.__name__, 0) + n
        clock[0] += 0.15 * n
        return [150.0 * (1 + 0.05 * (runs[run.__name__] + i)) for i in range(n)]

    def im2col():
        pass

    def gemm():
        pass

    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    medians = time_stages_alone([("im2col", im2col), ("gemm", gemm)], time_batch, dict(SETTINGS, budget_s=1.0))
    assert runs == {"im2col": 4, "gemm": 4}
    assert [name for name, _ in medians] == ["im2col", "gemm"]


def staged_clock(stage_ms):
    """A backend's two timers over stages of ``stage_ms`` each (every later run 1 % slower, never
    quite stable): what each was asked for."""
    calls = {"runs": [], "staged": []}
    runs = itertools.count()

    def time_batch(run, n, cold):
        calls["runs"].append(n)
        return [sum(stage_ms) * (1 + 0.001 * next(runs)) for _ in range(n)]

    def time_stages(stages, n, cold):
        calls["staged"].append((len(stages), n, cold))
        samples = []
        for _ in range(n):
            scale = 1 + 0.001 * next(runs)
            samples.append(StagedSample(sum(stage_ms) * scale, tuple(ms * scale for ms in stage_ms)))
        return samples

    return time_batch, time_stages, calls


def two_stages(time_stages):
    return Stages((("im2col", lambda: None), ("gemm", lambda: None)), time_stages)


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_a_long_runs_stages_come_from_its_own_repeats(mode):
    """A run of 3 ms in two stages: every timed repeat reads the clock between the stages, and
    their medians are the stages' times: no stage is run again on its own."""
    time_batch, time_stages, calls = staged_clock([1.0, 2.0])
    result = measure(lambda: None, time_batch, dict(SETTINGS, mode=mode), stages=two_stages(time_stages))
    assert result.stages_in_run
    assert [name for name, _ in result.stage_ms] == ["im2col", "gemm"]
    (_, im2col), (_, gemm) = result.stage_ms
    assert im2col == pytest.approx(1.0, rel=0.05) and gemm == pytest.approx(2.0, rel=0.05)
    assert result.median_ms == pytest.approx(3.0, rel=0.05)
    # the timed repeats were all staged; only the warm-up's later runs went through time_batch
    assert sum(n for _, n, _ in calls["staged"]) == 1 + result.reps
    assert calls["runs"] == [SETTINGS["warmup"] - 1]
    assert all(count == 2 and cold == (mode == "cold") for count, _, cold in calls["staged"])


def test_a_short_runs_stages_are_left_to_be_timed_alone():
    time_batch, time_stages, calls = staged_clock([0.1 * STAGES_IN_RUN_MS, 0.2 * STAGES_IN_RUN_MS])
    result = measure(lambda: None, time_batch, SETTINGS, stages=two_stages(time_stages))
    assert not result.stages_in_run and result.stage_ms == ()
    assert calls["staged"] == [(2, 1, False)]  # the first warm-up run only: the rest went per launch


def test_a_slow_kernels_counted_warm_up_gives_its_stages_a_sample_too():
    """A 300 ms run stops at three repeats once its budget is spent, the warm-up among them: each
    stage's median is of three samples, as the run's is."""
    time_batch, time_stages, calls = staged_clock([100.0, 200.0])
    result = measure(lambda: None, time_batch, dict(SETTINGS, budget_s=0.0), stages=two_stages(time_stages))
    assert result.reps == 3 and result.stages_in_run and not calls["runs"]
    assert sum(n for _, n, _ in calls["staged"]) == 3
    assert dict(result.stage_ms)["gemm"] == pytest.approx(200.0 * 1.001)  # the middle of 1.000, 1.001, 1.002


def test_a_graph_timed_runs_stages_are_not_read_from_its_replays():
    time_batch, time_stages, _ = staged_clock([1.0, 2.0])
    capture, _ = fake_capture(3.0)
    result = measure(lambda: None, time_batch, GRAPH, capture, stages=two_stages(time_stages))
    assert result.applied == "graph" and not result.stages_in_run and result.stage_ms == ()

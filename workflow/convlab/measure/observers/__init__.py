"""What a cell's measurement reports, as observers (after Kernel Tuner's): each one reads or
watches one part of the measurement and gives its row columns through one method.

Every observer has a lifecycle around each step of the cell (place, setup, launch, timing, e2e,
verify): ``before(step, run)`` as the step begins, ``after(step, run)`` once it succeeded (under
the step's guard: a kernel failure there fails the step), ``abandon()`` when a step failed and
the cell ends there. What happens during the timed work is watched between ``before("timing")``
and ``after("e2e")``: the GPU telemetry (convlab.measure.telemetry) samples on a thread then.
Last, the runner asks each observer for its columns, with what the steps produced
(convlab.run.steps.Result); an observer whose part did not happen (a failed cell has no time) gives
no columns. One module each (after Kernel Tuner's observers/: base.py and one file per observer); the
phase clock (convlab.measure.phases) and the GPU telemetry are
observers too, beside what they observe.
"""

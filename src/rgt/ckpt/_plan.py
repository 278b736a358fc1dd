"""The online checkpoint interval: Daly's optimum from a cost measured while training runs.

The cost of a checkpoint, delta, is what training loses to it: the time ``save`` blocks the loop
plus, for an asynchronous save, the slowdown of the steps that run while the writer works
(they share cores and memory bandwidth with it). Both are measured here from the loop itself:
``due()`` is called once per step, so the time between two calls is a step's duration; steps
taken while the writer is idle give the baseline, and each step taken while it runs adds its
excess over that baseline to the current save's interference. With delta and the MTBF (from
the user or the platform profile) ``daly_interval`` gives the compute time between saves.

First-order expectations reported with the interval (tau = interval, M = MTBF):
overhead = delta/tau (saving) + (tau + delta)/(2M) (work redone after failures), and the work
lost to one failure, on average (tau + delta)/2, at most tau + delta.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rgt.ckpt._interval import daly_interval

SMOOTHING = 0.2  # weight of the newest measurement in the running averages


@dataclass(frozen=True)
class IntervalPlan:
    """What ``due()`` decided the interval from, and what it expects that interval to cost."""

    interval_s: float
    delta_s: float
    blocking_s: float
    interference_s: float
    mtbf_s: float
    expected_overhead: float  # fraction of wall time lost to saving plus redone work
    expected_lost_work_s: float  # per failure, on average


def _blend(old: float | None, new: float) -> float:
    return new if old is None else (1 - SMOOTHING) * old + SMOOTHING * new


class IntervalPlanner:
    """Measures delta online and turns it into Daly's interval for a given MTBF."""

    def __init__(self, mtbf_s: float) -> None:
        self.mtbf_s = mtbf_s
        self.blocking_s: float | None = None
        self.interference_s: float | None = None
        self.idle_step_s: float | None = None
        self._last_tick: float | None = None
        self._excess = 0.0
        self._writing = False
        self._saved_since_tick = False

    def tick(self, writer_busy: bool) -> None:
        """One call per training step (from ``due``): classify the step that just ended."""
        now = time.monotonic()
        if self._last_tick is not None and not self._saved_since_tick:
            step = now - self._last_tick
            if self._writing and self.idle_step_s is not None:
                self._excess += max(0.0, step - self.idle_step_s)
            elif not self._writing:
                self.idle_step_s = _blend(self.idle_step_s, step)
        if self._writing and not writer_busy:
            self.interference_s = _blend(self.interference_s, self._excess)
            self._writing = False
        self._last_tick, self._saved_since_tick = now, False

    def saved(self, blocking_s: float, asynchronous: bool) -> None:
        """A save blocked the loop for ``blocking_s``; its writer now runs if ``asynchronous``."""
        self.blocking_s = _blend(self.blocking_s, blocking_s)
        if not asynchronous:
            self.interference_s = self.interference_s or 0.0
        self._writing, self._excess, self._saved_since_tick = asynchronous, 0.0, True

    def plan(self) -> IntervalPlan | None:
        """The current plan; ``None`` until one save has been measured."""
        if self.blocking_s is None:
            return None
        interference = self.interference_s or 0.0
        delta = max(self.blocking_s + interference, 1e-6)
        tau = daly_interval(delta, self.mtbf_s)
        overhead = delta / tau + (tau + delta) / (2 * self.mtbf_s)
        return IntervalPlan(
            tau, delta, self.blocking_s, interference, self.mtbf_s, overhead, (tau + delta) / 2
        )

"""When to save: the cadence ``Checkpointer.due`` checks, Daly's online interval, stop signals.

A mixin of ``Checkpointer`` (which sets the attributes declared here); kept apart so the
saving and loading code reads on its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from rgt.ckpt._plan import IntervalPlan, IntervalPlanner
from rgt.ckpt._signals import DEFAULT_SIGNALS, StopRequest
from rgt.errors import UsageError


class Cadence:
    """``due``, ``interval_plan`` and the stop-signal hook of a ``Checkpointer``."""

    every_steps: int | None
    every_seconds: float | None
    smoke: bool
    planner: IntervalPlanner | None
    asynchronous: bool
    saves: int
    last_save_seconds: float | None
    _last_save_clock: float
    _stop: StopRequest

    @property
    def writing(self) -> bool:
        raise NotImplementedError

    def due(self, step: int | None = None, seconds: float | None = None) -> bool:
        """Should the loop save now? True every ``every_steps`` steps (``step`` > 0), when
        ``seconds`` (or ``every_seconds``) passed since the last save, after a stop signal,
        and on every call in a smoke run (``RGT_SMOKE=1``). With only ``mtbf_s`` set, the
        interval is Daly's for the measured save cost (see ``interval_plan``); the first call
        saves at once, to measure it. Call it once per training step."""
        if self.planner is not None:
            self.planner.tick(self.writing)
        if self.smoke or self.save_requested:
            return True
        interval = self.every_seconds if seconds is None else seconds
        if interval is None and self.every_steps is None and self.planner is not None:
            current = self.planner.plan()
            if current is None:
                return True
            interval = current.interval_s
        if interval is None and (step is None or self.every_steps is None):
            raise UsageError(
                "due() has no cadence to check",
                fix="pass every_steps=, every_seconds= or mtbf_s= to the Checkpointer, or "
                "seconds= to due()",
            )
        if step is not None and self.every_steps and step > 0 and step % self.every_steps == 0:
            return True
        return interval is not None and time.monotonic() - self._last_save_clock >= interval

    def _count_save(self, started: float) -> None:
        """A save returned: count it, time it (``perf_counter`` at its start), restart the
        interval clock and tell the planner what the save cost the loop."""
        self.saves += 1
        self.last_save_seconds = time.perf_counter() - started
        self._last_save_clock = time.monotonic()
        if self.planner is not None:
            self.planner.saved(self.last_save_seconds, self.asynchronous)

    def interval_plan(self) -> IntervalPlan | None:
        """The measured save cost, Daly's interval for ``mtbf_s`` and its expected overhead and
        lost work; ``None`` without ``mtbf_s`` or before the first save."""
        return None if self.planner is None else self.planner.plan()

    def install_signal_handler(self, signals: Iterable[int] = DEFAULT_SIGNALS) -> None:
        """On these signals, set ``should_stop``; the loop then saves once and exits."""
        self._stop.install(signals)

    @property
    def should_stop(self) -> bool:
        return self._stop.requested

    @property
    def save_requested(self) -> bool:
        return self._stop.requested

    @property
    def stop_signal(self) -> int | None:
        """The signal that asked the run to stop, if one did."""
        return self._stop.signum

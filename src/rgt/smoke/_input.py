"""Time waiting for data vs time computing: ``rgt.smoke.timed_loader`` and the overfit's check.

``timed_loader(loader)`` wraps any iterable of batches in the training loop. The time from the
loop asking for a batch to the batch arriving is *waiting*; the time from a batch arriving to
the loop asking for the next is *computing*. Every ``every`` batches it appends one record to
``$RGT_OUTPUT_DIR/metrics.jsonl`` (``{"input_wait_s", "input_step_s", "input_batches"}``), which
the agent's sentinel reads to raise ``input_bound``. Without ``RGT_OUTPUT_DIR`` it only counts.

``input_reading(log, outputs)`` is plain `rgt smoke`'s: the same share from what its run printed
and recorded. ``measure(loader, compute)`` is the overfit smoke's version (``smoke.overfit(...,
loader=...)``): it draws a few batches, running one forward and backward pass of the script's
own loss between draws, so DataLoader workers prefetch as they do in training.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from rgt.agent.probes import input_wait

T = TypeVar("T")
SKIP = 1  # the first batch includes the workers' start-up, which training pays once


class Meter:
    """Waiting and whole-step seconds since the last flush, and the totals."""

    def __init__(self) -> None:
        self.wait = self.step = self.total_wait = self.total_step = 0.0
        self.batches = self.total_batches = 0

    def add(self, wait: float, step: float) -> None:
        self.wait, self.step, self.batches = self.wait + wait, self.step + step, self.batches + 1
        self.total_wait += wait
        self.total_step += step
        self.total_batches += 1

    def flush(self) -> dict[str, Any]:
        record = {
            "input_wait_s": round(self.wait, 6),
            "input_step_s": round(self.step, 6),
            "input_batches": self.batches,
        }
        self.wait = self.step = 0.0
        self.batches = 0
        return record


def timed_loader(loader: Iterable[T], every: int = 20) -> Iterator[T]:
    """Yield ``loader``'s batches unchanged, timing the wait for each (see the module doc)."""
    meter = Meter()
    iterator = iter(loader)
    asked = time.perf_counter()
    seen = 0
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            break
        arrived = time.perf_counter()
        yield batch
        done = time.perf_counter()
        seen += 1
        if seen > SKIP:
            meter.add(arrived - asked, done - asked)
            if meter.batches >= every:
                _append(meter.flush())
        asked = done
    if meter.batches:
        _append(meter.flush())


def _append(record: dict[str, Any]) -> None:
    folder = os.environ.get("RGT_OUTPUT_DIR")
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "metrics.jsonl"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")  # one short append: lines never interleave
    except OSError:
        pass  # timing is advice: it never stops a training run


def measure(loader: Iterable[Any], compute: Callable[[], None], batches: int = 8) -> dict[str, Any]:
    """Draw up to ``batches`` (+1 warm-up) batches with ``compute()`` between draws; the
    verdict (``input_wait.judge``) on the wait share of each step."""
    meter = Meter()
    iterator = iter(loader)
    for index in range(batches + SKIP):
        asked = time.perf_counter()
        try:
            next(iterator)
        except StopIteration:
            break
        arrived = time.perf_counter()
        compute()
        if index >= SKIP:
            meter.add(arrived - asked, time.perf_counter() - asked)
    return input_wait.judge(meter.total_wait, meter.total_step, meter.total_batches)


def event(verdict: dict[str, Any]) -> dict[str, Any] | None:
    """The ``input_bound`` event (as the agent records it) when the verdict says so."""
    if not verdict.get("input_bound"):
        return None
    return {
        "kind": "input_bound",
        "severity": "warning",
        "detail": verdict,
        "next": input_wait.remedy(verdict),
    }


def input_reading(log: str, outputs: Path) -> dict[str, Any] | None:
    """Seconds waiting for data against whole steps, from what the first run printed (the
    common meters' ``Time … Data …`` lines) and recorded (``rgt.smoke.timed_loader``'s
    ``metrics.jsonl`` records); None when it showed neither. The verdict needs
    ``input_wait.MIN_SAMPLES`` batches: a two-batch smoke run reports the share only."""
    samples = input_wait.from_log(log)
    batches = len(samples)
    try:
        lines = (outputs / "metrics.jsonl").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    for line in (x for x in lines if "input_wait_s" in x):
        for sample in input_wait.from_records([line]):
            samples.append(sample)
            batches += int(json.loads(line).get("input_batches") or 1)
    if not samples:
        return None
    pct = float(os.environ.get("RGT_WATCH_INPUT_PCT") or input_wait.DEFAULT_PCT)
    verdict = input_wait.judge(sum(w for w, _ in samples), sum(t for _, t in samples), batches, pct)
    if verdict["input_bound"]:
        verdict["remedy"] = input_wait.remedy(verdict)
    return verdict

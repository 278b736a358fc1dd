"""Is a run input-bound? The share of its step time spent waiting for the next batch.

Two sources, both already read by the agent's sentinel:

* ``metrics.jsonl`` records written by ``rgt.smoke.timed_loader`` (``{"input_wait_s": 1.9,
  "input_step_s": 2.1, "input_batches": 20}``: seconds waiting for batches and seconds of whole
  steps over the last 20 batches);
* the log lines of the common meters, which print the data time next to the batch time:
  pytorch/examples' ``ProgressMeter`` (``Time  0.512 ( 0.498)   Data  0.401 ( 0.390)``) and
  the ``MetricLogger`` of DETR/DeiT/DINO (``time: 0.5120  data: 0.4010``).

A run whose recent steps wait on data ``RGT_WATCH_INPUT_PCT`` percent of the time or more (over
at least ``MIN_SAMPLES`` readings) is input-bound: the GPU idles while the loader works. Stdlib
only and Python 3.8 syntax: this ships inside the agent.
"""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

DEFAULT_PCT = 50.0
MIN_SAMPLES = 5  # readings before a verdict: the first batches include worker start-up
WINDOW = 50  # the verdict is on the most recent readings
_NUM = r"(\d+(?:\.\d*)?(?:e[-+]?\d+)?)"
DATA_RE = re.compile(r"\bdata(?:_time)?\b\s*[:=]?\s*" + _NUM, re.I)
TIME_RE = re.compile(r"\b(?:batch_)?time\b\s*[:=]?\s*" + _NUM, re.I)
REMEDY = (
    "the GPU waits for data {pct}% of each step: raise DataLoader num_workers (to the CPU "
    "count), set pin_memory=True and persistent_workers=True, raise prefetch_factor, and read "
    "the data from local disk (copy it off network storage first) or pre-decode it"
)
Sample = Tuple[float, float]  # (seconds waiting for data, seconds of the whole step(s))


def from_log(text: str) -> List[Sample]:
    """(data, time) from each line that prints both, data no longer than the step."""
    out = []
    for line in text.splitlines():
        data, step = DATA_RE.search(line), TIME_RE.search(line)
        if data and step:
            wait, total = float(data.group(1)), float(step.group(1))
            if total > 0 and wait <= total:
                out.append((wait, total))
    return out


def from_records(lines: List[str]) -> List[Sample]:
    """(input_wait_s, input_step_s) from each ``metrics.jsonl`` record that has both."""
    out = []
    for line in lines:
        if "input_wait_s" not in line:
            continue
        try:
            record = json.loads(line)
            wait, total = float(record["input_wait_s"]), float(record["input_step_s"])
        except (ValueError, KeyError, TypeError):
            continue
        if total > 0 and 0 <= wait <= total:
            out.append((wait, total))
    return out


def judge(wait_s: float, step_s: float, samples: int, pct: float = DEFAULT_PCT) -> Dict[str, Any]:
    """The reading as an event detail, with ``input_bound`` true when the wait share >= pct."""
    share = 100.0 * wait_s / step_s if step_s > 0 else 0.0
    return {
        "wait_s": round(wait_s, 4),
        "step_s": round(step_s, 4),
        "wait_pct": round(share, 1),
        "samples": samples,
        "input_bound": samples >= MIN_SAMPLES and share >= pct,
    }


def remedy(detail: Dict[str, Any]) -> str:
    return REMEDY.format(pct=int(detail["wait_pct"]))


class InputWait(object):
    """The most recent readings of a run; ``add`` returns the verdict once there are enough."""

    def __init__(self, pct: float = DEFAULT_PCT) -> None:
        self.pct = pct
        self.samples: Deque[Sample] = deque(maxlen=WINDOW)

    def add(self, samples: List[Sample]) -> Optional[Dict[str, Any]]:
        self.samples.extend(samples)
        if not samples or len(self.samples) < MIN_SAMPLES:
            return None
        wait = sum(s[0] for s in self.samples)
        total = sum(s[1] for s in self.samples)
        return judge(wait, total, len(self.samples), self.pct)

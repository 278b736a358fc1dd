"""Loss spikes: a jump of the training loss far above its recent level, and whether it came back.

A spike is judged against a robust running baseline, never against step 0: the median and the
MAD (median absolute deviation) of the last ``WINDOW`` logged losses, in log space, because a
loss lives on a multiplicative scale (2.3 -> 4.6 is the same event as 0.23 -> 0.46). A value
is a spike when it is at least ``MIN_RATIO`` times the median *and* ``MIN_Z`` robust deviations
above it; the ratio keeps a calm curve (MAD near zero) from firing on noise, the deviation keeps
a noisy one (small batches, RL) from firing on its ordinary swings. While fewer than
``MIN_HISTORY`` values are known the MAD means nothing, and only a leap of ``EARLY_RATIO`` times
the median counts (the first losses of a run are judged, but only against gross jumps).

Only upward moves count. Warm-up and LR-schedule decays move the loss *down* (a median that
lags behind a falling curve sits above it), and a decay step is a drop, so neither fires.
NaN and Inf are not spikes (``nan_loss`` covers them) and are skipped; so are losses <= 0
(a loss that can go negative is not on a log scale).

Once a spike starts, the baseline is frozen. It *recovered* when a later value is back inside
the band (``RECOVER_RATIO`` times the median, or 3 deviations, whichever is wider) within
``RECOVER_WITHIN`` logged values; otherwise it *diverged*, and the new level becomes the
baseline. The event is emitted when that is known, with the onset step and value, the peak,
the size against the baseline (ratio and robust z) and the verdict.

Parsing reads one line at a time: rgt's metrics.jsonl and JSON lines (``{"step": 1, "loss":
2.3}``), HF Trainer dicts (``{'loss': 2.31, ...}``), ``step 100 loss 2.31``, ``loss=2.31``
(tqdm postfix), Lightning's ``train_loss=`` / ``train_loss_step=``, Megatron's ``lm loss:``,
mmdetection's ``loss: ...`` after its per-head ``loss_cls`` parts. Validation and eval losses
are ignored. Memory is one window of floats; the work per line is one regex pass and one
sort of the window.

Calibrated on real curves transcribed from public issue threads: tests/agent/loss_curves/. A job
that needs another band sets ``RGT_WATCH_SPIKE_RATIO`` (``MIN_RATIO``) and ``RGT_WATCH_SPIKE_Z``
(``MIN_Z``) in its environment (``rgt run --env``), like the sentinel's other thresholds.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

WINDOW = 64  # logged values in the baseline
MIN_HISTORY = 5  # values before the median and MAD are trusted ...
EARLY_RATIO = 4.0  # ... before that, only a jump of this many times the median counts
MIN_RATIO = 1.8  # a spike is at least this many times the running median ...
MIN_Z = 4.0  # ... and this many robust deviations above it
RECOVER_RATIO = 1.3  # back within this ratio (or 3 deviations) of the median: recovered
RECOVER_WITHIN = 20  # logged values a spike has to come back
MAD_SCALE = 1.4826  # MAD of a normal sample -> its standard deviation
MAX_LINE = 4096  # characters of one line looked at

_NUM = r"[-+]?(?:nan|inf(?:inity)?|(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)"
_LOSS_RE = re.compile(
    r"(?<![\w/.\-])(?P<key>[\w/.\-]*loss(?:_step)?)['\"]?\s*[:=]?\s*(?:tensor\()?(?P<num>"
    + _NUM
    + r")(?![\w.])",
    re.I,
)
_STEP_RE = re.compile(
    r"(?<![\w/])(?:global_step|step|iter|iteration|it)['\"]?\s*[:=]?\s*(\d+)\b", re.I
)
_PREV_WORD_RE = re.compile(r"([A-Za-z]+) +$")
_EVAL_LINE_RE = re.compile(
    r"\b(?:val|valid|validation|validating|eval|evaluation|evaluating)\b", re.I
)
_SUMMARY_RE = re.compile(r"\btrain_(?:runtime|samples_per_second|steps_per_second)\b")
MAX_KEYS = 32  # loss-like keys looked at on one line
_EVAL = frozenset(["val", "valid", "validation", "eval", "evaluation", "test", "dev"])
_PREFERRED = frozenset(
    ["loss", "loss_step", "train_loss", "train_loss_step", "train/loss", "total_loss", "lm_loss"]
)


def parse_line(line: str) -> Optional[Tuple[Optional[int], float]]:
    """(step or None, training loss) named on one log or metrics line, else None."""
    line = line[:MAX_LINE]
    if _SUMMARY_RE.search(line):
        return None  # HF Trainer's end-of-run mean (`'train_loss': ...`), not a step's loss
    candidates = []  # type: List[Tuple[str, str]]
    marker = _EVAL_LINE_RE.search(line)  # `Epoch 3 | Validation | Loss: ...`, `Val. Epoch: 0 ...`
    evals_from = marker.start() if marker else len(line)
    for count, match in enumerate(_LOSS_RE.finditer(line)):
        before = line[max(0, match.start() - 40) : match.start()]
        key = _key(match.group("key").lower().strip("-./"), before)
        if count >= MAX_KEYS:
            break
        if not _is_eval(key) and match.start() < evals_from:
            candidates.append((key, match.group("num")))
    if not candidates:
        return None
    chosen = next((c for c in candidates if c[0] in _PREFERRED), candidates[0])
    step = _STEP_RE.search(line)
    return (int(step.group(1)) if step else None), float(chosen[1])


def _key(key: str, before: str) -> str:
    """``Train loss`` / ``Total loss`` / ``val loss``: the word before a bare ``loss`` names it."""
    word = _PREV_WORD_RE.search(before) if key == "loss" else None
    return key if word is None else word.group(1).lower() + "_" + key


def _is_eval(key: str) -> bool:
    head = re.split(r"[_/.\-]", key, maxsplit=1)[0]
    return head in _EVAL


@dataclass(frozen=True)
class Spike:
    """One spike, told once its outcome is known (``recovered`` None: the stream ended first)."""

    step: Optional[int]
    sample: int  # index of the onset among the logged values
    value: float
    baseline: float  # running median before the onset
    ratio: float  # value / baseline
    z: float  # robust deviations above the baseline (log space)
    peak: float
    peak_step: Optional[int]
    recovered: Optional[bool]
    end_step: Optional[int]  # back in the band (recovered) or judged diverged here
    samples: int  # logged values from the onset to that verdict

    def detail(self, source: str) -> Dict[str, Any]:
        return {
            "source": source,
            "step": self.step,
            "value": self.value,
            "baseline": round(self.baseline, 6),
            "ratio": round(self.ratio, 2),
            "z": round(self.z, 1),
            "peak": self.peak,
            "peak_step": self.peak_step,
            "recovered": self.recovered,
            "end_step": self.end_step,
            "samples": self.samples,
        }

    @property
    def severity(self) -> str:
        return "info" if self.recovered else "warning"


class SpikeDetector(object):
    """Feed it losses in order; it returns each spike once its outcome is known."""

    def __init__(self, min_ratio: float = MIN_RATIO, min_z: float = MIN_Z) -> None:
        self.min_ratio, self.min_z = min_ratio, min_z
        self.history = deque(maxlen=WINDOW)  # type: deque[float]
        self.seen = 0
        self.open = None  # type: Optional[Dict[str, Any]]
        self.last = None  # type: Optional[Tuple[Optional[int], float]]

    def add(self, value: float, step: Optional[int] = None) -> Optional[Spike]:
        if not math.isfinite(value) or value <= 0 or (step, value) == self.last:
            return None  # non-finite: nan_loss's business; a repeated line: another rank
        self.last = (step, value)
        x, index = math.log(value), self.seen
        self.seen += 1
        if self.open is not None:
            return self._follow(x, value, step)
        base = self._baseline()
        if base is not None and _is_spike(x, base, self.min_ratio, self.min_z):
            self.open = _onset(index, step, value, base)
            return None
        self.history.append(x)
        return None

    def flush(self) -> Optional[Spike]:
        """The spike still open when the stream ends (its outcome unknown)."""
        spike, self.open = self.open, None
        return None if spike is None else _spike(spike, None, None)

    def _baseline(self) -> Optional[Tuple[float, float, int]]:
        if not self.history:
            return None
        ordered = sorted(self.history)
        median = _median(ordered)
        mad = _median(sorted(abs(v - median) for v in ordered)) * MAD_SCALE
        return median, mad, len(ordered)

    def _follow(self, x: float, value: float, step: Optional[int]) -> Optional[Spike]:
        spike = self.open
        assert spike is not None
        spike["samples"] += 1
        if value > spike["peak"]:
            spike["peak"], spike["peak_step"] = value, step
        median, mad, _n = spike["base"]
        if x - median <= max(math.log(RECOVER_RATIO), 3.0 * mad):
            self.open = None
            self.history.append(x)
            return _spike(spike, True, step)
        if spike["samples"] < RECOVER_WITHIN:
            return None
        self.open = None  # diverged: the new level is the baseline from now on
        self.history.clear()
        self.history.append(x)
        return _spike(spike, False, step)


def _is_spike(x: float, base: Tuple[float, float, int], min_ratio: float, min_z: float) -> bool:
    median, mad, n = base
    rise = x - median
    if n < MIN_HISTORY:  # a few values say little about the noise: only a leap counts
        return rise >= math.log(max(EARLY_RATIO, min_ratio))
    return rise >= math.log(min_ratio) and rise >= min_z * mad


def _onset(
    index: int, step: Optional[int], value: float, base: Tuple[float, float, int]
) -> Dict[str, Any]:
    median, mad, _n = base
    z = (math.log(value) - median) / mad if mad > 0 else float("inf")
    return {
        "sample": index,
        "step": step,
        "value": value,
        "base": base,
        "z": z,
        "peak": value,
        "peak_step": step,
        "samples": 0,
    }


def _spike(open_: Dict[str, Any], recovered: Optional[bool], end: Optional[int]) -> Spike:
    baseline = math.exp(open_["base"][0])
    return Spike(
        step=open_["step"],
        sample=open_["sample"],
        value=open_["value"],
        baseline=baseline,
        ratio=open_["value"] / baseline,
        z=min(open_["z"], 999.0),
        peak=open_["peak"],
        peak_step=open_["peak_step"],
        recovered=recovered,
        end_step=end,
        samples=open_["samples"],
    )


def _median(ordered: List[float]) -> float:
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


class SpikeWatch(object):
    """The sentinel's side: one detector per source, metrics.jsonl preferred over the log.

    A script that writes metrics.jsonl usually prints the same losses too; once metrics.jsonl
    has named a loss, the log's copy is only parsed, never judged, so one spike is one event.
    """

    def __init__(self, min_ratio: float = MIN_RATIO, min_z: float = MIN_Z) -> None:
        # A ratio of 1 or less would call every logged value above the median a spike, a
        # negative deviation count every value: such a knob is a typo, and the default stands.
        self.min_ratio = min_ratio if min_ratio > 1.0 else MIN_RATIO
        self.min_z = min_z if min_z >= 0.0 else MIN_Z
        self.detectors = {}  # type: Dict[str, SpikeDetector]
        self.metrics_seen = False

    def feed(self, text: str, source: str) -> List[Spike]:
        found = []  # type: List[Spike]
        is_log = source == "log"
        for line in text.splitlines():
            parsed = parse_line(line)
            if parsed is None:
                continue
            self.metrics_seen = self.metrics_seen or not is_log
            if is_log and self.metrics_seen:
                continue
            detector = self.detectors.get(source)
            if detector is None:
                detector = self.detectors[source] = SpikeDetector(self.min_ratio, self.min_z)
            spike = detector.add(parsed[1], parsed[0])
            if spike is not None:
                found.append(spike)
        return found


def next_step(spike: Spike, job_id: str) -> str:
    if spike.recovered:
        return NEXT_RECOVERED
    return NEXT_DIVERGED % job_id


NEXT_RECOVERED = (
    "the loss spiked and came back by itself: note the step; if spikes repeat, log the gradient "
    "norm and see `rgt explain loss_spike` before the next run"
)
NEXT_DIVERGED = (
    "the loss jumped and has not come back: `rgt logs %s` to see it, then resume from a "
    "checkpoint before the spike with a lower peak LR or longer warm-up (`rgt explain loss_spike`)"
)

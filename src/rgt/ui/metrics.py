"""Training curves of a job: the JSON-lines the demo writes, TensorBoard and tracker files.

Sources, in order: the job's ``outputs/metrics.jsonl`` as the patrol fetched it from the
machine (``fetched``), else the pulled copy's ``metrics*.jsonl``; plus whatever ``rgt verify
tracker`` reads under the pulled copy (TensorBoard event files, W&B, MLflow, trackio; its own
readers, not a second parser). A line that is not JSON, not an object, or a value that is NaN or
infinite is skipped and counted: a curve never draws a point that was not a finite number.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

X_KEYS = ("step", "global_step", "iteration", "epoch")
MAX_FILES = 20


@dataclass
class Curves:
    series: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    skipped: int = 0
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    body: bytes | None = None  # the JSON document, once served

    def add(self, name: str, x: float, y: float) -> None:
        line = self.series.setdefault(name, {"x": [], "y": []})
        line["x"].append(x)
        line["y"].append(y)

    def to_json(self) -> dict[str, Any]:
        return {
            "series": self.series,
            "skipped": self.skipped,
            "notes": self.notes,
            "sources": self.sources,
        }


def read_jsonl(data: bytes, source: str, curves: Curves) -> None:
    """Every finite number of every JSON object line, by its step (else the line number)."""
    bad = 0
    for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if not raw.strip():
            continue
        if not _take_line(raw, number, curves):
            bad += 1
    if bad:
        curves.skipped += bad
        curves.notes.append(f"{bad} lines skipped in {source}: NaN/inf/not JSON")
    curves.sources.append(source)


def _take_line(raw: str, number: int, curves: Curves) -> bool:
    try:
        row = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(row, dict):
        return False
    x = next((row[k] for k in X_KEYS if _finite(row.get(k))), number)
    values = {k: v for k, v in row.items() if k not in X_KEYS and _number(v)}
    if not values or any(not math.isfinite(v) for v in values.values()):
        return False  # a NaN loss is the event to notice, not a point to draw
    for name, value in values.items():
        curves.add(name, float(x), float(value))
    return True


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return _number(value) and math.isfinite(value)


def read_pulled(dest: Path, curves: Curves, *, with_jsonl: bool) -> None:
    """The pulled copy of a job: its metrics JSON-lines and its tracker data."""
    if with_jsonl:
        for path in sorted(dest.rglob("metrics*.jsonl"))[:MAX_FILES]:
            read_jsonl(path.read_bytes(), str(path), curves)
    read_trackers(dest, curves)


def read_trackers(root: Path, curves: Curves) -> None:
    from rgt.verify.tracker.scan import discover, read_source

    found = discover(root)
    for source, units in found.units.items():
        if not units:
            continue
        try:
            runs = read_source(source, units)
        except ImportError as exc:
            curves.notes.append(f"{source} files not read: {exc.name} is not installed")
            continue
        except Exception as exc:  # a damaged tracker file: disclose, keep the other curves
            curves.notes.append(f"{source} files not read: {exc}")
            continue
        for run in runs:
            _take_run(run, source, curves)


def _take_run(run: Any, source: str, curves: Curves) -> None:
    curves.sources.append(f"{source}:{run.path}")
    for metric, points in run.history.items():
        name = metric if metric not in curves.series else f"{source}:{metric}"
        for point in points:
            if math.isfinite(point.value):
                curves.add(name, float(point.step), float(point.value))
            else:
                curves.skipped += 1


def smooth(values: list[float], weight: float) -> list[float]:
    """TensorBoard's exponential moving average, debiased at the start."""
    weight = min(max(weight, 0.0), 0.999)
    if weight == 0:
        return list(values)
    out, last = [], 0.0
    for count, value in enumerate(values, start=1):
        last = last * weight + (1 - weight) * value
        out.append(last / (1 - weight**count))
    return out

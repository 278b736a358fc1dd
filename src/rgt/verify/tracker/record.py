"""``TrackedRun``: one run as a tracker recorded it, in one shape for every tracker.

Trackers disagree on words: MLflow says FINISHED/FAILED/KILLED/RUNNING, W&B writes an exit
record with an exit code (or nothing, when the process died first), TensorBoard and trackio
record no status at all. Readers map these onto ``STATUSES``; ``raw_status`` keeps the
tracker's own word for the report. Times are seconds since the epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("running", "finished", "failed", "killed", "unknown")

# Config keys that usually hold the run's seed, in the order they are tried.
SEED_KEYS = ("seed", "random_seed", "rng_seed", "manual_seed", "global_seed")


@dataclass(frozen=True)
class Point:
    step: int
    value: float
    time: float | None = None


@dataclass(frozen=True)
class TrackedRun:
    source: str  # mlflow | tensorboard | wandb | trackio
    run_id: str
    name: str
    status: str  # one of STATUSES
    path: str  # where the run's data lies on disk
    config: dict[str, Any] = field(default_factory=dict)  # flat: nested keys joined with "."
    summary: dict[str, float] = field(default_factory=dict)  # the tracker's final value per metric
    history: dict[str, tuple[Point, ...]] = field(default_factory=dict)  # per metric, by step
    start_time: float | None = None
    end_time: float | None = None
    raw_status: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")

    @property
    def label(self) -> str:
        """How findings name the run: tracker, name and id, e.g. ``wandb:lr0.1 (3xk2)``."""
        if self.name and self.name != self.run_id:
            return f"{self.source}:{self.name} ({self.run_id})"
        return f"{self.source}:{self.run_id}"

    @property
    def seed(self) -> int | None:
        for key in SEED_KEYS:
            value = self.config.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return int(value)
        return None

    @property
    def last_activity(self) -> float | None:
        """The newest time anything about the run was written: its heartbeat, in effect."""
        times = [p.time for points in self.history.values() for p in points if p.time]
        times += [t for t in (self.start_time, self.end_time) if t]
        return max(times) if times else None

    def last_step(self) -> int | None:
        steps = [points[-1].step for points in self.history.values() if points]
        return max(steps) if steps else None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "run_id": self.run_id,
            "name": self.name,
            "status": self.status,
            "raw_status": self.raw_status,
            "path": self.path,
            "seed": self.seed,
            "config": self.config,
            "summary": {k: _json_number(v) for k, v in self.summary.items()},
            "history_points": {k: len(v) for k, v in self.history.items()},
            "last_step": self.last_step(),
            "start_time": self.start_time,
            "end_time": self.end_time,
        }


def _json_number(value: float) -> float | str:
    """JSON has no NaN: a non-finite summary is reported as its text, e.g. ``"nan"``."""
    return value if math.isfinite(value) else str(value)


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"opt": {"lr": 0.1}}`` → ``{"opt.lr": 0.1}``; W&B's ``{"value": x}`` wrappers unwrapped."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"value"}:
            value = value["value"]
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def coerce(text: str) -> Any:
    """MLflow stores every param as text: read ``"3e-4"`` back as a number, ``"true"`` as bool."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def sort_points(points: list[Point]) -> tuple[Point, ...]:
    return tuple(sorted(points, key=lambda p: (p.step, p.time or 0.0)))

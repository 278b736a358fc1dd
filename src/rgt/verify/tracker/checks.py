"""The forensic checks, the same for every tracker, each emitting ``Finding`` records.

duplicate_run          two runs of one tracker with the same config and seed: counted
                       twice, one seed looks like two and shrinks the error bars
stale_running          marked running, but nothing written for longer than ``stale_after``
failed_run             the tracker itself says failed or killed (context for the reader)
truncated_history      the history stops far before the configured steps/epochs; a bug
                       when the tracker calls the run finished
nan_at_end             the last logged value of a metric is NaN or infinite
summary_mismatch       the tracker's summary value is neither the last, the min nor the max
                       of the metric's own history
results_mismatch       results.json reports a value the tracker's run does not hold
name_config_mismatch   the run's name claims a config value its config contradicts
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable

from rgt.results import RunResults
from rgt.verify.findings import Finding
from rgt.verify.tracker.names import mismatches
from rgt.verify.tracker.record import SEED_KEYS, TrackedRun

# Config keys that say how long a run should be, by unit.
STEP_KEYS = ("steps", "max_steps", "total_steps", "num_steps", "train_steps", "max_iters")
EPOCH_KEYS = ("epochs", "num_epochs", "max_epochs", "n_epochs")
COMPLETE = 0.9  # a history that reaches 90 % of the configured length counts as complete


def _close(a: float, b: float) -> bool:
    # TensorBoard stores scalars as float32: 1e-5 relative covers the round trip.
    if math.isnan(a) and math.isnan(b):
        return True
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-9)


def duplicates(runs: Iterable[TrackedRun]) -> list[Finding]:
    groups: dict[tuple[str, str], list[TrackedRun]] = defaultdict(list)
    for run in runs:
        if run.config:
            key = {k: v for k, v in run.config.items() if k not in SEED_KEYS}
            groups[(run.source, json.dumps([key, run.seed], sort_keys=True, default=str))].append(
                run
            )
    return [_duplicate(group) for group in groups.values() if len(group) > 1]


def _duplicate(group: list[TrackedRun]) -> Finding:
    seed = group[0].seed
    said = f"seed {seed}" if seed is not None else "no recorded seed"
    return Finding(
        kind="duplicate_run",
        severity="warning",
        message=f"{len(group)} {group[0].source} runs share one config and {said}; "
        "counting them separately inflates the number of seeds",
        runs=tuple(run.label for run in group),
        evidence={"seed": seed, "paths": [run.path for run in group]},
    )


def stale_running(run: TrackedRun, now: float, stale_after: float) -> list[Finding]:
    last = run.last_activity
    if run.status != "running" or last is None or now - last <= stale_after:
        return []
    idle = now - last
    quiet = f"{idle / 3600:.1f} h" if idle >= 3600 else f"{idle / 60:.0f} min"
    return [
        Finding(
            kind="stale_running",
            severity="bug",
            message=f"{run.label} is marked running but wrote nothing for {quiet}: "
            "it crashed or was killed and never closed; its numbers are partial",
            runs=(run.label,),
            evidence={
                "last_activity": last,
                "now": now,
                "stale_after_s": stale_after,
                "last_step": run.last_step(),
                "raw_status": run.raw_status,
            },
        )
    ]


def failed(run: TrackedRun) -> list[Finding]:
    if run.status not in ("failed", "killed"):
        return []
    return [
        Finding(
            kind="failed_run",
            severity="info",
            message=f"{run.label} ended {run.status} ({run.raw_status})",
            runs=(run.label,),
            evidence={"last_step": run.last_step()},
        )
    ]


def planned_length(run: TrackedRun) -> tuple[str, int] | None:
    """The run's configured length as ``(unit, count)``: steps win over epochs."""
    for unit, keys in (("steps", STEP_KEYS), ("epochs", EPOCH_KEYS)):
        for key in keys:
            value = run.config.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return unit, int(value)
    return None


def reached(run: TrackedRun, unit: str) -> int | None:
    """How far the history got, in ``unit``: an ``epoch`` metric when one is logged, else steps.
    Counts are 1-based: a last step of 99 means 100 steps were logged."""
    epochs = run.history.get("epoch")
    if unit == "epochs" and epochs:
        return int(max(p.value for p in epochs if math.isfinite(p.value))) + 1
    last = run.last_step()
    return None if last is None else last + 1


def truncated(run: TrackedRun) -> list[Finding]:
    planned = planned_length(run)
    got = reached(run, planned[0]) if planned else None
    if planned is None or got is None or run.status in ("running", "failed", "killed"):
        return []
    unit, count = planned
    if got >= COMPLETE * count or (unit == "epochs" and "epoch" not in run.history and got > count):
        return []
    severity = "bug" if run.status == "finished" else "warning"
    said = "has no status; its"
    if run.status == "finished":
        said = f"is marked finished ({run.raw_status or 'by the tracker'}) but its"
    return [
        Finding(
            kind="truncated_history",
            severity=severity,
            message=f"{run.label} {said} history stops at {got} of {count} configured {unit}: "
            "the job probably crashed or was cut off",
            runs=(run.label,),
            evidence={"reached": got, "configured": count, "unit": unit, "status": run.status},
        )
    ]


def nan_at_end(run: TrackedRun) -> list[Finding]:
    bad = {
        k: str(p[-1].value) for k, p in run.history.items() if p and not math.isfinite(p[-1].value)
    }
    if not bad:
        return []
    return [
        Finding(
            kind="nan_at_end",
            severity="bug",
            message=f"{run.label} ends with non-finite {', '.join(sorted(bad))}: training "
            "diverged, and any summary taken from it is meaningless",
            runs=(run.label,),
            evidence={"metrics": bad, "last_step": run.last_step()},
        )
    ]


def summary_mismatch(run: TrackedRun) -> list[Finding]:
    if run.status == "running":  # W&B writes the summary before the history row it summarises
        return []
    findings = []
    for key, value in sorted(run.summary.items()):
        points = run.history.get(key)
        if not points:
            continue
        values = [p.value for p in points]
        finite = [v for v in values if math.isfinite(v)] or values
        candidates = (values[-1], min(finite), max(finite))
        if any(_close(value, c) for c in candidates):
            continue
        findings.append(_summary_finding(run, key, value, candidates))
    return findings


def _summary_finding(
    run: TrackedRun, key: str, value: float, candidates: tuple[float, float, float]
) -> Finding:
    last, low, high = candidates
    return Finding(
        kind="summary_mismatch",
        severity="bug",
        message=f"{run.label}: summary {key} = {value:.6g} is not in its logged history "
        f"(last {last:.6g}, min {low:.6g}, max {high:.6g}); the summary was overwritten or "
        "came from another run",
        runs=(run.label,),
        evidence={
            "metric": key,
            "summary": str(value),
            "last": str(last),
            "min": str(low),
            "max": str(high),
        },
    )


def name_config(run: TrackedRun) -> list[Finding]:
    wrong = mismatches(run.name, run.config)
    if not wrong:
        return []
    said = ", ".join(
        f"{key}: name says {claimed}, config has {actual!r}"
        for key, (claimed, actual) in sorted(wrong.items())
    )
    return [
        Finding(
            kind="name_config_mismatch",
            severity="bug",
            message=f"{run.label}: the name contradicts the config ({said}); tables keyed by "
            "name put this run in the wrong row",
            runs=(run.label,),
            evidence={key: {"name": c, "config": a} for key, (c, a) in wrong.items()},
        )
    ]


def results_mismatch(run: TrackedRun, results: RunResults) -> list[Finding]:
    findings = []
    for name, metric in sorted(results.metrics.items()):
        tracked = _tracked_value(run, name)
        if tracked is None or _close(metric.value, tracked):
            continue
        findings.append(
            Finding(
                kind="results_mismatch",
                severity="bug",
                message=f"{results.label}/results.json says {name} = {metric.value:.6g}, "
                f"but {run.label} recorded {tracked:.6g}",
                runs=(results.label, run.label),
                evidence={"metric": name, "results": metric.value, "tracker": str(tracked)},
            )
        )
    return findings


def _tracked_value(run: TrackedRun, name: str) -> float | None:
    """The tracker's final word on a metric: its summary, else the last logged value."""
    for key in (name, *(k for k in run.summary if k.rsplit("/", 1)[-1] == name)):
        if key in run.summary:
            return run.summary[key]
    points = run.history.get(name)
    return points[-1].value if points else None


def per_run(run: TrackedRun, now: float, stale_after: float) -> list[Finding]:
    return [
        *stale_running(run, now, stale_after),
        *failed(run),
        *truncated(run),
        *nan_at_end(run),
        *summary_mismatch(run),
        *name_config(run),
    ]

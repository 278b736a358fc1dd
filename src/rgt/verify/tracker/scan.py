"""Find tracker data under a path, read it with each tracker's reader, run the checks.

One walk of the tree finds every kind at once: an ``mlruns/`` store, TensorBoard run folders,
W&B run folders and trackio databases. A kind whose reader library is missing is reported,
with the extra that installs it, as a ``tracker_unread`` finding; the other kinds are still
read (audit and disclose: a partial report beats none).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.errors import SpecError, UsageError
from rgt.results import RunResults, load_results
from rgt.verify.findings import Finding
from rgt.verify.tracker import _mlflow, _tensorboard, _trackio, _wandb, checks
from rgt.verify.tracker.record import TrackedRun

SOURCES = ("mlflow", "tensorboard", "wandb", "trackio")
# The import each reader needs, and the pip package that provides it.
LIBRARIES = {
    "mlflow": ("mlflow", "mlflow-skinny"),
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "trackio": ("sqlite3", "(standard library)"),
}
_SKIP = {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".tox"}
DEFAULT_STALE_AFTER_S = 3600.0


@dataclass
class Found:
    """Where each kind of tracker data lies: the units each reader takes."""

    units: dict[str, list[Path]] = field(default_factory=lambda: {s: [] for s in SOURCES})
    results: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class TrackerReport:
    runs: tuple[TrackedRun, ...]
    sources: dict[str, dict[str, Any]]
    findings: tuple[Finding, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": len(self.runs),
            "sources": self.sources,
            "findings": [f.to_json() for f in self.findings],
            "tracked_runs": [run.to_json() for run in self.runs],
        }


def discover(path: Path) -> Found:
    found = Found()
    if path.is_file():
        _classify_file(found, path)
        if found.units["trackio"] or found.results:
            return found
        path = path.parent
    for folder, dirs, files in os.walk(path):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in _SKIP)
        if _mlflow.is_store(here):
            found.units["mlflow"].append(here)
            dirs[:] = []  # the store's insides are MLflow's, artifacts included
        elif _wandb.is_run_dir(here, files):
            found.units["wandb"].append(here)
            dirs[:] = []
        elif _tensorboard.is_run_dir(here, files):
            found.units["tensorboard"].append(here)
        for name in sorted(files):
            _classify_file(found, here / name)
    return found


def _classify_file(found: Found, file: Path) -> None:
    if file.name == "results.json":
        found.results.append(file)
    elif _trackio.is_store(file):
        found.units["trackio"].append(file)


def read_source(source: str, units: list[Path]) -> list[TrackedRun]:
    if source == "mlflow":
        return [run for root in units for run in _mlflow.read(root)]
    if source == "tensorboard":
        return _tensorboard.read_many(units)
    if source == "wandb":
        return [_wandb.read(folder) for folder in units]
    return [run for db in units for run in _trackio.read(db)]


def _unread(source: str, error: ImportError) -> Finding:
    module, package = LIBRARIES[source]
    return Finding(
        kind="tracker_unread",
        severity="warning",
        message=f"{source} data was found but not read: {module} is not installed "
        f"(pip install {package}, or remote-gpu-trainer[tracker])",
        evidence={"error": str(error)},
    )


def scan(
    path: str | Path,
    *,
    results: list[RunResults] | None = None,
    stale_after: float = DEFAULT_STALE_AFTER_S,
    now: float | None = None,
) -> TrackerReport:
    """Read every tracker's runs under ``path`` and check them. ``results`` adds results.json
    records to compare with (those found under ``path`` are always used)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path} does not exist", fix="pass a folder that holds tracker data")
    found = discover(path)
    runs, sources, findings = _read_all(found)
    known = list(results or []) + _load_found_results(found.results, findings)
    findings += checks.duplicates(runs)
    moment = time.time() if now is None else now
    for run in runs:
        findings += checks.per_run(run, moment, stale_after)
    findings += [
        f for run, res in match_results(runs, known) for f in checks.results_mismatch(run, res)
    ]
    return TrackerReport(tuple(runs), sources, tuple(findings))


def _read_all(found: Found) -> tuple[list[TrackedRun], dict[str, dict[str, Any]], list[Finding]]:
    runs: list[TrackedRun] = []
    sources: dict[str, dict[str, Any]] = {}
    findings: list[Finding] = []
    for source, units in found.units.items():
        if not units:
            continue
        try:
            read = read_source(source, units)
        except ImportError as exc:
            findings.append(_unread(source, exc))
            sources[source] = {"runs": 0, "paths": [str(u) for u in units], "error": str(exc)}
            continue
        runs += read
        sources[source] = {"runs": len(read), "paths": [str(u) for u in units]}
    return runs, sources, findings


def _load_found_results(files: list[Path], findings: list[Finding]) -> list[RunResults]:
    loaded = []
    for file in files:
        try:
            loaded.append(load_results(file))
        except SpecError as exc:
            findings.append(
                Finding(
                    kind="results_unreadable",
                    severity="warning",
                    message=f"{file} was not compared with the trackers: {exc.message}",
                    runs=(str(file.parent),),
                )
            )
    return loaded


def match_results(
    runs: list[TrackedRun], known: list[RunResults]
) -> list[tuple[TrackedRun, RunResults]]:
    """Pairs a results.json with the runs it describes: the same run name, or else the one
    tracked run stored under the results.json's own folder."""
    pairs = []
    for res in known:
        named = [run for run in runs if run.name and run.name == res.name]
        if not named and res.path:
            home = Path(res.path).parent.resolve()
            named = [run for run in runs if home in Path(run.path.split("#")[0]).resolve().parents]
            named = named if len(named) == 1 else []
        pairs += [(run, res) for run in named]
    return pairs

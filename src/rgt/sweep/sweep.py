"""Sweeps (`rgt sweep run|status|pull|groups SWEEP.toml`): a grid or list of cells, one job each.

Each cell is one set of overrides plus one seed, with a stable id (``_sweep_file``) and its own
job directory — its isolated write path — and ``RGT_SWEEP``, ``RGT_CELL_ID``, ``RGT_SEED`` and
``RGT_OVERRIDES`` (JSON) in its environment. Cells fan out over SSH machines with a bounded
number in flight per machine, or become one Slurm job array (``_sweep_run``). Every command
starts from the same reconciliation (``_sweep_state``), so running any of them twice is safe:

    done         a job succeeded and its artifacts were pulled and verified
    succeeded    a job succeeded; not pulled yet (`rgt sweep pull`)
    running      a job is running (or retrying after a retryable failure)
    queued       a job was submitted and has not started (a pending Slurm task)
    unreachable  a job is on a machine that does not answer: in doubt, never relaunched elsewhere
    failed       every job ended without success; the triage label says why and if retryable
    missing      no job ever reached a machine
    duplicate    two jobs of the cell both succeeded (a cell must never run twice to completion)

`rgt sweep pull` copies each finished cell, with verification, into ``DIR/<cell-id>/`` and
links its ``results.json`` into ``DIR/by-group/<group>/<cell-id>/``, one directory per setting
(every seed of it): that directory is a run group ``rgt verify compare`` reads as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from rgt._fs import atomic_write_json
from rgt.errors import RgtError
from rgt.state.store import Store, utcnow
from rgt.sweep import _runtime
from rgt.sweep._file import Cell, Sweep, cell_id, load_sweep
from rgt.sweep._run import RunLog, RunOptions, check_machines, run_sweep
from rgt.sweep._state import CELL_STATES, CellView, Observation, observe

__all__ = [
    "CELL_STATES",
    "Cell",
    "CellView",
    "Observation",
    "RunLog",
    "RunOptions",
    "Sweep",
    "cell_id",
    "check_machines",
    "groups",
    "load_sweep",
    "pull_sweep",
    "report",
    "run_sweep",
    "status",
]

SCHEMA = "rgt.sweep/1"
GROUPS_DIR = "by-group"
SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
PULLABLE = ("done", "succeeded", "duplicate")


def report(sweep: Sweep, seen: Observation, log: RunLog | None = None) -> dict[str, Any]:
    """The reconciliation table as one JSON document (``rgt sweep status --json``)."""
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "sweep": sweep.name,
        "file": str(sweep.path),
        "time": utcnow(),
        "counts": seen.counts(),
        "unreachable": seen.unreachable,
        "cells": [view.to_json() for view in seen.cells],
    }
    if log is not None:
        doc["run"] = {"launched": log.launched, "moved": log.moved, "errors": log.errors}
    return doc


def status(store: Store, sweep: Sweep) -> dict[str, Any]:
    return report(sweep, observe(store, sweep))


def pull_sweep(store: Store, sweep: Sweep, dest: Path) -> dict[str, Any]:
    """Pull every finished cell into ``dest/<cell-id>/`` (a cell already pulled and verified
    there is not fetched again), then lay out the groups for `rgt verify compare`."""
    seen = observe(store, sweep)
    dest.mkdir(parents=True, exist_ok=True)
    rows = [_pull_cell(store, view, dest) for view in seen.cells]
    links = {row["cell_id"]: row["results"] for row in rows if row.get("results")}
    for view in seen.cells:
        if view.cell.cell_id in links:
            _link_group(dest, view.cell, Path(links[view.cell.cell_id]))
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "sweep": sweep.name,
        "dest": str(dest),
        "time": utcnow(),
        "cells": rows,
    }
    doc["ok"] = all(r["ok"] for r in rows if r["action"] in ("pulled", "kept"))
    doc["groups"] = groups(sweep, dest)
    atomic_write_json(str(dest / "sweep.json"), doc)
    return doc


def _pull_cell(store: Store, view: CellView, dest: Path) -> dict[str, Any]:
    from rgt.jobs.pull import pull

    row: dict[str, Any] = {"cell_id": view.cell.cell_id, "state": view.state, "ok": False}
    winners = [j for j in view.jobs if j.state == "succeeded"]
    if view.state not in PULLABLE or not winners:
        return dict(row, action="skipped", reason=f"cell is {view.state}")
    job = winners[0]  # of a duplicate, the first job to have been launched
    target = dest / view.cell.cell_id
    last = store.last_pull(job.job_id)
    row["job_id"] = job.job_id
    if last and last["verified"] and Path(last["dest"]) == target and _intact(target, last):
        kept = _runtime.fetch(store, job.job_id, target)
        return dict(row, action="kept", ok=True, results=_results_file(target), runtime=kept)
    try:
        result = pull(store, job.job_id, target)
    except RgtError as exc:
        return dict(row, action="failed", error=exc.message, fix=exc.fix)
    knobs = _runtime.fetch(store, job.job_id, target) if result.ok else None
    return dict(
        row,
        action="pulled",
        ok=result.ok,
        files=result.copied + result.skipped,
        bytes=result.bytes,
        results=_results_file(target) if result.ok else None,
        runtime=knobs,
    )


def _intact(target: Path, last: dict[str, Any]) -> bool:
    """Every file the recorded pull verified is still there (size is checked, not the hash:
    `rgt verify artifacts` re-hashes on demand)."""
    return (target / "manifest.json").is_file() and all(
        (target / rel).is_file() for rel in last["files"]
    )


def _results_file(target: Path) -> str | None:
    found = sorted(target.rglob("results.json"), key=lambda p: (len(p.parts), str(p)))
    return str(found[0]) if found else None


def group_slug(group: str) -> str:
    """A directory name for a group: the ``k=v,…`` text when it is safe, else made safe and
    given a short hash so two different groups never share a directory."""
    slug = SLUG_UNSAFE.sub("_", group)
    if slug != group or len(slug) > 100 or slug.startswith("."):
        slug = f"{slug[:80].lstrip('.')}-{hashlib.sha256(group.encode()).hexdigest()[:8]}"
    return slug


def _link_group(dest: Path, cell: Cell, results: Path) -> None:
    """``dest/by-group/<group>/<cell-id>/results.json`` -> the pulled file (relative link)."""
    folder = dest / GROUPS_DIR / group_slug(cell.group) / cell.cell_id
    folder.mkdir(parents=True, exist_ok=True)
    _runtime.link(folder, dest / cell.cell_id)  # the knobs the cell ran with, beside it
    link = folder / "results.json"
    relative = os.path.relpath(results, folder)
    if link.is_symlink() and os.readlink(link) == relative:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(relative)


def groups(sweep: Sweep, dest: Path | None = None) -> list[dict[str, Any]]:
    """One entry per setting: its overrides, its cells (one per seed) and, after a pull, the
    directory ``rgt verify compare`` takes as one group."""
    found: dict[str, dict[str, Any]] = {}
    for cell in sweep.cells:
        entry = found.setdefault(
            cell.group,
            {
                "group": cell.group,
                "overrides": cell.overrides,
                "slug": group_slug(cell.group),
                "cells": [],
                "seeds": [],
            },
        )
        entry["cells"].append(cell.cell_id)
        entry["seeds"].append(cell.seed)
    for entry in found.values():
        folder = dest / GROUPS_DIR / entry["slug"] if dest else None
        entry["path"] = str(folder) if folder else None
        entry["pulled"] = sum(
            1 for c in entry["cells"] if folder and (folder / c / "results.json").exists()
        )
    return list(found.values())


def describe(data: Any) -> str:
    """Compact JSON for a table cell."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))

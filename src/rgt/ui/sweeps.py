"""A sweep as a grid and its reconciliation table, from the state DB and the patrol's picture.

Each sweep job carries ``RGT_SWEEP``, ``RGT_CELL_ID``, ``RGT_SEED`` and ``RGT_OVERRIDES`` in
its spec, so the cells are rebuilt from the jobs and classified by ``rgt.sweep``'s own rule
(``classify``: done · succeeded · running · queued · unreachable · failed · missing ·
duplicate) over the states the patrol read — no machine is read per request. A cell that never
got a job is not in the state DB: `rgt sweep status FILE` lists those as ``missing``.
"""

from __future__ import annotations

import json
from typing import Any

from rgt.models import TERMINAL, JobRecord
from rgt.state.store import Store
from rgt.sweep._file import Cell
from rgt.sweep._state import CELL_STATES, JobView, classify
from rgt.ui.patrol import UiPatrol


def sweep_doc(store: Store, patrol: UiPatrol, name: str) -> dict[str, Any] | None:
    cells: dict[str, tuple[Cell, list[JobRecord]]] = {}
    for record in store.jobs():
        env = record.spec.env
        if env.get("RGT_SWEEP") != name or not env.get("RGT_CELL_ID"):
            continue
        cell_id = env["RGT_CELL_ID"]
        if cell_id not in cells:
            cells[cell_id] = (_cell(record), [])
        cells[cell_id][1].append(record)
    if not cells:
        return None
    views = [
        classify(cell, [_job(store, patrol, r) for r in recs]) for cell, recs in cells.values()
    ]
    rows = [v.to_json() for v in views]
    counts = {s: sum(1 for r in rows if r["state"] == s) for s in CELL_STATES}
    return {"sweep": name, "grid": _grid(rows), "reconciliation": {"counts": counts, "cells": rows}}


def _cell(record: JobRecord) -> Cell:
    env = record.spec.env
    try:
        overrides = json.loads(env.get("RGT_OVERRIDES") or "{}")
    except ValueError:
        overrides = {}
    try:
        seed = int(env.get("RGT_SEED") or 0)
    except ValueError:
        seed = 0
    return Cell(env["RGT_CELL_ID"], dict(overrides), seed, tuple(record.spec.command))


def _job(store: Store, patrol: UiPatrol, record: JobRecord) -> JobView:
    pull = store.last_pull(record.job_id)
    pulled = bool(pull and pull["verified"])
    view = patrol.jobs.get(record.job_id) or {}
    state = str(view.get("state") or record.state.value)
    if view.get("reachable") is False and record.state not in TERMINAL:
        state = "unreachable"  # in doubt, as `rgt sweep status` says it
    label = view.get("label") if view else record.label
    return JobView(record.job_id, record.machine, state, label, view.get("reason"), pulled)


def _grid(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Groups (one setting each) down, seeds across."""
    seeds = sorted({r["seed"] for r in rows})
    groups = sorted({r["group"] for r in rows})
    cells = {(r["group"], r["seed"]): r for r in rows}
    return {
        "seeds": seeds,
        "rows": [
            {
                "group": g,
                "cells": [_grid_cell(cells.get((g, s))) for s in seeds],
            }
            for g in groups
        ],
    }


def _grid_cell(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    job = row["jobs"][-1]["job_id"] if row["jobs"] else None
    return {"cell_id": row["cell_id"], "state": row["state"], "label": row["label"], "job": job}

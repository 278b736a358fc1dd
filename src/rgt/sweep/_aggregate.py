"""``aggregate = "/shared/path"``: `rgt sweep pull` collects every finished cell's verified
results on the machines' shared filesystem and reconciles there, instead of on this computer.

Each machine copies the cells that ran on it (``collect.py``, sent as the program of the
machine's ``python3 -``: nothing installed) into ``<path>/<sweep>/cells/<cell-id>/``, each file
hashed against the agent's manifest; then one machine reconciles: ``sweep.json`` and the
``by-group/`` links `rgt verify compare` reads, all under ``<path>/<sweep>/``. Running it again
copies only what is missing or no longer matches its hash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rgt.backends import backend_for
from rgt.errors import RgtError
from rgt.state.store import Store
from rgt.sweep._file import Sweep
from rgt.sweep._state import CellView, observe

PROGRAM = Path(__file__).with_name("collect.py")
PULLABLE = ("done", "succeeded", "duplicate")


def aggregate_sweep(store: Store, sweep: Sweep, slug: Any) -> dict[str, Any]:
    """``slug``: the group folder name (``sweep.group_slug``)."""
    root = f"{str(sweep.aggregate).rstrip('/')}/{sweep.name}"
    seen = observe(store, sweep)
    cells = [_cell(store, view, slug) for view in seen.cells]
    rows: dict[str, dict[str, Any]] = {}
    for machine in sorted({c["machine"] for c in cells if c.get("job_dir")}):
        mine = [c for c in cells if c.get("machine") == machine and c.get("job_dir")]
        for row in _run(store, machine, "collect", root, {"cells": mine}):
            rows[row["cell_id"]] = row
    first = sweep.machines[0]
    listed = [{k: v for k, v in c.items() if k != "job_dir"} for c in cells]
    doc = dict(_run(store, first, "reconcile", root, {"cells": listed, "name": sweep.name}))
    for row in doc["cells"]:
        row.update({k: v for k, v in rows.get(row["cell_id"], {}).items() if k != "cell_id"})
    doc["ok"] = all(r["verified"] for r in doc["cells"] if r.get("pullable"))
    return doc


def _cell(store: Store, view: CellView, slug: Any) -> dict[str, Any]:
    cell = {"cell_id": view.cell.cell_id, "group": view.cell.group, "state": view.state,
            "slug": slug(view.cell.group), "pullable": view.state in PULLABLE}  # fmt: skip
    winners = [j for j in view.jobs if j.state == "succeeded"]
    if not cell["pullable"] or not winners:
        return cell
    job = store.job(winners[0].job_id)  # of a duplicate, the first launched
    backend = backend_for(store, job.machine)
    return dict(cell, job_id=job.job_id, machine=job.machine,
                job_dir=backend.job_paths(job.job_id).root)  # fmt: skip


def _run(store: Store, machine: str, mode: str, root: str, doc: dict[str, Any]) -> Any:
    backend = backend_for(store, machine)
    source = PROGRAM.read_text("utf-8")
    program = f"{source}\n\nraise SystemExit(run({json.dumps(doc)!r}))\n"
    result = backend.transport.run(
        [backend.python, "-", mode, root], input=program.encode(), timeout=3600
    )
    if not result.ok:
        tail = result.stderr.decode("utf-8", "replace").strip()[-400:]
        raise RgtError(
            f"{mode} on {machine} failed (exit {result.returncode}): {tail}",
            fix=f"check that {root} is writable on {machine} and shared by every machine",
        )
    return json.loads(result.stdout.decode().strip().splitlines()[-1])["result"]

"""`rgt pull` of a fleet job: every node's artifacts, each node's into ``DEST/node-R/``.

Each node wrote its own manifest; each is fetched and checked by the one verifier
(``pull.fetch_verified``) into its own folder, so two nodes that both wrote ``model.pt`` never
overwrite each other; a node whose manifest lists no file gets its folder with that manifest,
the evidence of "nothing" (a fleet where no node wrote a file has no artifacts). The pull is
recorded once for the job, its files as ``node-R/PATH`` under DEST, its manifest digest the
fleet's (``rgt.status.fleet.manifest``), which is what each machine's teardown gate holds it to.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from rgt.backends import backend_for
from rgt.errors import JobError
from rgt.jobs.pull import (
    NO_ARTIFACTS,
    PullProgress,
    PullResult,
    fetch_verified,
)
from rgt.jobs.pulled import failure_reasons
from rgt.models import TERMINAL, JobRecord, JobState
from rgt.state.store import Store
from rgt.status import cache as status_cache
from rgt.status.fleet import fleet_manifest_bytes, node_dir

# The report's lists whose entries name a file: prefixed with the node's folder when merged.
PATH_LISTS = ("files", "units", "refused", "not_confined")
NAME_LISTS = ("missing", "unexpected")


def pull_fleet(
    store: Store, record: JobRecord, dest: Path, progress: PullProgress | None = None
) -> PullResult:
    job_id = record.job_id
    shown = status_cache.observe(store, backend_for(store, record.machine), [record])[job_id]
    state = shown.state or record.state
    digests: list[str] = []
    results: list[tuple[int, PullResult]] = []
    files: dict[str, Any] = {}
    for rank, name in enumerate(record.spec.nodes):
        backend = backend_for(store, name)
        found = _node_manifest(backend.manifest(job_id), job_id, rank, name, state)
        digests.append(hashlib.sha256(found[1]).hexdigest())
        where = dest / node_dir(rank)
        result, landed = fetch_verified(backend, job_id, where, state, found, progress)
        results.append((rank, result))
        files.update({f"{node_dir(rank)}/{path}": entry for path, entry in landed.items()})
    return _recorded(store, record, dest, results, files, digests)


def _recorded(
    store: Store,
    record: JobRecord,
    dest: Path,
    results: list[tuple[int, PullResult]],
    files: dict[str, Any],
    digests: list[str],
) -> PullResult:
    where = os.path.abspath(dest)
    sha = hashlib.sha256(fleet_manifest_bytes(digests)).hexdigest()
    report = merged(results)
    ok = bool(report["ok"])
    store.record_pull(record.job_id, where, files, sha, ok, report)
    nothing = all(r.note == NO_ARTIFACTS for _, r in results)
    return PullResult(
        job_id=record.job_id,
        dest=where,
        copied=sum(r.copied for _, r in results),
        skipped=sum(r.skipped for _, r in results),
        bytes=sum(r.bytes for _, r in results),
        ok=ok,
        report=report,
        reasons=tuple(failure_reasons(report)),
        refused=tuple(why for _, r in results for why in r.refused),
        note=NO_ARTIFACTS if nothing else None,
    )


def _node_manifest(
    found: tuple[dict[str, Any], bytes] | None, job_id: str, rank: int, name: str, state: JobState
) -> tuple[dict[str, Any], bytes]:
    if found is None:
        hint = (
            "wait for it to end (`rgt watch JOB`)"
            if state not in TERMINAL
            else f"that node's agent wrote no manifest; check `rgt logs JOB --node {rank}`"
        )
        raise JobError(
            f"job {job_id} has no manifest on node {rank} ({name}) yet (state {state.value})",
            job_id=job_id,
            fix=hint,
        )
    return found


def merged(results: list[tuple[int, PullResult]]) -> dict[str, Any]:
    """One report for the fleet: each node's, its paths under ``node-R/``, and ``nodes``."""
    report: dict[str, Any] = {"ok": all(r.report.get("ok") for _, r in results), "nodes": []}
    for key in (*PATH_LISTS, *NAME_LISTS):
        report[key] = []
    for rank, result in results:
        prefix = f"{node_dir(rank)}/"
        for key in PATH_LISTS:
            items = result.report.get(key) or []
            report[key] += [{**item, "path": prefix + str(item.get("path"))} for item in items]
        for key in NAME_LISTS:
            report[key] += [prefix + str(name) for name in result.report.get(key) or []]
        report["nodes"].append({"node": rank, "dest": result.dest, "ok": result.ok})
    return report

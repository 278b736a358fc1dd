"""A fleet job's one state, read from every node (``rgt.jobs.fleet``).

Each node's agent writes its own status.json; the job is what the group is:

- failed (or cancelled) as soon as one node failed for good: a node's agent retries what is
  retryable itself, so a node that says ``failed`` has given up, and the group cannot finish
  without it;
- succeeded only when every node did (each wrote its manifest and DONE);
- otherwise retrying if a node is between attempts, running if one runs, queued before that;
  unknown when a node's status file cannot be believed;
- alive while every node's agent is: the oldest heartbeat is the group's, so a lost node is a
  lost heartbeat in `rgt status` and `rgt watch`.

The group's document is the worst node's (its reason, label, exit code), with ``nodes``: one
line per node. The teardown gate of each machine of the fleet counts the job (``jobs_on``), and
its manifest there is the fleet's (``manifest``): every node's files under ``node-R/``, the
shape ``rgt pull`` gives the pulled copy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rgt.backends import backend_for
from rgt.backends.base import Backend
from rgt.backends.statusdoc import JobStatus
from rgt.models import JobRecord, JobState
from rgt.state.store import Store

# Which node's document speaks for the group: the first in this order (None: unknown).
WORST: tuple[JobState | None, ...] = (
    JobState.FAILED,
    JobState.CANCELLED,
    None,
    JobState.RETRYING,
    JobState.QUEUED,
    JobState.RUNNING,
    JobState.SUCCEEDED,
)
NODE_KEYS = ("state", "attempt", "label", "reason", "exit_code", "agent_alive", "heartbeat")


def is_fleet(record: JobRecord) -> bool:
    return len(record.spec.nodes) > 1


def node_dir(rank: int) -> str:
    """Where node ``rank``'s artifacts go in a pulled copy."""
    return f"node-{rank}"


def group(
    store: Store,
    records: Sequence[JobRecord],
    found: Mapping[str, JobStatus],
    here: str,
    read: Callable[[str, str], JobStatus],
) -> dict[str, JobStatus]:
    """``found`` (read on machine ``here``) with each fleet job's status replaced by its
    group's; ``read(machine, job_id)`` reads another node (``rgt.status.cache``: one round trip).
    A group that failed has its nodes that still run stopped (``stop_the_rest``)."""
    shown = dict(found)
    for record in records:
        if is_fleet(record):
            nodes = [
                found[record.job_id] if name == here else read(name, record.job_id)
                for name in record.spec.nodes
            ]
            shown[record.job_id] = combine(record, nodes)
            stop_the_rest(store, record, nodes)
    return shown


def stop_the_rest(store: Store, record: JobRecord, nodes: Sequence[JobStatus]) -> list[str]:
    """A node failed for good: the group cannot finish, so the nodes still running (waiting at
    a rendezvous that will never complete, retrying into it) are cancelled, not left to burn
    their retry budget and the meter. Returns the machines asked to stop."""
    if not any(s.state is JobState.FAILED for s in nodes):
        return []
    live = [name for name, s in zip(record.spec.nodes, nodes, strict=True) if s.live]
    for name in live:
        backend_for(store, name).cancel(record.job_id)
    return live


def combine(record: JobRecord, nodes: Sequence[JobStatus]) -> JobStatus:
    """The group's status (module docstring) from each node's, by rank."""
    states = [s.state for s in nodes]
    worst = min(range(len(nodes)), key=lambda r: _badness(nodes[r]))
    doc = nodes[worst].to_doc()
    doc["state"] = _group_state(states)
    doc["exists"] = all(s.exists for s in nodes)
    doc["attempt"] = max(s.attempt for s in nodes)
    doc["done"] = all(bool(s.done) for s in nodes)
    live = [s for s in nodes if not s.has_ended]
    alive = [s.agent_alive for s in live]
    doc["agent_alive"] = None if None in alive else all(alive) if live else False
    beats = [s.heartbeat for s in live if s.heartbeat]
    if beats:
        doc["heartbeat"] = min(beats)
    if doc.get("reason") and states[worst] is not JobState.SUCCEEDED:
        doc["reason"] = f"node {worst} ({record.spec.nodes[worst]}): {doc['reason']}"
    doc["nodes"] = [_node_line(r, record.spec.nodes[r], s) for r, s in enumerate(nodes)]
    return JobStatus.from_doc(doc, record.job_id)


def _badness(status: JobStatus) -> tuple[int, bool]:
    """Lower is worse: by state (``WORST``), then a live node whose agent is gone first."""
    lost = status.agent_alive is False and not status.has_ended
    return WORST.index(status.state), not lost


def _group_state(states: Sequence[JobState | None]) -> str | None:
    if all(s is JobState.SUCCEEDED for s in states):
        return JobState.SUCCEEDED.value
    for state in (JobState.FAILED, JobState.CANCELLED):
        if state in states:
            return str(state.value)
    if None in states:
        return None
    for state in (JobState.RETRYING, JobState.RUNNING):
        if state in states:
            return str(state.value)
    return JobState.QUEUED.value  # queued, or queued beside nodes that already succeeded


def _node_line(rank: int, machine: str, status: JobStatus) -> dict[str, Any]:
    doc = status.to_doc()
    line = {"node": rank, "machine": machine, "exists": status.exists}
    return {**line, **{key: doc.get(key) for key in NODE_KEYS}}


def jobs_on(store: Store, machine: str) -> list[JobRecord]:
    """The jobs of ``machine``: those launched on it and the fleets it is a node of."""
    records = store.jobs(machine)
    known = {r.job_id for r in records}
    return records + [r for r in store.jobs() if r.job_id not in known and machine in r.spec.nodes]


def manifest(store: Store, record: JobRecord) -> tuple[dict[str, Any], bytes] | None:
    """A fleet's manifest: every node's files under ``node-R/``; its bytes name each node's
    manifest by sha256, so a node that wrote a new one makes an earlier pull stale. None while a
    node has none."""
    docs, digests = [], []
    for name in record.spec.nodes:
        found = backend_for(store, name).manifest(record.job_id)
        if found is None:
            return None
        docs.append(found[0])
        digests.append(hashlib.sha256(found[1]).hexdigest())
    files = [
        {**entry, "path": f"{node_dir(rank)}/{entry['path']}"}
        for rank, doc in enumerate(docs)
        for entry in doc.get("files") or []
    ]
    return {"files": files}, fleet_manifest_bytes(digests)


def fleet_manifest_bytes(digests: Sequence[str]) -> bytes:
    return json.dumps({"fleet_manifests_sha256": list(digests)}).encode()


def manifest_of(
    store: Store, backend: Backend, record: JobRecord
) -> tuple[dict[str, Any], bytes] | None:
    """The manifest the gate holds a pull to: the fleet's, or the machine's for one job."""
    return manifest(store, record) if is_fleet(record) else backend.manifest(record.job_id)

"""``rgt adopt NAME [JOB...]``: bring jobs the machine knows under this ``RGT_HOME``.

A machine can run jobs launched from another laptop, another ``RGT_HOME`` or a colleague. The
teardown gate lists every job directory on the machine and blocks on the ones this
``RGT_HOME`` has never seen; adopting them reads their ``spec.json`` and ``status.json`` from
the machine and records them in the local store, so they are watched, pulled and verified like
any job launched here. The machine's files are not changed.

A ``down`` approval given before the adoption no longer counts: the human approved a release
without knowing these jobs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rgt.backends import backend_for
from rgt.backends.base import Backend
from rgt.backends.statusdoc import JobStatus
from rgt.errors import JobError, RgtError, UsageError
from rgt.models import JOB_ID_RE, JobSpec, JobState
from rgt.state.store import Store, utcnow
from rgt.status import cache
from rgt.status.read import read


def adopt(store: Store, name: str, job_ids: Sequence[str] = ()) -> dict[str, Any]:
    """Adopt ``job_ids`` (default: every job on the machine unknown here)."""
    store.machine(name)
    backend = backend_for(store, name)
    # The one read: the backend's word on each job (on Slurm, Kubernetes and Kaggle the
    # scheduler or the API decides whether it lives, not the agent's files).
    found = read(backend)
    on_machine = found.agent_docs()
    known = {r.job_id: r.machine for r in store.jobs()}
    wanted = list(dict.fromkeys(job_ids)) or sorted(set(on_machine) - set(known))
    for job_id in wanted:
        _check_adoptable(name, job_id, on_machine, known)
    fresh = [j for j in wanted if j not in known]
    adopted = [_adopt_one(store, backend, j, on_machine[j], found.job(j)) for j in fresh]
    if adopted:
        _void_down_approval(store, name)
    return {
        "machine": name,
        "adopted": adopted,
        "already_known": [j for j in wanted if j in known],
        "on_machine": len(on_machine),
    }


def _check_adoptable(
    name: str, job_id: str, on_machine: Mapping[str, Any], known: dict[str, str]
) -> None:
    if job_id not in on_machine:
        listing = ", ".join(sorted(on_machine)) or "none"
        raise UsageError(
            f"no job {job_id!r} on {name} (jobs there: {listing})",
            fix=f"`rgt down {name} --check` lists the jobs that block the gate",
        )
    if not JOB_ID_RE.fullmatch(job_id):
        raise UsageError(
            f"the machine has a job directory with a malformed id {job_id!r}",
            fix="inspect it on the machine; rgt adopts only job ids rgt could have made",
        )
    if job_id in known and known[job_id] != name:
        raise UsageError(
            f"job {job_id} is already recorded here on machine {known[job_id]!r}",
            fix=f"two machine names point at one machine; release one (`rgt down {name}`)",
        )


def _adopt_one(
    store: Store, backend: Backend, job_id: str, doc: Mapping[str, Any], status: JobStatus
) -> dict[str, Any]:
    if doc.get("state") is not None and status.state is None:
        raise JobError(
            f"job {job_id} on {backend.machine.name} has an unknown state {doc.get('state')!r}",
            job_id=job_id,
            fix="inspect its status.json on the machine (`rgt logs JOB` once adopted)",
        )
    spec = _read_spec(backend, job_id)
    cache.adopt(store, spec, status)  # cached the one way every read caches a state
    state = status.state or JobState.QUEUED
    return {"job_id": job_id, "state": state.value, "command": list(spec.command)}


def _read_spec(backend: Backend, job_id: str) -> JobSpec:
    path = backend.job_paths(job_id).spec
    raw = backend.transport.read_bytes(path)
    try:
        data = json.loads(raw) if raw is not None else None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        # The spec names the machine as its launcher called it; here it is this machine.
        spec = JobSpec.from_json({**data, "machine": backend.machine.name}, path=path)
    except (ValueError, RgtError) as exc:
        raise JobError(
            f"cannot adopt job {job_id}: its spec.json on {backend.machine.name} is "
            f"{'missing' if raw is None else 'unreadable'} ({exc})",
            job_id=job_id,
            fix="adopt it from an rgt of the version that launched it, or inspect "
            f"{path} on the machine",
        ) from exc
    if spec.job_id != job_id:
        raise JobError(
            f"job directory {job_id} holds the spec of job {spec.job_id}",
            job_id=job_id,
            fix=f"inspect {path} on the machine",
        )
    return replace(spec, created=spec.created or utcnow())


def _void_down_approval(store: Store, name: str) -> None:
    from rgt.models import ACTION_DOWN

    while (approval := store.pending_approval(name, ACTION_DOWN)) is not None:
        store.consume_approval(int(approval["id"]))

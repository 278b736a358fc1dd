"""The one read path of a job's status, and the only writer of its copy in the state DB.

Every reader of a job's state — `rgt status` and `rgt run`'s probe (``launch.refresh``), `rgt
watch` (``watch.patrol``), a sweep's cells (``sweep._state``), the teardown gate and adopt —
gets the machine's word from the one read (``rgt.status.read``: one round trip per machine;
the backend decides liveness: the agent's pid and lock, or Slurm's, Kubernetes' or Kaggle's
own state) and passes it through ``settle`` here, which says what to show and caches what
the machine proves:

- the job dir is gone from a machine the job had reached: its last known state, marked with
  ``problem`` (``jobstatus.missing_dir``), never a new state, never cached;
- no job dir long after the launch: the launch never got there, cached as ``failed``;
- a status.json that cannot be believed: only an end proven by events.jsonl or DONE is
  cached (``jobstatus.settle``); otherwise the job shows ``unknown``.

So the views agree: they read one path and one cache. Two writes are not reads: a submission
that failed before the machine saw it (``never_submitted``, launch's result) and a job
adopted from the machine (``adopt``: its record, with the state the read proved).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from rgt.agent.jobfiles import parse_time
from rgt.backends import jobstatus
from rgt.backends.base import Backend
from rgt.backends.statusdoc import JobStatus, MachineRead
from rgt.errors import StateWriteError
from rgt.models import JobRecord, JobSpec, JobState
from rgt.state.store import Store, utcnow
from rgt.status import fleet
from rgt.status.read import read as read_machine

LOG = logging.getLogger(__name__)
# A record with no job directory on the machine this long after its creation was never
# launched: the rgt process that created it ended (crash, kill) before submitting it.
NEVER_LAUNCHED_S = 120.0
NEVER_LAUNCHED = "the launch never reached the machine (the launching rgt process ended first)"


def observe(
    store: Store,
    backend: Backend,
    records: Sequence[JobRecord],
    read: MachineRead | None = None,
) -> dict[str, JobStatus]:
    """job id -> what to show for each of ``records`` (all on ``backend``'s machine), read
    in one batched call (``read``: the machine read already in this call, e.g. the gate's
    roster); proven states are cached on the way."""
    if read is None:
        read = read_machine(backend, [r.job_id for r in records])
    found = {r.job_id: read.job(r.job_id) for r in records}
    found = fleet.group(store, records, found, backend.machine.name, _node_reader(store))
    root = backend.job_paths
    return {r.job_id: settle(store, r, found[r.job_id], root(r.job_id).root) for r in records}


def _node_reader(store: Store) -> Callable[[str, str], JobStatus]:
    """Reads one job on another machine of its fleet (``rgt.status.fleet``)."""
    from rgt.backends import backend_for

    return lambda machine, job: read_machine(backend_for(store, machine), [job]).job(job)


def settle(store: Store, record: JobRecord, status: JobStatus, job_root: str) -> JobStatus:
    """What to show for ``record`` given the machine's ``status`` (``job_root``: where its
    directory is on the machine); caches a state the machine proves."""
    doc = status.to_doc()
    proven = status.exists
    if not status.exists and jobstatus.reached_machine(record):
        doc.update(jobstatus.missing_dir(record, job_root))
    elif not status.exists and age_s(record.created) > NEVER_LAUNCHED_S:
        doc.update(state=JobState.FAILED.value, reason=NEVER_LAUNCHED, attempt=0, label=None)
        doc["ended"], proven = record.ended or utcnow(), True
    if proven and (doc.get("problem") is None or jobstatus.settle(doc, record)):
        try:
            write(store, record, JobStatus.from_doc(doc, record.job_id))
        except StateWriteError as exc:
            # A read shows the machine's word even when the cache cannot take it (a full
            # $RGT_HOME): the next read writes it; a write that matters (a pull's record,
            # an approval) still fails with the fix.
            LOG.warning("%s: the cached state stays stale: %s", record.job_id, exc.message)
    return JobStatus.from_doc(doc, record.job_id)


def write(store: Store, record: JobRecord, status: JobStatus) -> bool:
    """Copy a state the machine proves into the cache, only when it changed (one short
    write). An unknown state is never written. True when the cache changed."""
    if status.state is None:
        return False
    new = (status.state, status.attempt, status.label, status.ended)
    if new == (record.state, record.attempts, record.label, record.ended):
        return False
    store.update_job(
        record.job_id,
        state=status.state,
        attempts=status.attempt,
        label=status.label,
        ended=status.ended,
    )
    return True


def adopt(store: Store, spec: JobSpec, status: JobStatus) -> None:
    """Record a job found on the machine (``rgt adopt``) with the state its read proved; a
    job that wrote no status yet stays queued."""
    write(store, store.add_job(spec, JobState.QUEUED), status)


def never_submitted(store: Store, job_ids: Sequence[str]) -> None:
    """Record jobs whose submit failed (or was interrupted) as failed at attempt 0: rgt's own
    word, not the machine's, so nothing on the machine is waited for."""
    for job_id in job_ids:
        store.update_job(job_id, state=JobState.FAILED, attempts=0, ended=utcnow())


def age_s(stamp: str) -> float:
    created = parse_time(stamp)
    if created is None:
        return 0.0
    return (datetime.now(timezone.utc) - created).total_seconds()

"""What `rgt triage JOB` classifies: the job's last log tail and exit status, from its machine."""

from __future__ import annotations

from dataclasses import dataclass

from rgt.backends import backend_for
from rgt.state.store import Store
from rgt.status import cache as status_cache

TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class JobEvidence:
    job_id: str
    attempt: int
    log_tail: str
    exit_code: int | None
    signal: int | None
    state: str
    agent_label: str | None


def job_evidence(store: Store, job_id: str) -> JobEvidence:
    """Read the last attempt's log tail and exit status from the machine (one job, any backend)."""
    record = store.job(job_id)
    backend = backend_for(store, record.machine)
    status = status_cache.observe(store, backend, [record])[job_id].to_doc()
    attempt = int(status.get("attempt") or 1)
    path = backend.job_paths(job_id).log(attempt)
    result = backend.transport.run(["tail", "-c", str(TAIL_BYTES), "--", path])
    tail = result.stdout.decode("utf-8", "replace") if result.ok else ""
    return JobEvidence(
        job_id=job_id,
        attempt=attempt,
        log_tail=tail,
        exit_code=status.get("exit_code"),
        signal=status.get("signal"),
        state=str(status.get("state")),
        agent_label=status.get("label"),
    )

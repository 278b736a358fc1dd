"""The teardown gate: nothing stops a meter or releases a machine until every condition holds.

For each machine, ``down`` needs all four:

1. every job on it has ended (a running job would be killed with the machine);
2. every job's artifacts were pulled — against the manifest the agent wrote *now*, so a pull
   of an older manifest does not count;
3. every pulled artifact was load-verified locally (hash, size, loads, finite values);
4. a human approved this release at a terminal (``rgt approve NAME`` or the typed prompt of
   ``rgt down``). An agent or a script can ask for ``down``; it cannot approve it.

Rejected as evidence: log lines, directory counts, sizes, a job's own claim of success.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from rgt.backends.base import Backend
from rgt.jobs.store import Store
from rgt.models import TERMINAL, JobState

ACTION_DOWN = "down"


def abandon_action(job_id: str) -> str:
    return f"abandon:{job_id}"


@dataclass(frozen=True)
class GateCheck:
    name: str  # "ended" | "pulled" | "verified" | "approved"
    ok: bool
    detail: str


@dataclass(frozen=True)
class GateVerdict:
    machine: str
    checks: tuple[GateCheck, ...]
    approval_id: int | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def only_approval_missing(self) -> bool:
        return not self.ok and all(c.ok for c in self.checks if c.name != "approved")

    @property
    def reasons(self) -> list[str]:
        return [c.detail for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "ok": self.ok,
            "only_approval_missing": self.only_approval_missing,
            "checks": [c.__dict__ for c in self.checks],
            "reasons": self.reasons,
            "jobs": self.jobs,
        }


def evaluate(store: Store, backend: Backend) -> GateVerdict:
    """Read the truth from the machine (agent status, manifests) and the local pull records."""
    name = backend.machine.name
    rows = []
    for record in store.jobs(name):
        status = backend.status(record.job_id)
        state = JobState(status.get("state", record.state.value))
        found = backend.manifest(record.job_id)
        manifest_sha = hashlib.sha256(found[1]).hexdigest() if found else None
        row = _job_row(store, record.job_id, state, manifest_sha)
        abandoned = store.pending_approval(name, abandon_action(record.job_id))
        if abandoned and not row["verified"]:
            # A human at a terminal chose to lose this job's artifacts (a failed run with
            # nothing worth keeping, a file that can never load). Recorded, never implied.
            row.update(pulled=True, verified=True, abandoned_by=abandoned["approver"])
        rows.append(row)
    approval = store.pending_approval(name, ACTION_DOWN)
    newest_job = max((r.created for r in store.jobs(name)), default="")
    if approval and approval["time"] < newest_job:
        approval = None  # approved before a job that has since been launched: stale
    checks = (
        _check("ended", rows, lambda r: r["ended"], "has not ended (state {state})"),
        _check("pulled", rows, lambda r: r["pulled"], "artifacts not pulled (`rgt pull {job}`)"),
        _check(
            "verified",
            rows,
            lambda r: r["verified"],
            "pulled artifacts not load-verified (re-run `rgt pull {job}`)",
        ),
        GateCheck(
            "approved",
            approval is not None,
            "approved by a human"
            if approval
            else f"no human approval: run `rgt approve {name}` at a terminal",
        ),
    )
    return GateVerdict(
        machine=name,
        checks=checks,
        approval_id=int(approval["id"]) if approval else None,
        jobs=rows,
    )


def _job_row(
    store: Store, job_id: str, state: JobState, manifest_sha: str | None
) -> dict[str, Any]:
    pull = store.last_pull(job_id)
    current = (
        pull is not None and manifest_sha is not None and pull["manifest_sha256"] == manifest_sha
    )
    return {
        "job": job_id,
        "state": state.value,
        "ended": state in TERMINAL,
        "manifest": manifest_sha is not None,
        "pulled": current,
        "verified": bool(current and pull and pull["verified"]),
    }


def _check(name: str, rows: list[dict[str, Any]], ok: Any, template: str) -> GateCheck:
    bad = [r for r in rows if not ok(r)]
    if not bad:
        return GateCheck(name, True, f"all {len(rows)} job(s) {name}")
    detail = "; ".join(
        f"job {r['job']}: " + template.format(job=r["job"], state=r["state"]) for r in bad
    )
    return GateCheck(name, False, detail)

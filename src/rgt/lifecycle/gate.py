"""The teardown gate: nothing stops a meter or releases a machine until every condition holds.

For each machine, ``down`` needs all five:

0. every job the machine itself knows (each job directory under ``<durable>/.rgt/jobs/``, read
   in one agent round trip) is known to this ``RGT_HOME``: a job launched from another laptop
   or another ``RGT_HOME`` blocks until ``rgt adopt NAME JOB`` brings it here;
1. every job on it has ended (a running job would be killed with the machine);
2. every job's artifacts were pulled — against the manifest the agent wrote *now*, so a pull
   of an older manifest does not count. A job that ended with a manifest listing no file has
   no artifacts: nothing to pull (a job with no manifest at all still blocks);
3. every pulled artifact was load-verified locally (hash, size, loads, finite values), and the
   pulled copy is still what was verified: every file present with its recorded size and
   mtime (and sha256 with ``rehash``);
4. a human approved this release at a terminal (``rgt approve NAME`` or the typed prompt of
   ``rgt down``). An agent or a script can ask for ``down``; it cannot approve it.

Rejected as evidence: log lines, directory counts, sizes, a job's own claim of success.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from typing import Any

from rgt.backends.base import Backend
from rgt.backends.statusdoc import JobStatus
from rgt.jobs.pulled import failure_reasons, recheck
from rgt.models import ACTION_DOWN
from rgt.state.store import Store
from rgt.status import cache, fleet
from rgt.status.read import read


def abandon_action(job_id: str) -> str:
    return f"abandon:{job_id}"


@dataclass(frozen=True)
class GateCheck:
    name: str  # "known" | "ended" | "pulled" | "verified" | "approved"
    ok: bool
    detail: str


@dataclass(frozen=True)
class GateVerdict:
    machine: str
    checks: tuple[GateCheck, ...]
    approval_id: int | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)
    unknown_jobs: list[dict[str, Any]] = field(default_factory=list)

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
            "unknown_jobs": self.unknown_jobs,
        }


def evaluate(store: Store, backend: Backend, *, rehash: bool = False) -> GateVerdict:
    """Read the truth from the machine (its job dirs, agent status, manifests) and the local
    pull records, re-checking the pulled copies (``rehash``: their sha256 too)."""
    name = backend.machine.name
    records = fleet.jobs_on(store, name)  # with the fleets it is a node of
    on_machine = read(backend)  # every job dir there, judged by the backend: one round trip
    unknown = [
        {"job": job_id, "state": status.state_name}
        for job_id, status in sorted(on_machine.statuses.items())
        if job_id not in {r.job_id for r in records}
    ]
    rows = []
    shown = cache.observe(store, backend, records, read=on_machine)  # the one path
    for record in records:
        status = shown[record.job_id]
        if not status.exists:
            row = _missing_row(name, record.job_id)
        else:
            found = fleet.manifest_of(store, backend, record)  # a fleet: every node's
            row = _job_row(store, status, found, rehash)
        abandoned = store.pending_approval(name, abandon_action(record.job_id))
        if abandoned and not row["verified"]:
            # A human at a terminal chose to lose this job's artifacts (a failed run with
            # nothing worth keeping, a file that can never load). Recorded, never implied:
            # the row passes the gate, and every count names it as abandoned, not verified.
            row.update(pulled=True, verified=True, abandoned_by=abandoned["approver"])
        rows.append(row)
    approval = store.pending_approval(name, ACTION_DOWN)
    newest_job = max((r.created for r in records), default="")
    if approval and approval["time"] < newest_job:
        approval = None  # approved before a job that has since been launched: stale
    checks = (
        _known(name, unknown, len(on_machine.statuses)),
        _check("ended", rows, lambda r: r["ended"], "has not ended (state {state})"),
        _check("pulled", rows, lambda r: r["pulled"], "artifacts not pulled (`rgt pull {job}`)"),
        _disclose_hash_only(
            _check(
                "verified",
                rows,
                lambda r: r["verified"],
                "pulled artifacts not load-verified (re-run `rgt pull {job}`)",
            ),
            rows,
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
        unknown_jobs=unknown,
    )


def _known(name: str, unknown: list[dict[str, Any]], count: int) -> GateCheck:
    if not unknown:
        return GateCheck("known", True, f"all {count} job(s) on the machine are known here")
    ids = " ".join(u["job"] for u in unknown)
    detail = "; ".join(
        f"job {u['job']} (state {u['state']}) is on the machine but not in this RGT_HOME "
        "(launched from another computer or RGT_HOME)"
        for u in unknown
    )
    return GateCheck("known", False, f"{detail}: bring them here with `rgt adopt {name} {ids}`")


def _missing_row(machine: str, job_id: str) -> dict[str, Any]:
    """No job directory on the machine (deleted by hand, or the launch never reached it):
    nothing there can still run or be pulled, but losing it is the human's decision."""
    why = (
        f"job directory missing on the machine, nothing to pull; if that is expected, give it "
        f"up: `rgt approve {machine} --abandon {job_id}`"
    )
    return {
        "job": job_id,
        "state": "missing",
        "ended": True,
        "manifest": False,
        "pulled": False,
        "verified": False,
        "note": "job directory missing on the machine",
        "why_pulled": why,
        "why_verified": why,
    }


def _job_row(
    store: Store,
    status: JobStatus,
    found: tuple[dict[str, Any], bytes] | None,
    rehash: bool,
) -> dict[str, Any]:
    job_id = status.job_id
    manifest_sha = hashlib.sha256(found[1]).hexdigest() if found else None
    row: dict[str, Any] = {
        "job": job_id,
        "state": status.state_name,
        "ended": status.has_ended,
        "manifest": manifest_sha is not None,
        "pulled": False,
        "verified": False,
    }
    if found and status.has_ended and found[0].get("files") == []:
        return dict(row, pulled=True, verified=True, note="no artifacts")
    pull = store.last_pull(job_id)
    if pull is None or manifest_sha is None or pull["manifest_sha256"] != manifest_sha:
        return row
    row["pulled"] = True
    if not pull["verified"]:
        reasons = failure_reasons(pull["report"])
        machine = store.job(job_id).machine
        row["why_verified"] = (
            f"verification failed: {'; '.join(reasons[:3])} (fix the cause and `rgt pull "
            f"{job_id}` again, or give them up: `rgt approve {machine} --abandon {job_id}`)"
        )
        return row
    changes = recheck(pull["dest"], pull["files"], rehash=rehash)
    if changes:
        row["changed"] = changes
        row["why_verified"] = (
            f"the pulled copy changed since it was verified: {'; '.join(changes[:5])}"
            f" (pull it again: `rgt pull {job_id} --to {shlex.quote(pull['dest'])}`)"
        )
        return row
    hash_only = [
        f["path"] for f in pull["report"].get("files", []) if f.get("verdict") == "hash_only"
    ]
    return dict(row, verified=True, hash_only=hash_only) if hash_only else dict(row, verified=True)


def _disclose_hash_only(check: GateCheck, rows: list[dict[str, Any]]) -> GateCheck:
    """``hash_only`` satisfies the gate, but is never silent: its files are named."""
    said = [
        f"job {r['job']}: {len(r['hash_only'])} file(s) ({', '.join(r['hash_only'][:3])}"
        + (" …)" if len(r["hash_only"]) > 3 else ")")
        for r in rows
        if r.get("hash_only")
    ]
    if not said:
        return check
    note = "; hash_only (bytes match the manifest, the format names code rgt never runs): "
    return GateCheck(check.name, check.ok, check.detail + note + "; ".join(said))


def _check(name: str, rows: list[dict[str, Any]], ok: Any, template: str) -> GateCheck:
    bad = [r for r in rows if not ok(r)]
    if not bad:
        return GateCheck(name, True, _all_passed(name, rows))
    detail = "; ".join(
        f"job {r['job']}: "
        + (r.get(f"why_{name}") or template.format(job=r["job"], state=r["state"]))
        for r in bad
    )
    return GateCheck(name, False, detail)


def _all_passed(name: str, rows: list[dict[str, Any]]) -> str:
    """``all 3 job(s) verified``, or ``2 verified, 1 abandoned``: a job whose artifacts a
    human gave up is never counted as pulled or verified."""
    given_up = sum(1 for r in rows if r.get("abandoned_by"))
    if not given_up:
        return f"all {len(rows)} job(s) {name}"
    return f"{len(rows) - given_up} {name}, {given_up} abandoned"

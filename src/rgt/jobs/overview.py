"""`rgt status`: machines and jobs, with live state read from each machine's agent.

A job's liveness (``heartbeat_lost``) and a state file that cannot be believed (``problem``)
are judged with the same rule as ``rgt watch`` (``jobstatus.judge``); ``reason`` then says
what to do. The live jobs of a machine are read in one batched call (``rgt.status``).
"""

from __future__ import annotations

from typing import Any

from rgt.backends import backend_for, jobstatus
from rgt.errors import TransportError, UnknownJobError, UnknownMachineError
from rgt.models import TERMINAL, JobRecord
from rgt.state.store import Store
from rgt.status import cache as status_cache


def overview(store: Store, target: str | None = None) -> dict[str, Any]:
    """Everything, one machine (``target`` = machine name) or one job (``target`` = job id)."""
    machines = store.machines()
    jobs = store.jobs()
    if target is not None:
        names = {m.name for m in machines}
        if target in names:
            machines = [m for m in machines if m.name == target]
            jobs = [j for j in jobs if j.machine == target]
        else:
            try:
                job = store.job(target)
            except UnknownJobError:
                raise UnknownMachineError(target, sorted(names)) from None
            machines = [m for m in machines if m.name == job.machine]
            jobs = [job]
    return {
        "machines": [
            {
                "name": m.name,
                "backend": m.backend,
                "profile": m.profile,
                "price_per_hour": m.price_per_hour,
                "registered": m.registered,
                "released": m.released,
                "durable_root": m.durable_root,
            }
            for m in machines
        ],
        "jobs": _rows(store, jobs),
    }


def _rows(store: Store, jobs: list[JobRecord]) -> list[dict[str, Any]]:
    """Each job's row; the live ones read in one batched call per machine."""
    live: dict[str, dict[str, Any]] = {}
    for machine in dict.fromkeys(j.machine for j in jobs if j.state not in TERMINAL):
        records = [j for j in jobs if j.machine == machine and j.state not in TERMINAL]
        live.update(_read_machine(store, machine, records))
    return [_row(j, live.get(j.job_id)) for j in jobs]


def _read_machine(
    store: Store, machine: str, records: list[JobRecord]
) -> dict[str, dict[str, Any]]:
    """job id -> its judged status (``heartbeat_lost`` as `rgt watch` judges it), through the
    one status path; an unreachable machine -> ``error`` (it says nothing about the jobs)."""
    try:
        found = status_cache.observe(store, backend_for(store, machine), records)
    except TransportError as exc:
        return {r.job_id: {"error": f"unreachable: {exc.message}"} for r in records}
    limit = jobstatus.heartbeat_limit_s()
    return {j: jobstatus.judge(dict(s.to_doc(), machine=machine), s.now, limit)
            for j, s in found.items()}  # fmt: skip


def _row(job: JobRecord, live: dict[str, Any] | None) -> dict[str, Any]:
    base: dict[str, Any] = {
        "job_id": job.job_id,
        "machine": job.machine,
        "state": job.state.value,
        "attempt": job.attempts,
        "label": job.label,
        "created": job.created,
        "heartbeat_lost": None,
        "problem": None,
        "alerts": [],
    }
    if live is None:
        return base
    if "error" in live:  # an unreachable machine: keep the cached state
        return dict(base, error=live["error"])
    base.update({k: live.get(k) for k in LIVE_FIELDS})
    if live.get("nodes"):  # a fleet (rgt.jobs.fleet): each node's state
        base["nodes"] = live["nodes"]
    lost = live.get("heartbeat_lost")
    if lost:
        base["reason"] = f"heartbeat_lost: {lost['why']}; {lost['next']}"
    return base


LIVE_FIELDS = (
    "state",
    "attempt",
    "step",
    "label",
    "reason",
    "heartbeat",
    "heartbeat_age_s",
    "agent_alive",
    "liveness",
    "waiting",
    "exit_code",
    "signal",
    "heartbeat_lost",
    "problem",
    "alerts",
)

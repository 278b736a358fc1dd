"""`rgt status`: machines and jobs, with live state read from each machine's agent.

A job's liveness (``heartbeat_lost``) and a state file that cannot be believed (``problem``)
are judged by ``refresh`` with the same rule as ``rgt watch``; ``reason`` then says what to do.
"""

from __future__ import annotations

from typing import Any

from rgt.errors import TransportError, UnknownJobError, UnknownMachineError
from rgt.jobs.launch import refresh
from rgt.models import TERMINAL, JobRecord
from rgt.state.store import Store


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
        "jobs": [_live(store, j) for j in jobs],
    }


def _live(store: Store, job: JobRecord) -> dict[str, Any]:
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
    if job.state in TERMINAL:
        return base
    try:
        live = refresh(store, job.job_id)
    except TransportError as exc:
        # An unreachable machine says nothing about the job: keep the cached state.
        base["error"] = f"unreachable: {exc.message}"
        return base
    base.update({k: live.get(k) for k in LIVE_FIELDS})
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

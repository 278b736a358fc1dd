"""The patrol: every machine polled in parallel, one agent round trip each, merged with the
local state DB into one report.

A machine that cannot be reached is shown as "unreachable since <first failure>" and its
jobs keep their last known state: a dropped connection is never evidence that a job died
(MON-9). The first failure time survives between `rgt watch --once` runs (a cron patrol) in
``$RGT_HOME/watch/unreachable.json``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from rgt import _fs
from rgt.agent.paths import RootPaths
from rgt.autostop.view import events as autostop_events
from rgt.backends import get_backend
from rgt.backends.jobstatus import judge, problem_reason
from rgt.backends.statusdoc import JobStatus
from rgt.config import rgt_home
from rgt.errors import RgtError, TransportError, UnknownJobError, UnknownMachineError
from rgt.models import JobRecord, Machine
from rgt.state.store import Store, utcnow
from rgt.status import cache
from rgt.status.read import read
from rgt.watch import events as ev

MAX_THREADS = 16


@dataclass(frozen=True)
class PatrolOptions:
    events: int = 8  # last events per running job
    gpu: bool = True
    heartbeat_lost_s: float = 120.0
    not_pulled_h: float = 24.0
    recent_events: int = 20


def select(store: Store, target: str | None) -> tuple[list[Machine], str | None]:
    """(machines to poll, the one job id asked for or None) for `rgt watch [NAME|JOB]`."""
    machines = store.machines(include_released=False)
    if target is None:
        return machines, None
    named = [m for m in machines if m.name == target]
    if named:
        return named, None
    try:
        job = store.job(target)
    except UnknownJobError:
        raise UnknownMachineError(target, [m.name for m in machines]) from None
    return [store.machine(job.machine)], job.job_id


def poll(machine: Machine, options: PatrolOptions) -> dict[str, Any]:
    """One machine's patrol document, or the reason it could not be read."""
    start = time.monotonic()
    backend = get_backend(machine)
    try:
        # The one read: one round trip; the backend decides liveness (Slurm: its
        # controller's state).
        found = read(backend, events=options.events, gpu=options.gpu)
    except TransportError as exc:
        return {"reachable": False, "error": exc.message, "poll_s": _since(start)}
    except RgtError as exc:
        return {"reachable": True, "error": exc.message, "poll_s": _since(start), "jobs": []}
    doc = dict(found.patrol)
    doc.update(reachable=True, error=None, poll_s=_since(start), statuses=found.statuses)
    return doc


def _since(start: float) -> float:
    return round(time.monotonic() - start, 3)


def patrol(
    store: Store, target: str | None = None, options: PatrolOptions | None = None
) -> dict[str, Any]:
    options = options or PatrolOptions()
    machines, job_id = select(store, target)
    workers = max(1, min(MAX_THREADS, len(machines)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        docs = list(pool.map(lambda m: poll(m, options), machines))
    since = _unreachable_since({m.name: d for m, d in zip(machines, docs, strict=True)})
    report = _assemble(store, machines, docs, since, options)
    if job_id is not None:
        report["jobs"] = [j for j in report["jobs"] if j["job_id"] == job_id]
    return report


def _assemble(
    store: Store,
    machines: list[Machine],
    docs: list[dict[str, Any]],
    since: dict[str, str],
    options: PatrolOptions,
) -> dict[str, Any]:
    rows, jobs = [], []
    for machine, doc in zip(machines, docs, strict=True):
        rows.append(machine_row(machine, doc, since.get(machine.name)))
        jobs += merge_jobs(store, machine, doc)
    derived = [e for j in jobs for e in _derived(j, store, options) if e]
    derived += [e for r in rows for e in autostop_events(r["name"], r.get("autostop"))]
    for job in jobs:
        job.pop("_now", None)
    return {
        "schema": "rgt.watch/1",
        "time": utcnow(),
        "machines": rows,
        "jobs": jobs,
        "events": ev.recent(jobs, derived, options.recent_events),
        "summary": _summary(rows, jobs),
    }


def _derived(job: dict[str, Any], store: Store, options: PatrolOptions) -> list[Any]:
    """The same judgement as `rgt status` (``jobstatus.judge``), then the derived events."""
    judge(job, job.get("_now"), options.heartbeat_lost_s)
    found = [ev.heartbeat_lost(job), ev.not_pulled(job, store, options.not_pulled_h)]
    job["alerts"] += [e["kind"] for e in found if e and e["kind"] not in job["alerts"]]
    return found


def machine_row(machine: Machine, doc: dict[str, Any], down_since: str | None) -> dict[str, Any]:
    readings = doc.get("machine") or {}
    gpu = readings.get("gpu") or {}
    return {
        "name": machine.name,
        "backend": machine.backend,
        "profile": machine.profile,
        "reachable": doc.get("reachable", False),
        "unreachable_since": down_since,
        "error": doc.get("error"),
        "poll_s": doc.get("poll_s"),
        "price_per_hour": machine.price_per_hour,
        **cost(machine),
        "host": doc.get("host"),
        "boot_id": readings.get("boot_id"),
        "uptime_s": readings.get("uptime_s"),
        "disk": readings.get("disk"),
        "shm": readings.get("shm"),
        "memory": readings.get("memory"),
        "gpu_error": gpu.get("error"),
        "gpus": gpu.get("gpus") or [],
        "autostop": doc.get("autostop"),  # the armed policy, money, last refusal (rgt.autostop)
    }


def cost(machine: Machine, now: datetime | None = None) -> dict[str, Any]:
    """Price × hours since `up` (until release): what the meter has charged so far."""
    start = ev.parse_time(machine.registered)
    end = ev.parse_time(machine.released) or now or datetime.now(timezone.utc)
    hours = None if start is None else max(0.0, (end - start).total_seconds() / 3600)
    spent = None
    if hours is not None and machine.price_per_hour is not None:
        spent = round(machine.price_per_hour * hours, 4)
    return {"hours_up": None if hours is None else round(hours, 3), "cost_so_far": spent}


def merge_jobs(store: Store, machine: Machine, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The machine's view of every job (the truth, as its backend judges it) over the local
    cache, each through the one status path (``rgt.status.cache.settle``); jobs found on the
    machine that this state DB does not know are listed too (``known`` False)."""
    remote = {j["job_id"]: j for j in doc.get("jobs") or []}
    statuses: dict[str, JobStatus] = doc.get("statuses") or {}
    now = ev.parse_time(doc.get("time")) or datetime.now(timezone.utc)
    root = RootPaths(machine.durable_root)
    out = []
    for record in store.jobs(machine.name):
        found = remote.pop(record.job_id, None)
        if not doc.get("reachable") or doc.get("error"):
            out.append(_cached_view(record, doc))
            continue
        said = statuses.get(record.job_id) or JobStatus.absent(record.job_id)
        shown = cache.settle(store, record, said, root.job(record.job_id).root)
        if found is not None:
            out.append(_remote_view(found, shown, machine.name, now, known=True))
        else:
            out.append(_absent_view(record, shown))
    for job_id, job in remote.items():
        said = statuses.get(job_id) or JobStatus.from_doc(job, job_id)
        out.append(_remote_view(job, said, machine.name, now, known=False))
    return out


KEEP = (
    "state",
    "attempt",
    "label",
    "reason",
    "exit_code",
    "signal",
    "heartbeat",
    "agent_alive",
    "liveness",
    "waiting",
    "boot_id",
    "boot_id_now",
    "started",
    "ended",
    "done",
    "log_age_s",
    "exists",
    "retries_left",
    "status_file",
    "problem",
    "spec_age_s",
    "state_source",
    "events_skipped",
    "slurm",
)


def _remote_view(
    job: dict[str, Any], status: JobStatus, machine: str, now: datetime, known: bool
) -> dict[str, Any]:
    progress = _mapping(job.get("progress"))
    shown = status.to_doc()
    view: dict[str, Any] = {"job_id": status.job_id, "machine": machine, "known": known}
    view.update({k: shown.get(k) for k in KEEP})
    view.update(reachable=True, heartbeat_age_s=ev.age_s(status.heartbeat, now))
    view.update({k: progress.get(k) for k in ("step", "epoch", "loss", "nonfinite")})
    view["progress_source"] = progress.get("source")
    view["events"] = _events(job.get("events"))
    view["_now"] = now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    if status.state is None and not view["reason"]:  # e.g. an unknown job, status.json cut
        view["reason"] = problem_reason(view)
    return view


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _events(value: Any) -> list[dict[str, Any]]:
    """The machine's events for this job: objects only (a machine may send anything; its
    strings were clipped where they were read, ``backends.remote.machine_call``)."""
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _absent_view(record: JobRecord, shown: JobStatus) -> dict[str, Any]:
    """A reachable machine without the job directory: the launch never got there (after a
    grace period), or, for a job it had reached, the directory vanished (its last known
    state, marked, never a new one; ``rgt.status.cache.settle``)."""
    view = {k: v for k, v in shown.to_doc().items() if k in (*KEEP, "job_id")}
    view.update(machine=record.machine, known=True, reachable=True, events=[])
    view["ended"] = view.get("ended") or record.ended
    if shown.problem is None and shown.state is not None and not shown.has_ended:
        view["state"] = record.state.value  # young: the launch may still be on its way
    return view


def _cached_view(record: JobRecord, doc: dict[str, Any]) -> dict[str, Any]:
    """What the state DB last knew, for a machine that could not be read: that says
    nothing about the job (not evidence of death)."""
    view: dict[str, Any] = {
        "job_id": record.job_id,
        "machine": record.machine,
        "known": True,
        "reachable": bool(doc.get("reachable")),
        "state": record.state.value,
        "attempt": record.attempts,
        "label": record.label,
        "ended": record.ended,
        "events": [],
    }
    if not doc.get("reachable"):
        view["reason"] = "machine unreachable: last known state shown (not evidence of death)"
    return view


def _state_file() -> Any:
    return rgt_home() / "watch" / "unreachable.json"


def _unreachable_since(docs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """name -> first failure time of every machine that is unreachable now (persisted)."""
    path = _state_file()
    try:
        known = dict(_fs.read_json(str(path)))  # type: ignore[call-overload]
    except (OSError, ValueError, TypeError):
        known = {}
    now = utcnow()
    current = {n: str(known.get(n) or now) for n, d in docs.items() if not d.get("reachable")}
    merged = {n: t for n, t in known.items() if n not in docs}
    merged.update(current)
    if merged != known:
        path.parent.mkdir(parents=True, exist_ok=True)
        _fs.atomic_write_json(str(path), merged)
    return current


def _summary(rows: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    states: dict[str, int] = {}
    for job in jobs:
        states[job["state"]] = states.get(job["state"], 0) + 1
    spent = [r["cost_so_far"] for r in rows if r.get("cost_so_far") is not None]
    return {
        "machines": len(rows),
        "unreachable": sum(1 for r in rows if not r["reachable"]),
        "jobs": states,
        "alerts": sum(len(j.get("alerts") or []) for j in jobs),
        "cost_so_far": round(sum(spent), 4) if spent else None,
    }

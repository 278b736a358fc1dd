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
from rgt.backends import get_backend
from rgt.backends.jobstatus import judge, missing_dir, problem_reason, reached_machine, settle
from rgt.backends.remote import machine_call
from rgt.config import rgt_home
from rgt.errors import RgtError, TransportError, UnknownJobError, UnknownMachineError
from rgt.jobs.launch import NEVER_LAUNCHED, NEVER_LAUNCHED_S
from rgt.models import JobRecord, JobState, Machine
from rgt.state.store import Store, utcnow
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
    args = ["--events", str(options.events)] + ([] if options.gpu else ["--no-gpu"])
    try:
        doc = machine_call(get_backend(machine), "patrol", args, timeout=60)
    except TransportError as exc:
        return {"reachable": False, "error": exc.message, "poll_s": _since(start)}
    except RgtError as exc:
        return {"reachable": True, "error": exc.message, "poll_s": _since(start), "jobs": []}
    doc.update(reachable=True, error=None, poll_s=_since(start))
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
    """The machine's view of every job (the truth) over the local cache; jobs found on the
    machine that this state DB does not know are listed too (``known`` False)."""
    remote = {j["job_id"]: j for j in doc.get("jobs") or []}
    now = ev.parse_time(doc.get("time")) or datetime.now(timezone.utc)
    out = []
    for record in store.jobs(machine.name):
        found = remote.pop(record.job_id, None)
        if found is not None and doc.get("reachable"):
            out.append(_remote_view(found, machine.name, now, known=True))
            if not out[-1].get("problem") or settle(out[-1], record):  # proven (jobstatus)
                _sync(store, record, out[-1])
        else:
            out.append(_cached_view(store, record, doc))
    out += [_remote_view(j, machine.name, now, known=False) for j in remote.values()]
    return out


def _remote_view(job: dict[str, Any], machine: str, now: datetime, known: bool) -> dict[str, Any]:
    progress = job.get("progress") or {}
    keep = (
        "state",
        "attempt",
        "label",
        "reason",
        "exit_code",
        "signal",
        "heartbeat",
        "agent_alive",
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
    )
    view: dict[str, Any] = {"job_id": job["job_id"], "machine": machine, "known": known}
    view.update({k: job.get(k) for k in keep})
    view.update(reachable=True, heartbeat_age_s=ev.age_s(job.get("heartbeat"), now))
    view.update({k: progress.get(k) for k in ("step", "epoch", "loss", "nonfinite")})
    view["progress_source"] = progress.get("source")
    view["events"] = job.get("events") or []
    view["_now"] = now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    if view["state"] is None:  # an unknown job whose status.json is cut
        view.update(state="unknown", reason=problem_reason(view))
    return view


def _cached_view(store: Store, record: JobRecord, doc: dict[str, Any]) -> dict[str, Any]:
    """What the state DB last knew. A reachable machine without the job directory means the
    launch never got there (after a grace period), or, for a job it had reached, that the
    directory vanished (marked, never a new state); an unreachable one means nothing."""
    reachable = bool(doc.get("reachable")) and not doc.get("error")
    if reachable and reached_machine(record):
        root = RootPaths(store.machine(record.machine).durable_root).job(record.job_id).root
        return {
            **missing_dir(record, root),
            "machine": record.machine,
            "known": True,
            "reachable": True,
            "ended": record.ended,
            "events": [],
        }
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
    elif reachable and not record.state.ended and _age(record.created) > NEVER_LAUNCHED_S:
        view.update(state=JobState.FAILED.value, reason=NEVER_LAUNCHED, exists=False)
        store.update_job(record.job_id, state=JobState.FAILED, attempts=0, ended=utcnow())
    return view


def _age(stamp: str) -> float:
    return ev.age_s(stamp, datetime.now(timezone.utc)) or 0.0


def _sync(store: Store, record: JobRecord, view: dict[str, Any]) -> None:
    """Copy the machine's truth into the cache (only when it changed: one short write)."""
    try:
        state = JobState(view.get("state") or record.state.value)
    except ValueError:
        return
    attempts, label, ended = int(view.get("attempt") or 0), view.get("label"), view.get("ended")
    if (state, attempts, label, ended) != (
        record.state,
        record.attempts,
        record.label,
        record.ended,
    ):
        store.update_job(record.job_id, state=state, attempts=attempts, label=label, ended=ended)


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

"""Events the CLI derives because no agent can report them, and the order events are shown in.

- ``heartbeat_lost``: a job that should be running whose agent is gone, or whose status.json
  has not been rewritten for too long, or whose host has a new boot id. The agent cannot say
  it died; only a reader from outside can.
- ``not_pulled``: a job that succeeded hours ago whose artifacts were never pulled and
  verified. On a rental that is money (the machine keeps billing) and data at risk (a
  release or a low-balance wipe deletes them).

Ages are computed against the machine's own clock (the patrol document carries it), so a
skewed laptop clock cannot fake a lost heartbeat.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from rgt.agent.jobfiles import parse_time as parse_time  # the one parser (re-exported)
from rgt.state.store import Store


def age_s(stamp: Any, now: datetime) -> float | None:
    then = parse_time(stamp)
    return None if then is None else round((now - then).total_seconds(), 1)


def event(job: dict[str, Any], kind: str, detail: dict[str, Any], next_step: str) -> dict[str, Any]:
    return {
        "time": job.get("_now"),
        "job_id": job["job_id"],
        "kind": kind,
        "attempt": job.get("attempt"),
        "detail": detail,
        "next": next_step,
        "derived": True,
    }


def heartbeat_lost(job: dict[str, Any]) -> dict[str, Any] | None:
    """The event for a job judged lost (``jobstatus.judge`` set ``heartbeat_lost``)."""
    lost = job.get("heartbeat_lost")
    if not lost:
        return None
    detail = {k: lost[k] for k in ("why", "heartbeat_age_s", "agent_alive")}
    return event(job, "heartbeat_lost", detail, lost["next"])


def not_pulled(job: dict[str, Any], store: Store, limit_h: float) -> dict[str, Any] | None:
    if job.get("state") != "succeeded" or not job.get("known"):
        return None
    ended = age_s(job.get("ended"), parse_time(job.get("_now")) or datetime.now(timezone.utc))
    if ended is None or ended < limit_h * 3600:
        return None
    pulled = store.last_pull(job["job_id"])
    if pulled and pulled.get("verified"):
        return None
    detail = {"ended_hours_ago": round(ended / 3600, 1), "pulled": bool(pulled)}
    return event(job, "not_pulled", detail, NEXT_PULL.format(job=job["job_id"]))


def recent(jobs: list[dict[str, Any]], derived: list[dict[str, Any]], limit: int) -> list[Any]:
    """Agent events of every job and the derived ones, newest last, at most ``limit``."""
    merged = [e for j in jobs for e in j.get("events") or []] + derived
    merged.sort(key=lambda e: str(e.get("time") or ""))
    return merged[-limit:]


NEXT_PULL = (
    "`rgt pull {job}` copies and load-verifies the artifacts; until then they exist only on a "
    "machine that keeps billing and can be wiped"
)

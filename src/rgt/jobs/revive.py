"""`rgt resume`'s promise, checked: the agent it started came up and stayed up.

Starting a detached process succeeds even when that process dies a moment later (a full disk,
a Python that cannot run the agent, a job directory it cannot write). So ``resume`` watches
the job for a few seconds after starting its agent and reports one of three truths:

- the agent is up and has stayed up for ``STAY_S`` (``resumed``: True, ``ok``: True);
- the agent came up and ended the job at once (it had already ended, or the disk refused its
  end): ``resumed`` True, ``ok`` only if the job succeeded or was cancelled;
- the agent never came up, or died: ``resumed`` False, ``ok`` False, with the tail of
  agent.log (or, when that is empty, the likely reason: a full disk).
"""

from __future__ import annotations

import time
from typing import Any

from rgt.agent.jobfiles import parse_time
from rgt.backends import jobstatus
from rgt.backends.base import Backend
from rgt.jobs.launch import refresh
from rgt.state.store import Store

STAY_S = 2.0
DEFAULT_WAIT_S = 15.0
POLL_S = 0.3
LOG_LINES = 12


def wait_s() -> float:
    """``resume.wait_s`` (env ``RGT_RESUME_WAIT_S``): how long to wait for the agent."""
    from rgt.config import Settings

    return float(Settings.load().get("resume.wait_s", default=DEFAULT_WAIT_S))


def confirm(store: Store, backend: Backend, job_id: str, since: Any = None) -> dict[str, Any]:
    """Poll the job after its agent was started at machine time ``since``: the agent is up
    once it is alive *and* has written a heartbeat after ``since`` (an agent that cannot
    write its status is not supervising anything), then it must stay up for ``STAY_S``."""
    start, limit = time.monotonic(), max(wait_s(), STAY_S + 1.0)
    up_since: float | None = None
    while True:
        status = refresh(store, job_id, backend)
        now = time.monotonic()
        if status.get("agent_alive") and _fresh(status, since):
            up_since = up_since or now
            if now - up_since >= STAY_S:
                return _up(status)
        elif jobstatus.ended(status):  # recorded, or proven by events.jsonl/DONE
            return _ended(status)
        elif up_since is not None or now - start >= limit:
            return _down(backend, status, job_id, up_since is not None)
        time.sleep(POLL_S)


def _fresh(status: dict[str, Any], since: Any) -> bool:
    beat, before = parse_time(status.get("heartbeat")), parse_time(since)
    return before is None or (beat is not None and beat > before)


def _up(status: dict[str, Any]) -> dict[str, Any]:
    reason = (
        f"agent started again and stayed up ({STAY_S:g}s): the job is {status['state']}, "
        f"attempt {status.get('attempt') or 0}"
    )
    return {**status, "resumed": True, "ok": True, "reason": reason}


def _ended(status: dict[str, Any]) -> dict[str, Any]:
    state, label = status["state"], status.get("label")
    why = f"{state} ({label})" if label and state == "failed" else state
    reason = f"the agent came up and ended the job: {why}: {status.get('reason') or ''}"
    ok = state in ("succeeded", "cancelled")
    return {**status, "resumed": True, "ok": ok, "reason": reason.rstrip(": ")}


def _down(backend: Backend, status: dict[str, Any], job_id: str, was_up: bool) -> dict[str, Any]:
    tail = agent_log_tail(backend, job_id)
    if was_up:
        reason = "the agent came up, then died; the job is not supervised. "
    elif status.get("agent_alive"):
        reason = "the agent runs but has written no status since it started (a full disk?). "
    else:
        reason = "the agent did not come up; the job is not supervised. "
    if tail:
        reason += "agent.log ends with: " + " | ".join(tail[-3:])
    else:
        reason += (
            "agent.log is empty or unreadable: the machine's disk may be full "
            f"(`rgt audit {backend.machine.name}` shows free bytes and inodes)"
        )
    return {**status, "resumed": False, "ok": False, "reason": reason, "agent_log_tail": tail}


def agent_log_tail(backend: Backend, job_id: str) -> list[str]:
    path = f"{backend.job_paths(job_id).root}/agent.log"
    result = backend.transport.run(["tail", "-n", str(LOG_LINES), "--", path])
    if not result.ok:
        return []
    return [line for line in result.text().splitlines() if line.strip()]


def reopen(store: Store, backend: Backend, job_id: str, status: dict[str, Any]) -> dict[str, Any]:
    """A failed job, restarted by its agent from the newest valid checkpoint (``REOPEN``,
    ``rgt.agent.supervisor``): ``resumed`` once a new attempt began, else why it cannot."""
    before, since = int(status.get("attempt") or 0), status.get("now")
    start, limit = time.monotonic(), max(wait_s(), STAY_S + 1.0)
    while time.monotonic() - start < limit:
        refused = _refusal(backend, job_id, since)
        if refused is not None:
            return {**status, "resumed": False, "ok": False, "reason": refused}
        now = refresh(store, job_id, backend)
        if int(now.get("attempt") or 0) > before:
            return confirm(store, backend, job_id, since=since)
        time.sleep(POLL_S)
    return _down(backend, refresh(store, job_id, backend), job_id, False)


def _refusal(backend: Backend, job_id: str, since: Any) -> str | None:
    after = parse_time(since)
    for event in reversed(backend.events(job_id)):
        if event.get("kind") != "resume_refused":
            continue
        when = parse_time(event.get("time"))
        if after is None or (when is not None and when >= after):
            why = (event.get("detail") or {}).get("reason") or "no valid checkpoint"
            return f"cannot resume the failed job {job_id}: {why}"
    return None

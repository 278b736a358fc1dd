"""The CLI's half of reading a job's status: what `status`, `watch` and their JSON agree on.

The machine's half (``rgt.agent.jobfiles``) reads the files and reports a cut or garbled one
as a problem; this half turns that into the fields every view shows the same way:

- ``heartbeat_lost``: None, or why the job's agent is gone and what to do (``rgt resume``),
  judged by ``jobfiles.heartbeat_lost`` against ``watch.heartbeat_lost_s``;
- ``problem``: a state file that cannot be believed, or a job directory that vanished, with
  its path and the fix; the state shown is then only what the machine proves (``settle``),
  never a guess and never the cached state passed off as the machine's;
- ``alerts``: the short names of both, for tables and scripts.
"""

from __future__ import annotations

from typing import Any

from rgt.agent import jobfiles
from rgt.errors import StateFileError
from rgt.models import JobRecord, JobState

DEFAULT_HEARTBEAT_LOST_S = 120.0


def heartbeat_limit_s() -> float:
    """``watch.heartbeat_lost_s`` (env ``RGT_WATCH_HEARTBEAT_LOST_S``): how long a live job's
    heartbeat may be silent. A dead agent (pid and lock gone) is reported at once."""
    from rgt.config import Settings

    return float(Settings.load().get("watch.heartbeat_lost_s", default=DEFAULT_HEARTBEAT_LOST_S))


def judge(status: dict[str, Any], now: Any, limit_s: float) -> dict[str, Any]:
    """Add ``heartbeat_lost`` and ``alerts`` to a status read from the machine (in place)."""
    lost = jobfiles.heartbeat_lost(status, now, limit_s)
    status["heartbeat_lost"] = lost
    status["heartbeat_age_s"] = jobfiles.age_s(status.get("heartbeat"), now)
    alerts = [a for a in status.get("alerts") or [] if a not in ("heartbeat_lost", "state_file")]
    if lost:
        alerts.append("heartbeat_lost")
    if status.get("problem"):
        alerts.append("state_file")
    status["alerts"] = alerts
    return status


# Where a job's state comes from when its status.json is missing or damaged: the files that
# prove an end (``jobfiles.proven_end``).
PROVEN_BY = ("events.jsonl", "DONE")
ENDED = ("succeeded", "failed", "cancelled")
UNKNOWN = "unknown"


def settle(status: dict[str, Any], record: JobRecord) -> bool:
    """The state to show for a status with a ``problem`` (in place); True when it is proven
    and may be cached. An end proven by events.jsonl or DONE is shown (and cached); a live
    agent's job is running; a vanished job dir keeps its last known state, marked; anything
    else is ``unknown`` (never the cached state, never ``queued``)."""
    why = problem_reason(status)
    if status.get("state") in ENDED and status.get("state_source") in PROVEN_BY:
        if status.get("attempt") is None:
            status["attempt"] = record.attempts
        said = f"; {status['reason']}" if status.get("reason") else ""
        status["reason"] = f"{status['state']} (from {status['state_source']}{said}); {why}"
        return True
    last = {"attempt": record.attempts, "label": record.label, "reason": why}
    if (status.get("problem") or {}).get("kind") == "job_dir_missing":
        status.update(last, state=record.state.value)
    elif status.get("state") == "running" and status.get("agent_alive"):
        status.update(last)
    else:
        status.update(last, state=UNKNOWN, reason=f"unknown: status file missing/corrupt: {why}")
    return False


def ended(status: dict[str, Any]) -> bool:
    """The status says the job has ended (``unknown`` has not)."""
    return status.get("state") in ENDED


def reached_machine(record: JobRecord) -> bool:
    """The cache saw the job on the machine (an agent wrote its state at least once). A
    launch that failed before submitting is cached as failed with no attempt and no label."""
    live = record.state in (JobState.RUNNING, JobState.RETRYING)
    return record.attempts > 0 or live or record.label is not None


def missing_dir(record: JobRecord, job_dir: str) -> dict[str, Any]:
    """The status of a job whose directory is gone from a reachable machine: the last
    known state, marked, never a new one."""
    problem = jobfiles.job_dir_missing(job_dir)
    return {
        "job_id": record.job_id,
        "state": record.state.value,
        "attempt": record.attempts,
        "label": record.label,
        "exists": False,
        "problem": problem.to_json(),
        "reason": f"{problem.detail} (last known state {record.state.value}): {problem.fix}",
    }


def problem_reason(status: dict[str, Any]) -> str | None:
    """One line for a status whose file could not be believed, or None."""
    problem = status.get("problem")
    if not problem:
        return None
    return f"{problem['path']}: {problem['detail']}; {problem['fix']}"


def problem_error(status: dict[str, Any]) -> StateFileError:
    problem = status["problem"]
    return StateFileError(
        f"job {status.get('job_id')}: {problem['path']}: {problem['detail']}",
        path=problem["path"],
        kind=problem["kind"],
        job_id=str(status.get("job_id")),
        fix=problem["fix"],
    )


def manifest_from(raw: bytes | None, path: str, job_id: str) -> dict[str, Any] | None:
    """manifest.json's document (None: not written yet); a cut or garbled one raises
    ``StateFileError`` naming the path and the fix, never a bare JSONDecodeError."""
    read = jobfiles.parse_manifest(raw, path, job_id)
    if read.problem is not None:
        raise problem_error({"job_id": job_id, "problem": read.problem.to_json()})
    return read.doc


def stuck(status: dict[str, Any]) -> bool:
    """Following this job would wait for ever: its agent is gone, its directory vanished, or
    its status file is unreadable with no agent to rewrite it."""
    if status.get("heartbeat_lost"):
        return True
    problem = status.get("problem") or {}
    if problem.get("kind") == "job_dir_missing":
        return True
    return bool(problem) and status.get("agent_alive") is False

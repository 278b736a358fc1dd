"""The agent's patrol: `rgt watch --every 10m --until-ended`, one bounded report per round.

A coding agent runs this as its periodic check instead of a sleep loop of its own: each round
is one patrol (``patrol.patrol``, the one status reader) cut to a compact report whose size
does not grow with the number of jobs or with what a machine writes: at most ``JOB_LINES``
jobs (the unsettled first: running, lost, failed, then the rest), the newest ``EVENTS``
events, every string clipped to ``FIELD_CHARS``, the whole document within ``ROUND_BYTES``
(``rgt.clip``). The patrol ends when every job has ended; a job whose agent is gone for good
(``jobstatus.stuck``) counts as ended, unsuccessfully, since waiting on it would never end.
Stdlib only.
"""

from __future__ import annotations

import re
from typing import Any

from rgt import clip, knowledge
from rgt.agent.jobfiles import TERMINAL
from rgt.errors import UsageError

JOB_LINES = 12  # jobs shown per round; the rest are counted
EVENTS = 5  # newest events per round
FIELD_CHARS = 160  # one string in a round (a reason, a next step)
ROUND_BYTES = 8 * 1024  # one round's JSON document, at most
SCHEMA = "rgt.watch.round/1"
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")
# The order a round lists jobs in: what needs attention before what is settled.
RANK = {"failed": 0, "retrying": 1, "running": 2, "queued": 3, "cancelled": 4, "succeeded": 5}


def parse_every(text: str) -> float:
    """Seconds from ``10m``, ``30s``, ``1h``, ``0.5`` (seconds); a UsageError otherwise."""
    found = DURATION.match(text)
    seconds = float(found.group(1)) * UNITS[found.group(2)] if found else 0.0
    if seconds <= 0:
        raise UsageError(
            f"--every {text!r} is not a duration", fix="e.g. --every 10m, --every 30s, --every 1h"
        )
    return seconds


def ended(job: dict[str, Any]) -> bool:
    from rgt.backends.jobstatus import stuck

    return job.get("state") in TERMINAL or stuck(job)


def outcome(jobs: list[dict[str, Any]]) -> tuple[bool, bool]:
    """(every job has ended, every job succeeded)."""
    done = all(ended(j) for j in jobs)
    return done, done and all(j.get("state") == "succeeded" for j in jobs)


def round_report(report: dict[str, Any], number: int) -> dict[str, Any]:
    """One round of the patrol, bounded (see the module's docstring)."""
    from rgt.watch import compact

    jobs = sorted(report.get("jobs") or [], key=_urgency)
    done, ok = outcome(jobs)
    doc = {
        "schema": SCHEMA,
        "round": number,
        "time": report.get("time"),
        "summary": report.get("summary"),
        "jobs": [_job(j) for j in jobs[:JOB_LINES]],
        "jobs_left_out": max(0, len(jobs) - JOB_LINES),
        "events": [_event(e) for e in compact.events(report.get("events") or [])[-EVENTS:]],
        "unreachable": [m["name"] for m in report.get("machines") or [] if not m.get("reachable")],
        "all_ended": done,
        "ok": ok if done else None,
    }
    return dict(clip.document(doc, ROUND_BYTES, FIELD_CHARS))


def _urgency(job: dict[str, Any]) -> tuple[int, str]:
    """A lost job first, then by state (``RANK``), then by id."""
    lost = bool(job.get("heartbeat_lost") or job.get("problem"))
    return (-1 if lost else RANK.get(str(job.get("state")), 3), str(job["job_id"]))


def _job(row: dict[str, Any]) -> dict[str, Any]:
    from rgt.watch import compact

    view = compact.job(row)
    if ended(row) and row.get("state") not in TERMINAL:
        view["ended"] = "stuck"  # the agent is gone: it will not end by itself
    found = knowledge.link(str(row["label"])) if row.get("label") else None
    if found:
        view["explain"] = found
    return view


def _event(event: dict[str, Any]) -> dict[str, Any]:
    """An event with the catalog entry on its kind, where there is one."""
    found = knowledge.link(str(event.get("kind") or ""))
    return {**event, "explain": found} if found else event


def round_lines(doc: dict[str, Any]) -> list[str]:
    """The human form of a round: a header, one line per job, the newest events."""
    counts = (doc.get("summary") or {}).get("jobs") or {}
    states = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines = [f"round {doc['round']} at {doc.get('time')}: {states or 'no jobs'}"]
    for job in doc["jobs"]:
        lines.append(_clip_line(_job_words(job)))
    if doc["jobs_left_out"]:
        lines.append(f"  ... and {doc['jobs_left_out']} more job(s): rgt status")
    if doc["unreachable"]:
        lines.append(_clip_line(f"  unreachable: {', '.join(doc['unreachable'])}"))
    for event in doc["events"]:
        words = f"  event {event.get('job_id')}: {event.get('kind')} {event.get('next') or ''}"
        words += f" ({event['explain']})" if event.get("explain") else ""
        lines.append(_clip_line(words))
    return lines


def _job_words(job: dict[str, Any]) -> str:
    words = [f"  {job['job_id']}: {job.get('state')}", f"attempt {job.get('attempt')}"]
    words += [f"step {job['step']}"] if job.get("step") is not None else []
    words += [f"label {job['label']}"] if job.get("label") else []
    words += [f"[{', '.join(job['alerts'])}]"] if job.get("alerts") else []
    words += [str(job.get("next") or job.get("reason") or "")]
    words += [f"({job['explain']})"] if job.get("explain") else []
    return " ".join(w for w in words if w)


def _clip_line(line: str) -> str:
    return line if len(line) <= 2 * FIELD_CHARS else line[: 2 * FIELD_CHARS - 1] + "…"

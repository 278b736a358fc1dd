"""The documents the pages and the JSON API share: machines, the jobs table, one job.

Built from the state DB (every job and machine rgt knows) laid over the patrol's last picture
(``UiPatrol``): the machine's word where the patrol has one, the cached state where not.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from functools import cache
from typing import Any

from rgt import clip
from rgt.agent import jobfiles
from rgt.agent.jobfiles import parse_time
from rgt.autostop.view import line as autostop_line
from rgt.models import JobRecord, Machine
from rgt.ui.patrol import UiPatrol
from rgt.watch.patrol import cost

PER_PAGE = 50
MAX_PER_PAGE = 500
LOG_LINE_BYTES = clip.FIELD_BYTES  # a log line the machine wrote (tqdm's \r lines are long)
LOG_BYTES = 64 * 1024  # the newest lines of a log tail that fit
GATE_NAMES = {
    "known": "jobs_known",
    "ended": "jobs_ended",
    "pulled": "artifacts_pulled",
    "verified": "artifacts_verified",
    "approved": "approved",
}
COMMAND_RE = re.compile(r"`([^`]+)`")


def machines(patrol: UiPatrol) -> list[dict[str, Any]]:
    return [machine(m, patrol) for m in patrol.store.machines()]


def machine(m: Machine, patrol: UiPatrol) -> dict[str, Any]:
    row = patrol.machines.get(m.name)
    good = patrol.last_good.get(m.name)
    reachable = bool(row and row.get("reachable")) if m.active else False
    return {
        "name": m.name,
        "platform": m.profile,
        "backend": m.backend,
        "state": "released" if m.released else "up",
        "price_per_hour": m.price_per_hour,
        "cost_so_far": cost(m)["cost_so_far"],
        "hours_up": cost(m)["hours_up"],
        "clocks": clocks(m),
        "readings": readings(good),
        "reachable": reachable if row else None,
        "error": row.get("error") if row else None,
        "unreachable_since": row.get("unreachable_since") if row else None,
        "last_good_at": good["at"] if good else None,
        "gate": gate(patrol.gates.get(m.name), m.name),
        "autostop": autostop_line(m.name, (good or {}).get("row", {}).get("autostop")),
    }


def clocks(m: Machine) -> list[dict[str, Any]]:
    """The profile's danger clocks; a clock that runs once the machine is stopped ends
    ``duration_s`` after rgt released it (``ends_at``), as `rgt status` announces it."""
    released = parse_time(m.released)
    out = []
    for clock in profile_clocks(m.profile):
        row = {k: v for k, v in clock.items() if k != "duration_s"}
        if released and clock["when"] == "stopped" and clock["duration_s"]:
            ends = released + timedelta(seconds=clock["duration_s"])
            row["ends_at"] = ends.strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append(row)
    return out


@cache
def profile_clocks(profile: str) -> tuple[dict[str, Any], ...]:
    """The profile's danger clocks, read once per server (a profile load validates its TOML
    against the schema: tens of ms, too slow for every machine of every page)."""
    from rgt.errors import RgtError
    from rgt.profiles import load_profile

    try:
        found = load_profile(profile)
    except RgtError:
        return ()
    return tuple(
        {
            "name": c.name,
            "when": c.when,
            "ends_at": None,
            "duration_s": c.duration_s,
            "note": f"{c.trigger} [{c.duration}] → {c.consequence}",
        }
        for c in found.clocks
    )


def readings(good: dict[str, Any] | None) -> dict[str, Any] | None:
    if not good:
        return None
    row = good["row"]
    disk = row.get("disk") or {}
    return {
        "at": good["at"],
        "disk_free_bytes": disk.get("bytes_free"),
        "disk_pct": disk.get("bytes_pct"),
        "inode_free": disk.get("inodes_free"),
        "inode_pct": disk.get("inodes_pct"),
        "gpus": row.get("gpus") or [],
        "gpu_error": row.get("gpu_error"),
    }


def gate(verdict: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The gate's checks (``rgt.lifecycle.gate``), each with what is missing and the command
    that fixes it."""
    if verdict is None:
        return None
    checks = []
    for check in verdict.get("checks") or []:
        if check["name"] == "known" and check["ok"]:
            continue  # only shown when a job on the machine is not known here
        missing = [] if check["ok"] else [p.strip() for p in check["detail"].split("; ")]
        checks.append(
            {
                "name": GATE_NAMES.get(check["name"], check["name"]),
                "ok": check["ok"],
                "detail": check["detail"],
                "missing": missing,
                "disclosed": disclosed(check),
                "fix": None if check["ok"] else _fix(check, verdict, name),
            }
        )
    return {"ok": bool(verdict.get("ok")), "checks": checks, "error": verdict.get("error")}


def disclosed(check: dict[str, Any]) -> list[str]:
    """What a passing check satisfies but must not keep silent: ``hash_only`` artifacts (bytes
    match the manifest, the format names code rgt never runs), one line per job."""
    detail = str(check["detail"])
    marker = "; hash_only ("
    if marker not in detail:
        return []
    head, _, jobs = detail[detail.index(marker) + 2 :].partition("): ")
    return [f"{head}): {job.strip()}" for job in re.split(r"; (?=job )", jobs) if job.strip()]


def _fix(check: dict[str, Any], verdict: dict[str, Any], name: str) -> str:
    commands = list(dict.fromkeys(COMMAND_RE.findall(check["detail"])))
    if commands:
        return " ; ".join(commands)
    if check["name"] == "ended":
        running = [j["job"] for j in verdict.get("jobs") or [] if not j.get("ended")]
        return " ; ".join(f"rgt cancel {j}" for j in running) or f"rgt watch {name}"
    return f"rgt down {name} --check"


def job_row(record: JobRecord, patrol: UiPatrol) -> dict[str, Any]:
    view = patrol.jobs.get(record.job_id) or {}
    fetched = patrol.files.get(record.job_id)
    events = list(fetched.events) if fetched and fetched.events else list(view.get("events") or [])
    state = view.get("state") or record.state.value
    label = view.get("label") if view else record.label
    return {
        "id": record.job_id,
        "machine": record.machine,
        "state": state,
        "attempts": view.get("attempt") or record.attempts,
        "step": view.get("step"),
        "progress": {k: view.get(k) for k in ("epoch", "loss") if view.get(k) is not None} or None,
        "label": label if state == "failed" or label else None,
        "remedy": remedy(events, view) if state == "failed" else None,
        "reason": view.get("reason"),
        "reachable": view.get("reachable", None),
        "started": view.get("started") or record.created,
        "ended": view.get("ended") or record.ended,
        "last_event": events[-1] if events else None,
    }


def remedy(events: list[dict[str, Any]], view: dict[str, Any]) -> str | None:
    """What the agent said to do about the failure: the newest event that names a next step."""
    for event in reversed(events):
        if event.get("next"):
            return str(event["next"])
    return view.get("reason")


def jobs_page(
    patrol: UiPatrol,
    page: int = 1,
    per_page: int = PER_PAGE,
    machine_name: str | None = None,
    state: str | None = None,
) -> dict[str, Any]:
    per_page = max(1, min(MAX_PER_PAGE, per_page))
    records = patrol.store.jobs(machine_name)
    records.reverse()  # newest first
    rows = [job_row(r, patrol) for r in records]
    if state:
        rows = [r for r in rows if r["state"] == state]
    pages = max(1, math.ceil(len(rows) / per_page))
    page = max(1, min(page, pages))
    items = rows[(page - 1) * per_page : page * per_page]
    return {
        "items": items,
        "page": page,
        "pages": pages,
        "total": len(rows),
        "per_page": per_page,
        "filters": {"machine": machine_name, "state": state},
    }


def job_detail(record: JobRecord, patrol: UiPatrol) -> dict[str, Any]:
    row = job_row(record, patrol)
    fetched = patrol.files.get(record.job_id)
    view = patrol.jobs.get(record.job_id) or {}
    events = list(fetched.events) if fetched and fetched.events else list(view.get("events") or [])
    row["events"] = list(reversed(events[-20:]))
    row["command"] = list(record.spec.command)
    row["created"] = record.created
    row["exit_code"] = view.get("exit_code")
    row["heartbeat"] = view.get("heartbeat")
    row["alerts"] = view.get("alerts") or []
    row["ended_state"] = row["state"] in jobfiles.TERMINAL
    return row


def log_tail(patrol: UiPatrol, job_id: str, lines: int) -> dict[str, Any]:
    patrol.files.want(job_id)
    fetched = patrol.files.get(job_id)
    lines = max(1, min(2000, lines))
    if fetched is None:
        return {"lines": [], "truncated": False, "attempt": None, "at": None, "pending": True}
    text = fetched.tail.decode("utf-8", "replace").splitlines()
    shown = _newest(text[-lines:])
    cut = fetched.offset > len(fetched.tail) or len(text) > len(shown)
    return {
        "lines": shown,
        "truncated": cut,
        "attempt": fetched.attempt,
        "at": fetched.at,
        "error": fetched.error,
    }


def _newest(lines: list[str]) -> list[str]:
    """The newest lines that fit in ``LOG_BYTES``, each clipped to ``LOG_LINE_BYTES``."""
    kept: list[str] = []
    room = LOG_BYTES
    for line in reversed(lines):
        cut = clip.text(line, LOG_LINE_BYTES)
        room -= clip.size(cut) + 1
        if room < 0:
            break
        kept.append(cut)
    return kept[::-1]

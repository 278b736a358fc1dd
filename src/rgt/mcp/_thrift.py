"""Token-thrifty views of the patrol report for the MCP ``watch`` tool.

``rgt watch --once --json`` over every machine carries each job's full agent reading (about
thirty fields and its last events) and each machine's disk, shared-memory and memory readings:
what a dashboard wants, and ~3 KB per job that a model pays for on every poll. The tool returns
the same document cut to the fields that decide what to do next (same names, same values; empty
fields left out), with ``full=True`` for the whole of it.
"""

from __future__ import annotations

from typing import Any

JOB_KEYS = (
    "job_id", "machine", "state", "attempt", "label", "reason", "step", "loss",
    "heartbeat_age_s", "heartbeat_lost", "problem", "alerts",
)  # fmt: skip
MACHINE_KEYS = (
    "name", "reachable", "error", "unreachable_since", "hours_up", "cost_so_far", "gpu_error",
)  # fmt: skip
EVENT_KEYS = ("time", "job_id", "kind", "severity", "next")
EVENTS = 5  # the newest events kept


def patrol_summary(report: dict[str, Any]) -> dict[str, Any]:
    """The patrol report of many jobs, cut to what an agent acts on."""
    return {
        "schema": report.get("schema"),
        "time": report.get("time"),
        "summary": report.get("summary"),
        "machines": [_machine(m) for m in report.get("machines") or []],
        "jobs": [_pick(j, JOB_KEYS) for j in report.get("jobs") or []],
        "events": [_pick(e, EVENT_KEYS) for e in (report.get("events") or [])[-EVENTS:]],
        "cut": "fields left out; call watch with full=true, or with a job id, for all of them",
    }


def _machine(row: dict[str, Any]) -> dict[str, Any]:
    view = _pick(row, MACHINE_KEYS)
    for tier in ("disk", "shm"):
        reading = row.get(tier) or {}
        pct = [reading.get("bytes_pct"), reading.get("inodes_pct")]
        if any(p is not None for p in pct):
            view[f"{tier}_pct"] = pct  # bytes and inodes used, percent
    if row.get("gpus"):
        view["gpus"] = len(row["gpus"])
    return view


def _pick(row: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: row[k] for k in keys if row.get(k) not in (None, [], {}, "")}

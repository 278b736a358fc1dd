"""The compact `--json` of `rgt status` and `rgt watch` (the default; ``--full`` for all).

An agent polls these documents on a schedule and pays for every byte. The full forms carry
each job's whole agent reading (about thirty fields, its last events) and, per machine, its
disk, shared-memory, memory and GPU readings; for 50 jobs that is ~14 KB (`status`) and
~140 KB (`watch --once`). The compact form keeps, per job, what decides the next step:

    job_id machine state attempt step label liveness waiting reason next alerts

plus ``heartbeat_lost``/``problem`` when they are set (rare: they say what went wrong and the
fix). A field that is null, empty or at its default (``liveness`` "agent", ``waiting`` false,
``known`` true, the reason "attempt N running") is left out, and the CLI prints it without
indentation. Per machine: its name, backend, whether it answers, cost, and
disk/shm use as two percentages. Events: the newest few, five fields each. Same names and
values as the full form: a reader of the full form reads the compact one with ``.get``.
Schemas: ``schemas/status.schema.json`` (``$defs/compact_job``) and ``watch.schema.json``.
"""

from __future__ import annotations

from typing import Any

from rgt.autostop.view import compact as autostop_view

JOB_KEYS = (
    "job_id", "machine", "state", "attempt", "step", "label", "liveness", "waiting", "reason",
    "next", "alerts", "heartbeat_lost", "problem", "known", "error", "nodes",
)  # fmt: skip
ALWAYS = ("job_id", "machine", "state", "attempt")
DEFAULTS: dict[str, Any] = {"liveness": "agent", "waiting": False, "known": True}
MACHINE_KEYS = (
    "name", "backend", "reachable", "error", "unreachable_since", "price_per_hour",
    "cost_so_far", "released", "gpu_error",
)  # fmt: skip
EVENT_KEYS = ("time", "job_id", "kind", "severity", "next")
EVENTS = 5  # the newest events kept
CUT = "compact: --full (MCP: full=true) for every field"


def job(row: dict[str, Any]) -> dict[str, Any]:
    """One job's row cut to what decides the next step."""
    view = {k: row.get(k) for k in ALWAYS}
    lost, problem = row.get("heartbeat_lost") or {}, row.get("problem") or {}
    nxt = row.get("next") or lost.get("next") or problem.get("fix")
    reason = row.get("reason")
    if reason == f"attempt {row.get('attempt')} running":  # the agent's word for "running"
        reason = None
    view.update(_pick({**row, "next": nxt, "reason": reason}, JOB_KEYS[len(ALWAYS) :]))
    return view


def machine(row: dict[str, Any]) -> dict[str, Any]:
    view = _pick(row, MACHINE_KEYS)
    view["reachable"] = row.get("reachable", True)
    for tier in ("disk", "shm"):
        reading = row.get(tier) or {}
        pct = [reading.get("bytes_pct"), reading.get("inodes_pct")]
        if any(p is not None for p in pct):
            view[f"{tier}_pct"] = pct  # bytes and inodes used, percent
    if row.get("gpus"):
        view["gpus"] = len(row["gpus"])
    armed = autostop_view(row.get("autostop"))
    if armed:
        view["autostop"] = armed
    return view


def events(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_pick(e, EVENT_KEYS) for e in found[-EVENTS:]]


def status_report(doc: dict[str, Any]) -> dict[str, Any]:
    """`rgt status --json`, compact."""
    out = dict(doc, cut=CUT)
    out["machines"] = [_pick(m, ("name", "backend", "price_per_hour", "released"))
                       for m in doc.get("machines") or []]  # fmt: skip
    out["jobs"] = [job(j) for j in doc.get("jobs") or []]
    return out


def watch_report(report: dict[str, Any]) -> dict[str, Any]:
    """`rgt watch --once --json` over machines, compact."""
    out = dict(report, cut=CUT)
    out["machines"] = [machine(m) for m in report.get("machines") or []]
    out["jobs"] = [job(j) for j in report.get("jobs") or []]
    out["events"] = events(report.get("events") or [])
    return out


def followed(row: dict[str, Any]) -> dict[str, Any]:
    """`rgt watch JOB --json`: the job, its newest events, no machine block."""
    return dict(job(row), events=events(row.get("events") or []), cut=CUT)


def _pick(row: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {
        k: row[k]
        for k in keys
        if row.get(k) not in (None, [], {}, "") and (k not in DEFAULTS or row[k] != DEFAULTS[k])
    }

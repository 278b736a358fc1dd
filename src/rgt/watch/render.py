"""The human face of a patrol report: one table of machines, one of jobs, the last events.

Printed once by ``rgt watch --once`` (a cron or an agent loop reads it every tick, even when
nothing changed: silence would read as "nobody is watching") and redrawn by the live view.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rgt.agent.jobfiles import parse_time
from rgt.autostop.view import line as autostop_line

STATE_STYLE = {
    "running": "green",
    "succeeded": "bold green",
    "failed": "bold red",
    "retrying": "yellow",
    "cancelled": "dim",
    "queued": "cyan",
}


def _pct(reading: dict[str, Any] | None, key: str) -> str:
    value = (reading or {}).get(key)
    return "-" if value is None else f"{value:.0f}%"


def _gpus(row: dict[str, Any]) -> str:
    if not row["gpus"]:
        return "none" if row.get("gpu_error") else "-"
    cells = []
    for g in row["gpus"]:
        util = "?" if g.get("util_pct") is None else f"{g['util_pct']:.0f}%"
        mem = (
            f"{(g.get('mem_used_mib') or 0) / 1024:.0f}/{(g.get('mem_total_mib') or 0) / 1024:.0f}G"
        )
        slow = " " + ",".join(g["slowdowns"]) if g.get("slowdowns") else ""
        cells.append(f"{g.get('index')}:{util} {mem}{slow}")
    return " ".join(cells)


def _cost(row: dict[str, Any]) -> str:
    if row.get("cost_so_far") is None:
        return "-" if row.get("price_per_hour") is None else "?"
    return f"{row['cost_so_far']:.2f} ({row['price_per_hour']:g}/h × {row['hours_up']:.1f}h)"


def machines_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="machines", title_justify="left")
    for column in ("machine", "status", "GPU util/mem", "disk", "inodes", "RAM", "shm", "cost"):
        table.add_column(column)
    for row in rows:
        status = Text("ok", style="green")
        if not row["reachable"]:
            status = Text(f"unreachable since {row['unreachable_since']}", style="bold yellow")
        elif row.get("error"):
            status = Text(f"agent error: {row['error']}", style="red")
        table.add_row(
            escape(row["name"]),
            status,
            escape(_gpus(row)),
            _pct(row["disk"], "bytes_pct"),
            _pct(row["disk"], "inodes_pct"),
            _pct(row["memory"], "pct"),
            _pct(row["shm"], "bytes_pct"),
            _cost(row),
        )
    return table


def _progress(job: dict[str, Any]) -> str:
    parts = []
    if job.get("epoch") is not None:
        parts.append(f"epoch {job['epoch']}")
    if job.get("step") is not None:
        parts.append(f"step {job['step']}")
    if job.get("loss") is not None:
        loss = job["loss"]
        parts.append(f"loss {loss:.4g}" if isinstance(loss, float) else f"loss {loss}")
    return " ".join(parts) or "-"


def jobs_table(jobs: list[dict[str, Any]]) -> Table:
    table = Table(title="jobs", title_justify="left")
    for column in ("job", "machine", "state", "att", "progress", "heartbeat", "alerts / reason"):
        table.add_column(column)
    for job in jobs:
        state = Text(job["state"], style=STATE_STYLE.get(job["state"], ""))
        beat = job.get("heartbeat_age_s")
        note = ", ".join(job.get("alerts") or []) or job.get("label") or job.get("reason") or ""
        table.add_row(
            escape(job["job_id"]),
            escape(job["machine"]),
            state,
            str(job.get("attempt") or 0),
            escape(_progress(job)),
            "-" if beat is None else f"{beat:.0f}s ago",
            escape(str(note))[:80],
        )
    return table


def events_table(events: list[dict[str, Any]]) -> Table:
    table = Table(title="last events", title_justify="left")
    for column in ("time", "job", "event", "next"):
        table.add_column(column, overflow="fold")
    for e in events:
        when = parse_time(e.get("time"))
        stamp = when.strftime("%m-%d %H:%M:%S") if when else "-"
        kind = Text(e["kind"], style="bold red" if e["kind"] in ALARMS else "")
        table.add_row(stamp, escape(str(e.get("job_id"))), kind, escape(str(e.get("next") or "")))
    return table


ALARMS = frozenset(
    [
        "failed",
        "nan_loss",
        "log_stalled",
        "step_blocked",
        "disk_nearly_full",
        "memory_near_limit",
        "gpu_idle",
        "heartbeat_lost",
        "not_pulled",
        "ranks_hung",
        "loss_spike",
        "preemption_notice",
        "autostop_blocked",
    ]
)


def report_view(report: dict[str, Any]) -> Group:
    s = report["summary"]
    spent = "" if s["cost_so_far"] is None else f", {s['cost_so_far']:.2f} spent"
    head = Text(
        f"patrol {report['time']}: {s['machines']} machine(s), {s['unreachable']} "
        f"unreachable, jobs {s['jobs'] or 'none'}, {s['alerts']} alert(s){spent}"
    )
    armed = [autostop_line(m["name"], m.get("autostop")) for m in report["machines"]]
    return Group(
        head,
        machines_table(report["machines"]),
        *[Text(a) for a in armed if a],
        jobs_table(report["jobs"]),
        events_table(report["events"]),
    )


def job_line(job: dict[str, Any]) -> str:
    """One line per refresh while following a single job."""
    beat = job.get("heartbeat_age_s")
    alerts = f" [{', '.join(job['alerts'])}]" if job.get("alerts") else ""
    return (
        f"{job['job_id']}: {job['state']} attempt {job.get('attempt')} {_progress(job)} "
        f"heartbeat {'-' if beat is None else f'{beat:.0f}s ago'}{alerts} "
        f"{job.get('reason') or ''}"
    ).rstrip()

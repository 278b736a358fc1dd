"""``rgt watch``: one patrol of machines and jobs, with the money beside it.

The patrol (``rgt.watch.patrol``) reads the machines; here its report gains what the terminal
and an agent both need next to it: cost, budgets, kept volumes, danger clocks and orphans
(``rgt.vendors.billing``), and the session clocks of notebook machines. ``once`` is the one
report ``rgt watch --once`` prints and the MCP ``watch`` tool returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rgt.verbs.target import machine_or_job

if TYPE_CHECKING:
    from rgt.state.store import Store
    from rgt.watch.patrol import PatrolOptions


def patrol_options(events: int = 8, gpu: bool = True) -> PatrolOptions:
    """Events per job, whether to ask nvidia-smi, and the clocks from the settings."""
    from rgt.backends.jobstatus import heartbeat_limit_s
    from rgt.config import Settings
    from rgt.watch.patrol import PatrolOptions

    settings = Settings.load()
    return PatrolOptions(
        events=events,
        gpu=gpu,
        heartbeat_lost_s=heartbeat_limit_s(),
        not_pulled_h=float(settings.get("watch.not_pulled_h", default=24)),
    )


def machines_report(store: Store, target: str | None, options: PatrolOptions) -> dict[str, Any]:
    """One patrol of the machines (TARGET: one machine), with billing and session clocks."""
    from rgt.vendors.billing import summary
    from rgt.watch.patrol import patrol

    report = patrol(store, target, options)
    names = [m["name"] for m in report["machines"]] if target else None
    return {**report, "billing": summary(store, names), "sessions": _sessions(store, report)}


def _sessions(store: Store, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook machines' session clocks: time left before the platform takes the VM."""
    from rgt.profiles.session import describe, session_view

    views = []
    for name in (m["name"] for m in report["machines"]):
        view = session_view(store.machine(name).connection)
        if view is not None:
            views.append({"machine": name, **view, "line": describe(view)})
    return views


def job_report(store: Store, job_id: str, options: PatrolOptions) -> dict[str, Any]:
    """One patrol of one job: its row, its events and its machine's report."""
    from rgt.watch.patrol import patrol

    report = patrol(store, job_id, options)
    events = [e for e in report["events"] if e.get("job_id") == job_id]
    return dict(report["jobs"][0], events=events, machine_report=report["machines"][0])


@dataclass(frozen=True)
class Watched:
    """One report of ``rgt watch --once``: a job's (TARGET named a job) or the machines'."""

    report: dict[str, Any]  # every field
    job: bool

    def document(self, full: bool = False) -> dict[str, Any]:
        """What ``--json`` prints: the compact form (``rgt.watch.compact``) unless ``full``."""
        from rgt.watch import compact

        if full:
            return self.report
        return compact.followed(self.report) if self.job else compact.watch_report(self.report)


def once(store: Store, target: str | None, options: PatrolOptions) -> Watched:
    """``rgt watch --once [NAME|JOB]`` and the MCP ``watch`` tool: one patrol, no waiting."""
    target = machine_or_job(store, target)
    job_id = job_of(store, target)
    if job_id is not None:
        return Watched(job_report(store, job_id, options), job=True)
    return Watched(machines_report(store, target, options), job=False)


def job_of(store: Store, target: str | None) -> str | None:
    """The job TARGET names (a job id, resolved), or None: a machine, or everything."""
    from rgt.watch.patrol import select

    return select(store, target)[1] if target else None

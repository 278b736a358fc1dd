"""``rgt status``: machines and jobs from the local cache, with money and autostop.

One document for every front end: the CLI prints it (or its table), the MCP ``status`` tool
returns it. The compact form (``rgt.watch.compact``) is what ``--json`` prints by default and
what an agent reads; the full form keeps every field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rgt.verbs.target import machine_or_job

if TYPE_CHECKING:
    from rgt.state.store import Store


def report(store: Store, target: str | None = None) -> dict[str, Any]:
    """Every field: machines, jobs (TARGET: a machine name, a job id or its prefix), the
    billing summary (no network unless a vendor key is set) and each machine's autostop."""
    from rgt.autostop.view import reports as autostop_reports
    from rgt.jobs.overview import overview
    from rgt.vendors.billing import summary as billing

    data = overview(store, machine_or_job(store, target))
    names = [m["name"] for m in data["machines"]] if target else None
    data["billing"] = billing(store, names)
    data["autostop"] = autostop_reports(store, [m["name"] for m in data["machines"]])
    return data


def shown(data: dict[str, Any], full: bool = False) -> dict[str, Any]:
    """The document ``--json`` prints: the compact form unless ``full``."""
    from rgt.watch import compact

    return data if full else compact.status_report(data)

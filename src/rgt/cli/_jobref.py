"""Job ids on the command line: the full id or a unique prefix, as git takes a short hash.

Every verb that takes a job id declares its argument with ``callback=job_id`` (or resolves a
machine-or-job target with ``rgt.verbs.target.machine_or_job``); both resolve through
``Store.resolve_job``, so an unknown id and an ambiguous prefix read the same everywhere (exit 2,
the candidates listed).
"""

from __future__ import annotations

import click

from rgt.state.store import Store


def job_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Click callback for a JOB argument: ``@click.argument("job_id", callback=job_id)``."""
    return Store.open().resolve_job(value)


def job_ids(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """Click callback for a repeatable JOB option (``--abandon JOB``)."""
    store = Store.open()
    return tuple(store.resolve_job(ref) for ref in value)

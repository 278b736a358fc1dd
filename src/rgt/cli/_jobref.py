"""Job ids on the command line: the full id or a unique prefix, as git takes a short hash.

Every verb that takes a job id declares its argument with ``callback=job_id`` (or resolves a
machine-or-job target with ``machine_or_job``); both resolve through ``Store.resolve_job``, so an
unknown id and an ambiguous prefix read the same everywhere (exit 2, the candidates listed).
"""

from __future__ import annotations

import click

from rgt.errors import UnknownJobError
from rgt.state.store import Store


def job_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Click callback for a JOB argument: ``@click.argument("job_id", callback=job_id)``."""
    return Store.open().resolve_job(value)


def job_ids(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """Click callback for a repeatable JOB option (``--abandon JOB``)."""
    store = Store.open()
    return tuple(store.resolve_job(ref) for ref in value)


def machine_or_job(store: Store, target: str | None) -> str | None:
    """A machine name as given; a job id or unique prefix as the job's full id; anything else
    as given (the verb says it names neither)."""
    if target is None or target in {m.name for m in store.machines()}:
        return target
    try:
        return store.resolve_job(target)
    except UnknownJobError:
        return target

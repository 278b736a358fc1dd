"""A machine-or-job target as a user types it: a machine name, a job id, or a job id's unique
prefix (as git takes a short hash)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rgt.errors import UnknownJobError

if TYPE_CHECKING:
    from rgt.state.store import Store


def machine_or_job(store: Store, target: str | None) -> str | None:
    """A machine name as given; a job id or unique prefix as the job's full id; anything else
    as given (the verb says it names neither)."""
    if target is None or target in {m.name for m in store.machines()}:
        return target
    try:
        return store.resolve_job(target)
    except UnknownJobError:
        return target

"""``rgt profiles``: the documents of the platform profiles (the list, one in full, the facts
last verified too long ago), as ``--json`` prints them and the MCP ``profiles`` tool returns
them."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rgt.profiles import Profile, StaleFact


def summary(p: Profile) -> dict[str, Any]:
    return {
        "name": p.name,
        "title": p.title,
        "kind": p.kind,
        "backend": p.backend,
        "verified": p.verified,
        "origin": p.origin,
        "path": p.path,
        "overrides_bundled": p.overrides_bundled,
    }


def listing(found: list[Profile]) -> dict[str, Any]:
    return {"profiles": [summary(p) for p in found]}


def profile_document(p: Profile) -> dict[str, Any]:
    return {
        **summary(p),
        "durable_dir": p.durable_dir,
        "profile": p.raw,
        "first_contact_notes": p.first_contact_notes(),
        "teardown_notes": p.teardown_notes(),
    }


def stale_document(facts: list[StaleFact], months: int, day: date) -> dict[str, Any]:
    return {"months": months, "today": day.isoformat(), "stale": [fact.to_dict() for fact in facts]}

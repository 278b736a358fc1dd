"""The catalog tool: what ``rgt explain --json`` prints, read from the catalog itself
(``rgt.knowledge``), so an agent reads why a failure happens before it acts (SKILL.md asks it
to)."""

from __future__ import annotations

from typing import Any

from rgt.mcp._call import as_command, document


def explain(topic: str | None = None, list_all: bool = False) -> dict[str, Any]:
    """Why a failure happens and what to do, in order of cost: the entry for a triage label
    (`cuda_oom`), a lint code (`RGT301`), a watch event or a topic (`oom-ladder`,
    `verify-method`): {id, kind, title, sources, body}. `list_all`: every entry's id, kind and
    title. Read it before acting on a triage label."""
    from rgt import knowledge
    from rgt.errors import UsageError

    if list_all:
        with as_command(["explain"], list=True):
            rows = [e.summary() for e in knowledge.entries()]
            return document({"count": len(rows), "entries": rows})
    with as_command(["explain"], [topic] if topic else []):
        if topic is None:
            raise UsageError("a TOPIC, LABEL or CODE is needed", fix="rgt explain --list")
        return document(knowledge.lookup(topic).to_dict())

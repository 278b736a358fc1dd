"""The catalog tool: ``rgt explain`` with ``--json``, so an agent reads why a failure happens
before it acts (SKILL.md asks it to)."""

from __future__ import annotations

from typing import Any

from rgt.mcp._invoke import invoke


def explain(topic: str | None = None, list_all: bool = False) -> dict[str, Any]:
    """Why a failure happens and what to do, in order of cost: the entry for a triage label
    (`cuda_oom`), a lint code (`RGT301`), a watch event or a topic (`oom-ladder`,
    `verify-method`): {id, kind, title, sources, body}. `list_all`: every entry's id, kind and
    title. Read it before acting on a triage label."""
    if list_all:
        return invoke(["explain"], list=True)
    return invoke(["explain"], [topic] if topic else [])

"""Where a verb's chatter goes: the verbs never print and never ask; a front end hands in a
``Tell`` (the CLI: warnings and progress on stderr; MCP: nothing, the document says it all)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _quiet(_message: str) -> None:
    return None


@dataclass(frozen=True)
class Tell:
    """``warn``: gate notes, lint lines (always said); ``info``: progress (a terminal shows it,
    ``--json`` and MCP drop it)."""

    warn: Callable[[str], None] = _quiet
    info: Callable[[str], None] = _quiet


QUIET = Tell()  # a verb run with no one to tell (the MCP tools)

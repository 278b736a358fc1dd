"""What a seasoned practitioner knows, shipped as plain Markdown: `rgt explain`.

Each entry is one file in ``entries/`` (grep-able in the installed package): a front matter
block (``id``, ``kind``, ``title``, ``aliases``, ``sources``) and a Markdown body. Every triage
label and every lint code has one (``kind`` ``label`` / ``lint``, with the sections in
``SECTIONS``); topics (the OOM ladder, numerical stability, the VERIFY method, ...) and watch
events have theirs. Stdlib only: ``rgt explain`` and the links from triage and lint cost a few
file reads, no import of anything heavy.
"""

from __future__ import annotations

from rgt.knowledge.catalog import (
    KINDS,
    SECTIONS,
    Entry,
    EntryError,
    entries,
    entries_dir,
    lookup,
    suggest,
)

__all__ = [
    "KINDS",
    "SECTIONS",
    "Entry",
    "EntryError",
    "entries",
    "entries_dir",
    "explain_command",
    "link",
    "lookup",
    "suggest",
]


def explain_command(key: str) -> str:
    """The command a triage verdict or a lint finding names as its link (``rgt explain X``)."""
    return f"rgt explain {key}"


def link(key: str) -> str | None:
    """``rgt explain ID`` when the catalog has an entry for ``key`` (a label, a code, an
    event kind), else None: a link is only shown where it leads somewhere."""
    try:
        return explain_command(lookup(key).id)
    except EntryError:
        raise
    except ValueError:  # UsageError: no such entry
        return None

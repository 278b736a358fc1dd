"""The catalog's loader: one Markdown file per entry, a small front matter block on top.

The front matter is a deliberately tiny subset of YAML, read without a YAML library::

    ---
    id: cuda_oom
    kind: label
    title: CUDA out of memory
    aliases: oom, out-of-memory
    sources:
      - https://pytorch.org/docs/stable/notes/cuda.html
    ---

``key: value`` lines, ``aliases`` a comma-separated list, ``sources`` a list of ``- item``
lines. Anything else in the block is an error naming the file and line: a catalog that parses
"mostly" would hide a broken entry until someone needs it.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt.errors import UsageError

KINDS = ("label", "lint", "topic", "event")
# The sections every label and lint entry carries, in this order (tests/knowledge checks).
SECTIONS = (
    "## Symptom",
    "## Root causes",
    "## How to confirm",
    "## Fixes, in order of cost",
    "## Never",
)
FENCE = "---"


class EntryError(ValueError):
    """A catalog file that does not parse: a packaging bug, not a user error."""


@dataclass(frozen=True)
class Entry:
    id: str
    kind: str
    title: str
    aliases: tuple[str, ...]
    sources: tuple[str, ...]
    body: str
    path: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "aliases": list(self.aliases),
            "sources": list(self.sources),
            "body": self.body,
        }

    def summary(self) -> dict[str, str]:
        return {"id": self.id, "kind": self.kind, "title": self.title}


def entries_dir() -> Path:
    return Path(__file__).with_name("entries")


@functools.lru_cache(maxsize=1)
def entries() -> tuple[Entry, ...]:
    """Every entry, sorted by kind (labels, lint codes, topics, events) then id."""
    found = [parse(p.read_text(encoding="utf-8"), str(p)) for p in entries_dir().glob("*.md")]
    return tuple(sorted(found, key=lambda e: (KINDS.index(e.kind), e.id)))


def parse(text: str, path: str = "<entry>") -> Entry:
    lines = text.splitlines()
    if not lines or lines[0].strip() != FENCE or FENCE not in (s.strip() for s in lines[1:]):
        raise EntryError(f"{path}: no front matter block (--- ... ---) at the top")
    end = 1 + [s.strip() for s in lines[1:]].index(FENCE)
    meta = _front_matter(lines[1:end], path)
    missing = [k for k in ("id", "kind", "title") if not meta.get(k)]
    if missing:
        raise EntryError(f"{path}: front matter lacks {', '.join(missing)}")
    if meta["kind"] not in KINDS:
        raise EntryError(f"{path}: kind {meta['kind']!r} is not one of {', '.join(KINDS)}")
    return Entry(
        id=str(meta["id"]),
        kind=str(meta["kind"]),
        title=str(meta["title"]),
        aliases=tuple(a.strip() for a in str(meta.get("aliases", "")).split(",") if a.strip()),
        sources=tuple(meta.get("sources") or ()),
        body="\n".join(lines[end + 1 :]).strip() + "\n",
        path=path,
    )


def _front_matter(lines: list[str], path: str) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for number, raw in enumerate(lines, start=2):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.lstrip().startswith("- ") and isinstance(meta.get("sources"), list):
            meta["sources"].append(line.lstrip()[2:].strip())
        elif ":" in line and not line.startswith(" "):
            key, _, value = line.partition(":")
            meta[key.strip()] = [] if key.strip() == "sources" else value.strip()
        else:
            raise EntryError(f"{path}:{number}: cannot read {line!r} in the front matter")
    return meta


def _index() -> dict[str, Entry]:
    index: dict[str, Entry] = {}
    for entry in entries():
        for key in (entry.id, *entry.aliases):
            index.setdefault(key.lower(), entry)
    return index


def lookup(key: str) -> Entry:
    """The entry for an id, an alias or a code (any case); else a UsageError naming the closest."""
    found = _index().get(key.strip().lower())
    if found is not None:
        return found
    close = suggest(key)
    fix = f"try: {', '.join(f'rgt explain {c}' for c in close)}" if close else None
    error = UsageError(f"no entry for {key!r}", fix=fix or "rgt explain --list shows every entry")
    error.suggestions = close  # type: ignore[attr-defined]  # carried into --json by to_dict
    raise error


def suggest(key: str, n: int = 3) -> list[str]:
    """The closest entry ids to ``key`` (aliases count, the id is what is named)."""
    index = _index()
    close = difflib.get_close_matches(key.strip().lower(), list(index), n=n * 2, cutoff=0.5)
    return list(dict.fromkeys(index[c].id for c in close))[:n]

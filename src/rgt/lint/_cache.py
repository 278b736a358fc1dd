"""Per-file results of `rgt lint`, kept under ``$RGT_HOME/cache/lint/`` so an unchanged tree
is not parsed again (``rgt lint --no-cache`` skips it, as ``ruff --no-cache`` does).

A file's result depends on its text, its path (notebook or not), the codes wanted, the rules'
own code, and the few project-wide identifiers the rules ask about (``QUERIED``): the key hashes
all of them, so any change to one is a miss. Entries are JSON, written atomically; a damaged
or unreadable entry is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from rgt.lint._model import FileNote, Finding, Rule
from rgt.lint._source import Text

Outcome = tuple[list[Finding], list[FileNote]]


def folder() -> Path:
    return Path(os.environ.get("RGT_HOME") or Path.home() / ".rgt") / "cache" / "lint"


@lru_cache(maxsize=1)
def rules_digest() -> str:
    """The lint package's own source: a changed rule invalidates every entry."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(text: Text, context: str) -> str:
    digest = hashlib.sha256(context.encode())
    digest.update(b"\0" + text.path.encode("utf-8", "replace") + b"\0")
    digest.update(text.text.encode("utf-8", "replace"))
    digest.update(repr(text.cells).encode())
    return digest.hexdigest()


def context(words: frozenset[str], wanted: frozenset[str], queried: frozenset[str]) -> str:
    return "|".join([rules_digest(), ",".join(sorted(wanted)), ",".join(sorted(words & queried))])


def load(text: Text, entry: str, rules: dict[str, Rule]) -> Outcome | None:
    try:
        data = json.loads((folder() / entry[:2] / f"{entry}.json").read_text("utf-8"))
        findings = [
            Finding(text.path, f["line"], f["col"], rules[f["code"]], f["detail"], f["cell"])
            for f in data["findings"]
        ]
        notes = [FileNote(text.path, reason) for reason in data["notes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return findings, notes


def store(entry: str, outcome: Outcome) -> None:
    findings, notes = outcome
    data: dict[str, Any] = {
        "findings": [
            {"line": f.line, "col": f.col, "code": f.code, "detail": f.detail, "cell": f.cell}
            for f in findings
        ],
        "notes": [n.reason for n in notes],
    }
    target = folder() / entry[:2] / f"{entry}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), "utf-8")
        os.replace(tmp, target)
    except OSError:
        pass  # a read-only home only costs speed

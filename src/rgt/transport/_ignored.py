"""The files ``.gitignore`` leaves out of a code snapshot, and the ones ``.rgtignore`` takes back.

A code snapshot holds what git would track (``rgt.transport.snapshot``), so a project's own
``.gitignore`` silently decides what reaches the machine: nanoGPT ignores ``*.bin`` and
``*.pkl``, which are its data files. ``rgt push`` names what was left out this way (count,
bytes, the first few paths), and a ``!PATTERN`` line in ``.rgtignore`` takes such files back
into the snapshot (``!*.bin``, ``!data/shakespeare_char/``); files rgt always skips (virtual
envs, caches, ``.git``) stay out. Big data goes with ``rgt push NAME PATHS`` instead.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

RGTIGNORE = ".rgtignore"
MAX_LISTED = 100_000  # an ignored tree bigger than this is counted only this far
SHOWN = 5


@dataclass(frozen=True)
class Ignored:
    """What ``.gitignore`` kept out of a snapshot."""

    paths: tuple[str, ...]
    bytes: int

    def to_json(self) -> dict[str, object]:
        return {
            "count": len(self.paths),
            "bytes": self.bytes,
            "first": list(self.paths[:SHOWN]),
            "include": HOW_TO_INCLUDE,
        }


HOW_TO_INCLUDE = (
    "add a `!PATTERN` line to .rgtignore (e.g. `!*.bin` or `!data/`) to push such files with "
    "the code, or push data separately with `rgt push NAME PATHS`"
)


def gitignored(root: Path, taken: set[str]) -> Ignored:
    """Files under ``root`` that ``.gitignore`` (or git's other excludes) kept out of the
    snapshot whose files are ``taken``; rgt's own always-skipped names are not listed."""
    rels = _git_ignored(root)
    if rels is None:
        rels = _walk_ignored(root)
    left = sorted(r for r in set(rels) - taken if not _always_skipped(r))
    return Ignored(tuple(left), sum(_size(root / r) for r in left))


def reincluded(root: Path) -> list[str]:
    """Files ``.gitignore`` left out that a ``!PATTERN`` line of ``.rgtignore`` takes back."""
    wanted = [p[1:] for p in _lines(root / RGTIGNORE) if p.startswith("!") and len(p) > 1]
    if not wanted:
        return []
    rels = _git_ignored(root)
    if rels is None:
        rels = _walk_ignored(root)
    return [r for r in rels if not _always_skipped(r) and name_matches(r, wanted)]


def _git_ignored(root: Path) -> list[str] | None:
    argv = ["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard"]
    try:
        proc = subprocess.run(argv, cwd=root, capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    rels = [r for r in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if r]
    return [r for r in rels[:MAX_LISTED] if (root / r).is_file()]


def _walk_ignored(root: Path) -> list[str]:
    """Outside a git repository: files that ``.gitignore``'s name patterns match."""
    patterns = [p for p in _lines(root / ".gitignore") if not p.startswith("!")]
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        dirnames[:] = sorted(d for d in dirnames if not _always_skipped(prefix + d))
        for name in sorted(filenames):
            rel = prefix + name
            if name_matches(rel, patterns) and os.path.isfile(os.path.join(dirpath, name)):
                found.append(rel)
        if len(found) >= MAX_LISTED:
            break
    return found[:MAX_LISTED]


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    return [ln.strip().rstrip("/") for ln in text.splitlines() if ln.strip() and ln[0] != "#"]


def name_matches(rel: str, patterns: list[str]) -> bool:
    """The name-pattern rule of ``rgt.transport.snapshot``: a pattern with a slash is anchored at
    the root (and covers a folder's contents), one without matches any path component."""
    parts = rel.split("/")
    for pattern in patterns:
        anchored = pattern.lstrip("/")
        if "/" in anchored:
            if fnmatch.fnmatch(rel, anchored) or rel.startswith(anchored + "/"):
                return True
        elif any(fnmatch.fnmatch(part, anchored) for part in parts):
            return True
    return False


def _always_skipped(rel: str) -> bool:
    from rgt.transport.snapshot import ALWAYS_SKIP

    return name_matches(rel, list(ALWAYS_SKIP))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

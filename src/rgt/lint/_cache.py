"""Per-file results of `rgt lint`, kept under ``$RGT_HOME/cache/lint/`` so an unchanged tree
is not parsed again (``rgt lint --no-cache`` skips it, as ``ruff --no-cache`` does).

A file's result depends on its text, its path (notebook or not), the codes wanted, the rules'
own code, and the few identifiers the rules ask about of the code around it (``QUERIED``, as
seen from the file): the key hashes all of them, so any change to one is a miss. Entries are
JSON, one file per folder of linted files (``Packs``), written atomically; a damaged or
unreadable one is a miss, never an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Collection
from functools import lru_cache
from pathlib import Path
from typing import Any

from rgt.lint._model import FileNote, Finding, Rule, detail_of, lint_finding
from rgt.lint._source import Text

try:  # built in; ``import hashlib`` loads OpenSSL first (3-5 ms of every cached run's start)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

Summary = dict[str, Any] | None  # what the module tells the others (``_cross``)
Outcome = tuple[list[Finding], list[FileNote], Summary] | tuple[list[Finding], list[FileNote]]
SWEEP_EVERY_S = 86_400  # how often packs of folders that are gone are looked for


def folder() -> Path:
    return Path(os.environ.get("RGT_HOME") or Path.home() / ".rgt") / "cache" / "lint"


@lru_cache(maxsize=1)
def rules_digest() -> str:
    """The lint package's own source: a changed rule invalidates every entry."""
    digest = blake2b(digest_size=32)
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(text: Text, context: str) -> str:
    digest = blake2b(context.encode(), digest_size=32)
    digest.update(b"\0" + text.path.encode("utf-8", "replace") + b"\0")
    digest.update(text.text.encode("utf-8", "replace"))
    digest.update(repr(text.cells).encode())
    return digest.hexdigest()


def context(words: frozenset[str], wanted: frozenset[str], queried: frozenset[str]) -> str:
    return "|".join([rules_digest(), ",".join(sorted(wanted)), ",".join(sorted(words & queried))])


class Packs:
    """The entries of one run, one JSON file ("pack") per folder of linted files: a new file
    costs ~0.2 ms on an ext4 disk, so a repository's first run writes one per folder, not
    one per file. ``load`` reads a folder's pack once; ``store`` keeps an entry in memory;
    ``save`` writes each folder that got one (merged over what is there, atomically, without
    the entries of files gone from the folder) and then, once a day, ``sweep``s. A damaged or
    unreadable pack is a miss.
    """

    def __init__(self) -> None:
        self._packs: dict[str, dict[str, Any]] = {}  # folder's file → its entries by name
        self._changed: dict[str, set[str]] = {}  # folder's file → names stored by this run
        self._folders: dict[str, str] = {}  # folder's file → the folder (absolute)
        self._paths: dict[str, str] = {}  # a folder as named → its folder's file

    def read(self, texts: list[Text]) -> None:
        """Read the packs of these texts' folders now (``load`` would, each when first
        needed)."""
        for text in texts:
            self._pack(text)

    def load(
        self, text: Text, entry: str, rules: dict[str, Rule]
    ) -> tuple[list[Finding], list[FileNote], Summary] | None:
        got = self._pack(text).get(os.path.basename(text.path))
        try:
            if not isinstance(got, dict) or got.get("key") != entry:
                return None
            findings = [
                lint_finding(
                    text.path, f["line"], f["col"], rules[f["code"]], f["detail"], f["cell"]
                )
                for f in got["findings"]
            ]
            notes = [FileNote(text.path, reason) for reason in got["notes"]]
            summary = got.get("summary")
        except (ValueError, KeyError, TypeError):
            return None
        return findings, notes, summary if isinstance(summary, dict) else None

    def store(self, text: Text, entry: str, outcome: Outcome) -> None:
        findings, notes = outcome[0], outcome[1]
        summary = outcome[2] if len(outcome) > 2 else None  # type: ignore[misc]
        self._pack(text)[os.path.basename(text.path)] = {
            "summary": summary,
            "key": entry,
            "findings": [
                {
                    "line": f.line,
                    "col": f.col,
                    "code": f.code,
                    "detail": detail_of(f),
                    "cell": f.cell,
                }
                for f in findings
            ],
            "notes": [n.reason for n in notes],
        }
        path = self._pack_path(text)
        self._changed.setdefault(path, set()).add(os.path.basename(text.path))
        self._folders[path] = os.path.dirname(os.path.abspath(text.path))

    def save(self) -> None:
        """Write each changed folder's file, over what another run may have written since
        this one read it (its other entries kept: two runs linting one folder both count)."""
        for path, names in sorted(self._changed.items()):
            where = self._folders[path]
            files = {**_read_pack(path), **{n: self._packs[path][n] for n in names}}
            try:
                present = set(os.listdir(where))
            except OSError:
                present = set(files)
            files = {name: entry for name, entry in files.items() if name in present}
            _write(Path(path), {"folder": where, "files": files})
        if self._changed:
            sweep(written=self._changed.keys())
        self._changed.clear()

    def _pack(self, text: Text) -> dict[str, Any]:
        path = self._pack_path(text)
        if path not in self._packs:
            self._packs[path] = _read_pack(path)
        return self._packs[path]

    def _pack_path(self, text: Text) -> str:
        """``_pack_path``, worked out once per folder as named (files share folders)."""
        where = os.path.dirname(text.path)
        path = self._paths.get(where)
        if path is None:
            path = self._paths[where] = _pack_path(text)
        return path


def sweep(now: float | None = None, written: Collection[str] = ()) -> int:
    """At most once a day (``SWEEP_EVERY_S``): remove the packs of folders that are gone (a
    deleted or moved repository), and whatever else is in the cache folder (what an older
    rgt left: one file per linted file, or packs that do not name their folder). ``written``:
    packs this run has just written (kept, not read again). Returns how many files were
    removed. Only this cache's own files are touched."""
    root = folder()
    marker = root / "swept"
    now = time.time() if now is None else now
    try:
        if now - marker.stat().st_mtime < SWEEP_EVERY_S:
            return 0
    except OSError:
        pass
    removed = 0
    found = sorted(root.rglob("*")) if root.is_dir() else []
    for path in found:
        if path == marker or str(path) in written or path.is_dir() or _kept(root, path):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed += 1
    for path in reversed(found):  # folders an older layout made, now empty (deepest first)
        if path.is_dir() and path != root / "folders":
            with contextlib.suppress(OSError):
                path.rmdir()  # refused unless empty
    _write(marker, {"swept": now})
    with contextlib.suppress(OSError):
        os.utime(marker, (now, now))
    return removed


def _kept(root: Path, path: Path) -> bool:
    """A pack under ``folders/`` whose folder is still there, named as this rgt names it (an
    older rgt's name for the same folder is never read again)."""
    if path.parent != root / "folders" or path.suffix != ".json":
        return False
    try:
        where = json.loads(path.read_text("utf-8")).get("folder")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(where, str) and os.path.isdir(where) and _pack_file(root, where) == path


def _write(target: Path, data: dict[str, Any]) -> None:
    """``data`` as JSON at ``target``, atomically; a read-only or full home only costs speed."""
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), "utf-8")
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _read_pack(path: str) -> dict[str, Any]:
    """A folder's entries by file name; none when the file is missing or damaged."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
        files = data["files"] if isinstance(data, dict) else None
    except (OSError, ValueError, KeyError):
        files = None
    return files if isinstance(files, dict) else {}


def _pack_path(text: Text) -> str:
    return str(_pack_file(folder(), os.path.dirname(os.path.abspath(text.path))))


def _pack_file(root: Path, where: str) -> Path:
    """The pack of the folder ``where`` (absolute) in the cache folder ``root``."""
    name = blake2b(where.encode("utf-8", "replace"), digest_size=32).hexdigest()
    return root / "folders" / f"{name}.json"  # one folder: a new folder costs ~0.2 ms to make

"""Writes to the state DB that fail say why, where and what to do: never a raw sqlite3 error.

A full ``$RGT_HOME`` disk, an I/O error, a read-only mount or another rgt holding the lock past
the busy timeout each become a :class:`StateWriteError` that names the state DB, the mount it
lives on and the fix. Every write is one transaction (``write_transaction``): a failure rolls it
back, so nothing is half-written and re-running the command is always safe.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from rgt.errors import StateWriteError

RERUN = "re-run the command"

# SQLite's primary result codes (extended codes keep them in the low byte).
_CODES = {13: "disk_full", 10: "io_error", 8: "readonly", 5: "locked", 6: "locked"}
_CODES.update({11: "corrupt", 26: "corrupt", 14: "cannot_open"})
# Python before 3.11 gives only the message.
_WORDS = (
    ("database or disk is full", "disk_full"),
    ("disk i/o error", "io_error"),
    ("readonly database", "readonly"),
    ("database is locked", "locked"),
    ("database table is locked", "locked"),
    ("malformed", "corrupt"),
    ("not a database", "corrupt"),
    ("unable to open", "cannot_open"),
)


def pull_rerun(job_id: str, dest: str, *, verified: bool) -> str:
    """What to do when a pull's files landed but its record could not be stored."""
    again = f"re-run `rgt pull {job_id} --to {shlex.quote(dest)}`"
    if verified:
        return (
            f"{again}: the files are already there and verified, so it copies nothing and "
            "records the pull"
        )
    return f"{again}: it keeps the files already there, checks them again and records the verdict"


def reason_of(exc: sqlite3.Error) -> str | None:
    """disk_full, io_error, readonly, locked, corrupt, cannot_open; None for anything else
    (a constraint or a programming error is a bug, not the disk's fault)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _CODES:
        return _CODES[code & 0xFF]
    text = str(exc).lower()
    return next((reason for words, reason in _WORDS if words in text), None)


def mount_of(path: Path) -> Path:
    """The mount point the file at ``path`` lives on (its nearest existing ancestor's)."""
    here = Path(os.path.abspath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    while not os.path.ismount(here):
        here = here.parent
    return here


def _read_only(mount: Path) -> bool:
    try:
        return bool(os.statvfs(mount).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _fix(reason: str, db: Path, mount: Path, then: str) -> str:
    home = db.parent
    fixes = {
        "disk_full": (
            f"free space on {mount} (`df -h {shlex.quote(str(mount))}`; $RGT_HOME is {home}), "
            f"then {then}"
        ),
        "io_error": f"check the disk under {mount} (`dmesg`) and free space there, then {then}",
        "readonly": (
            f"make {home} writable (is {mount} mounted read-only? do you own {db} and its "
            f"-wal/-shm files?), then {then}"
        ),
        "locked": f"let the other rgt command using {db} finish (or stop it), then {then}",
        "corrupt": (
            f"restore {db} from a backup; or move it aside (`mv {db} {db}.bad`) and register "
            "your machines again with `rgt up`"
        ),
        "cannot_open": (
            f"check that {home} exists, is yours and writable (rgt keeps state.db-wal and "
            f"state.db-shm beside it), then {then}"
        ),
    }
    return fixes[reason]


def _what(reason: str, mount: Path) -> str:
    return {
        "disk_full": f"the disk under {mount} is full",
        "io_error": f"an I/O error on {mount}",
        "readonly": f"it or its mount {mount} is read-only",
        "locked": "another rgt process held it past the busy timeout",
        "corrupt": "it is damaged",
        "cannot_open": "it cannot be opened",
    }[reason]


def state_write_error(
    db: Path, exc: sqlite3.Error, doing: str, then: str = RERUN
) -> StateWriteError | None:
    """The typed error for ``exc`` while ``doing`` something to ``db``; None if it is not
    one of the disk's or lock's failures."""
    reason = reason_of(exc)
    if reason is None:
        return None
    mount = mount_of(db)
    if reason in ("cannot_open", "io_error") and _read_only(mount):
        reason = "readonly"  # SQLite cannot create the -wal/-shm files beside it
    return StateWriteError(
        f"state DB {db}: could not {doing}: {_what(reason, mount)} ({exc}); nothing was written",
        path=str(db),
        mount=str(mount),
        reason=reason,
        fix=_fix(reason, db, mount, then),
    )


@contextmanager
def write_transaction(
    conn: sqlite3.Connection, db: Path, doing: str, then: str = RERUN
) -> Iterator[sqlite3.Connection]:
    """One write transaction (BEGIN IMMEDIATE takes the write lock up front), rolled back on
    any failure; sqlite3's disk and lock errors come out as :class:`StateWriteError`."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
    except sqlite3.Error as exc:
        typed = state_write_error(db, exc, doing, then)
        if typed is None:
            raise
        raise typed from exc


def _rollback(conn: sqlite3.Connection) -> None:
    """SQLite may already have rolled back (a full disk at COMMIT does): then nothing to do."""
    if conn.in_transaction:  # if ROLLBACK fails too, the journal keeps the DB consistent
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")

"""The state DB as a file: refused when it is not one, created so that it always is.

``sqlite3.connect`` happily turns a zero-byte file, or a path whose file was truncated to
nothing, into a brand-new empty database: every machine that still bills, every pull and
approval would be forgotten without a word. So an existing file must start with SQLite's
header, its fixed fields intact, or rgt stops with the path and the fix; and a new database
is created under a temporary name and renamed into place, so a crash during creation never
leaves such a file behind.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from rgt.errors import StateError
from rgt.state._dbwrite import state_write_error

SQLITE_HEADER = b"SQLite format 3\x00"
HEADER_BYTES = 100


def header_problem(header: bytes) -> str | None:
    """What is wrong with the first 100 bytes of a database file, or None. Only fields whose
    values SQLite's file format fixes are checked (https://sqlite.org/fileformat.html §1.3):
    SQLite itself ignores some of them, and would read a garbled file as a valid one."""
    if not header:
        return "is empty (0 bytes)"
    if not header.startswith(SQLITE_HEADER):
        return "is not an SQLite database"
    if len(header) < HEADER_BYTES:
        return f"is cut short ({len(header)} bytes, less than SQLite's {HEADER_BYTES}-byte header)"
    bad = _garbled_fields(header)
    return f"has a garbled SQLite header ({', '.join(bad)})" if bad else None


def _garbled_fields(h: bytes) -> list[str]:
    page = int.from_bytes(h[16:18], "big")
    page = 65536 if page == 1 else page
    checks = {
        f"page size {page}": 512 <= page <= 65536 and page & (page - 1) == 0,
        f"format versions {h[18]}/{h[19]}": h[18] in (1, 2) and h[19] in (1, 2),
        f"payload fractions {h[21]}/{h[22]}/{h[23]}": h[21:24] == bytes((64, 32, 32)),
        "schema format": int.from_bytes(h[44:48], "big") <= 4,
        "text encoding": int.from_bytes(h[56:60], "big") <= 3,
        "reserved bytes 72-91 not zero": not any(h[72:92]),
    }
    return [name for name, ok in checks.items() if not ok]


def check_database_file(path: Path) -> None:
    """An existing state DB that is empty, not SQLite or has a garbled header is refused,
    never recreated over or read as another database:
    it holds the record of what was pulled and approved, and an empty one would forget every
    machine that still bills."""
    try:
        with path.open("rb") as handle:
            header = handle.read(HEADER_BYTES)
    except OSError as exc:
        raise StateError(
            f"cannot read the state DB {path}: {exc.strerror}",
            fix="check the permissions of $RGT_HOME",
        ) from exc
    what = header_problem(header)
    if what is None:
        return
    raise StateError(
        f"the state DB {path} {what}; rgt will not recreate it over your records",
        fix=(
            f"restore {path} from a backup; or move it aside (`mv {path} {path}.bad`) and "
            "register your machines again with `rgt up` (rgt then creates an empty one)"
        ),
    )


def create_database_file(path: Path, migrate: Callable[[sqlite3.Connection], None]) -> None:
    """A new state DB is built under a temporary name and renamed into place, so a crash
    while creating it never leaves an empty file that would then be refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            migrate(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:  # a full or read-only $RGT_HOME: said so, with the fix
        tmp.unlink(missing_ok=True)
        typed = state_write_error(path, exc, "create it")
        if typed is None:
            raise
        raise typed from exc
    try:
        os.link(tmp, path)  # never over a database another rgt created meanwhile
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)

"""The state DB as a file: refused when it is not one, created so that it always is.

``sqlite3.connect`` happily turns a zero-byte file, or a path whose file was truncated to
nothing, into a brand-new empty database: every machine that still bills, every pull and
approval would be forgotten without a word. So an existing file must start with SQLite's
header or rgt stops with the path and the fix; and a new database is created under a temporary
name and renamed into place, so a crash during creation never leaves such a file behind.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from rgt.errors import StateError

SQLITE_HEADER = b"SQLite format 3\x00"


def check_database_file(path: Path) -> None:
    """An existing state DB that is empty or not SQLite is refused, never recreated over:
    it holds the record of what was pulled and approved, and an empty one would forget every
    machine that still bills."""
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StateError(
            f"cannot read the state DB {path}: {exc.strerror}",
            fix="check the permissions of $RGT_HOME",
        ) from exc
    if header == SQLITE_HEADER:
        return
    what = "is empty (0 bytes)" if not header else "is not an SQLite database"
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
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        migrate(conn)
    finally:
        conn.close()
    try:
        os.link(tmp, path)  # never over a database another rgt created meanwhile
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)

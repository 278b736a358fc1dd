"""The state DB under faults: a garbled header is refused; a full, read-only or locked
$RGT_HOME fails a write with StateWriteError (the mount and the fix), all or nothing."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from rgt.errors import StateWriteError
from rgt.models import JobSpec, Machine
from rgt.state.store import Store, utcnow
from tests.watch.test_derived_events import rgt

Mount = Callable[[str, int], Path]


def _store(path: Path) -> Store:
    store = Store(path)
    store.add_machine(
        Machine(
            name="box",
            backend="local",
            profile="local",
            connection={},
            durable_root="/tmp/d",
            registered=utcnow(),
        )
    )
    store.add_job(JobSpec(job_id="box-1", machine="box", command=("true",)))
    return store


def _checkpointed(path: Path) -> None:
    """Everything in the main file (no -wal), as a backup copy of state.db alone would be."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


@pytest.mark.parametrize(("offset", "what"), [(72, "reserved bytes"), (21, "payload")])
def test_garbled_header_is_refused_never_read(offset: int, what: str) -> None:
    """Byte 72 (reserved, must be zero) SQLite ignores: it would read the file as if intact;
    byte 21 it refuses with a bare "file is not a database"."""
    db = Path(os.environ["RGT_HOME"]) / "state.db"
    _store(db)
    _checkpointed(db)
    data = bytearray(db.read_bytes())
    data[offset] ^= 0xFF
    db.write_bytes(bytes(data))
    for side in ("state.db-wal", "state.db-shm"):
        (db.parent / side).unlink(missing_ok=True)
    if offset == 72:  # why rgt checks the header itself
        assert sqlite3.connect(db).execute("SELECT count(*) FROM jobs").fetchone() == (1,)
    proc = rgt("status", "--json")
    assert proc.returncode == 1, proc.stdout
    error = json.loads(proc.stdout)
    assert error["error"] == "StateError" and str(db) in error["message"], error
    assert "garbled SQLite header" in error["message"] and what in error["message"], error
    assert "mv" in error["fix"] and "backup" in error["fix"], error
    assert db.read_bytes() == bytes(data)  # never recreated over


def test_full_rgt_home_fails_the_pull_record_cleanly(small_tmpfs: Mount) -> None:
    point = small_tmpfs("1m", 1000)
    store = _store(point / "home" / "state.db")
    filler = os.open(point / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(filler, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(filler)
    report = {"ok": True, "files": [{"path": f"f{i}", "detail": "x" * 200} for i in range(2000)]}
    with pytest.raises(StateWriteError) as err:
        store.record_pull("box-1", "/data/my run", {}, "0" * 64, True, report)
    e = err.value
    assert e.reason == "disk_full" and e.mount == str(point), e.to_dict()
    assert str(point / "home" / "state.db") in e.message and "nothing was written" in e.message
    assert f"free space on {point}" in (e.fix or ""), e.fix
    assert "re-run `rgt pull box-1 --to '/data/my run'`" in (e.fix or ""), e.fix
    assert "already there and verified" in (e.fix or ""), e.fix
    (point / "filler").unlink()
    assert store.last_pull("box-1") is None  # nothing half-written
    store.record_pull("box-1", "/data/my run", {}, "0" * 64, True, report)  # the same store
    assert Store(point / "home" / "state.db").last_pull("box-1") is not None


def test_read_only_rgt_home_is_named(small_tmpfs: Mount) -> None:
    point = small_tmpfs("8m", 1000)
    db = point / "home" / "state.db"
    _store(db)._conn().close()  # no file open for writing: else the remount is refused
    _checkpointed(db)
    subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)
    try:
        with pytest.raises(StateWriteError) as err:
            Store(db).add_machine(
                Machine(
                    name="b2", backend="local", profile="local", connection={}, durable_root="/"
                )
            )
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(point)], check=True)
    assert err.value.reason == "readonly", err.value.to_dict()
    assert f"is {point} mounted read-only?" in (err.value.fix or ""), err.value.fix
    assert err.value.mount == str(point) and str(db) in err.value.message


def test_lock_held_too_long_is_named_and_the_store_recovers() -> None:
    db = Path(os.environ["RGT_HOME"]) / "state.db"
    store = _store(db)
    store._conn().execute("PRAGMA busy_timeout=200")  # not 30 s in a test
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StateWriteError) as err:
            store.update_job("box-1", state=store.job("box-1").state, attempts=3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert err.value.reason == "locked" and "finish" in (err.value.fix or ""), err.value.fix
    store.update_job("box-1", state=store.job("box-1").state, attempts=4)
    assert store.job("box-1").attempts == 4

"""The local state DB: migrations, records, and two rgt processes writing at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.errors import StateError, UnknownJobError, UnknownMachineError
from rgt.models import JobSpec, JobState, Machine
from rgt.state.store import MIGRATIONS, Store, utcnow

WRITER = """
import sys
from rgt.state.store import Store, utcnow
from rgt.models import JobSpec, Machine
store = Store.open()
who, n = sys.argv[1], int(sys.argv[2])
store.add_machine(Machine(name=who, backend="local", profile="local", connection={},
                          durable_root="/tmp", registered=utcnow()))
for i in range(n):
    store.add_job(JobSpec(job_id=f"{who}-{i}", machine=who, command=("true",)))
    store.record_pull(f"{who}-{i}", "/tmp/x", {"a": "b"}, "0" * 64, True, {"ok": True})
"""


def _machine(name: str = "box") -> Machine:
    return Machine(
        name=name,
        backend="local",
        profile="local",
        connection={"k": 1},
        durable_root="/tmp/d",
        price_per_hour=0.5,
        registered=utcnow(),
    )


def test_round_trip_and_unknowns() -> None:
    store = Store.open()
    store.add_machine(_machine())
    assert store.machine("box").connection == {"k": 1}
    spec = JobSpec(job_id="j1", machine="box", command=("python", "t.py"), env={"A": "1"})
    store.add_job(spec)
    store.update_job("j1", state=JobState.RUNNING, attempts=2, label=None)
    job = store.job("j1")
    assert job.spec == spec and job.state is JobState.RUNNING and job.attempts == 2
    with pytest.raises(UnknownJobError):
        store.job("nope")
    with pytest.raises(UnknownMachineError) as err:
        store.machine("nope")
    assert "box" in err.value.message
    with pytest.raises(UnknownMachineError):
        store.add_job(JobSpec(job_id="j2", machine="nope", command=("x",)))


def test_migrations_set_user_version(rgt_home: Path) -> None:
    Store.open()
    conn = sqlite3.connect(rgt_home / "state.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_newer_schema_is_refused(rgt_home: Path) -> None:
    Store.open()
    conn = sqlite3.connect(rgt_home / "state.db")
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.commit()
    with pytest.raises(StateError) as err:
        Store.open()
    assert "upgrade rgt" in (err.value.fix or "")


def test_two_processes_write_at_once() -> None:
    n = 60
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, who, str(n)], stderr=subprocess.PIPE)
        for who in ("alpha", "beta", "gamma")
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    store = Store.open()
    for who in ("alpha", "beta", "gamma"):
        jobs = store.jobs(who)
        assert [j.job_id for j in jobs] == [f"{who}-{i}" for i in range(n)] or sorted(
            j.job_id for j in jobs
        ) == sorted(f"{who}-{i}" for i in range(n))
        assert all(store.last_pull(j.job_id) for j in jobs)


def test_approvals_are_consumed_once() -> None:
    store = Store.open()
    store.add_machine(_machine())
    store.add_approval("box", "down", "alice", "/dev/pts/1")
    approval = store.pending_approval("box", "down")
    assert approval and approval["approver"] == "alice"
    store.consume_approval(approval["id"])
    assert store.pending_approval("box", "down") is None

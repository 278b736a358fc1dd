"""The local state database: machines, jobs, pulls and approvals, in SQLite under ``$RGT_HOME``.

This module holds the connection, machines and jobs; ``_schema`` the migrations and ``utcnow``;
``_ledger`` pulls, approvals and vendor instances (a mixin of ``Store``).

Remote state (the agent's status.json) is the truth about jobs; this is a cache of it plus the
record of what was pulled, verified and approved. Several ``rgt`` processes may use it at once
(a ``watch`` loop beside a ``pull``): WAL journaling and a busy timeout make that safe, and every
write is one short transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rgt.config import rgt_home
from rgt.errors import AmbiguousJobError, StateError, UnknownJobError, UnknownMachineError
from rgt.models import JobRecord, JobSpec, JobState, Machine
from rgt.state._dbfile import check_database_file, create_database_file
from rgt.state._dbwrite import RERUN, state_write_error, write_transaction
from rgt.state._ledger import Ledger
from rgt.state._schema import MIGRATIONS, apply_migrations, utcnow

__all__ = ["MIGRATIONS", "Store", "utcnow"]  # the public path of the schema and clock

BUSY_TIMEOUT_MS = 30_000


class Store(Ledger):
    """One connection per thread; open with ``Store.open()`` (default ``$RGT_HOME/state.db``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        if not path.exists():
            create_database_file(path, lambda conn: apply_migrations(conn, 0))
        check_database_file(path)
        self._migrate()

    @classmethod
    def open(cls, path: Path | None = None) -> Store:
        return cls(path or rgt_home() / "state.db")

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
                )
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.Error as exc:
                raise state_write_error(self.path, exc, "open it") or StateError(
                    f"cannot open state DB {self.path}: {exc}", fix="check permissions of $RGT_HOME"
                ) from exc
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    @contextmanager
    def tx(self, doing: str = "save the change", then: str = RERUN) -> Iterator[sqlite3.Connection]:
        """One short write transaction, all or nothing; a full disk, an I/O error, a read-only
        file or a lock held too long is a StateWriteError saying what to do (``then``)."""
        conn = self._conn()
        try:
            with write_transaction(conn, self.path, doing, then) as inside:
                yield inside
        finally:
            if conn.in_transaction:  # its rollback failed: never reuse this connection
                self._local.conn = None
                conn.close()

    def _migrate(self) -> None:
        with self.tx() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StateError(
                    f"state DB {self.path} is schema {version}, this rgt knows {len(MIGRATIONS)}",
                    fix="upgrade rgt (pip install -U remote-gpu-trainer)",
                )
            apply_migrations(conn, version)

    # -- machines ------------------------------------------------------------------------

    def add_machine(self, machine: Machine) -> None:
        with self.tx() as conn:
            conn.execute(
                "INSERT INTO machines VALUES (?,?,?,?,?,?,?,NULL) ON CONFLICT(name) DO UPDATE SET "
                "backend=excluded.backend, profile=excluded.profile, "
                "connection=excluded.connection, durable_root=excluded.durable_root, "
                "price_per_hour=excluded.price_per_hour, registered=excluded.registered, "
                "released=NULL",
                (
                    machine.name,
                    machine.backend,
                    machine.profile,
                    json.dumps(machine.connection),
                    machine.durable_root,
                    machine.price_per_hour,
                    machine.registered or utcnow(),
                ),
            )

    def machine(self, name: str) -> Machine:
        row = self._conn().execute("SELECT * FROM machines WHERE name=?", (name,)).fetchone()
        if row is None:
            raise UnknownMachineError(name, [m.name for m in self.machines()])
        return _machine(row)

    def machines(self, *, include_released: bool = True) -> list[Machine]:
        sql = "SELECT * FROM machines" + ("" if include_released else " WHERE released IS NULL")
        return [_machine(r) for r in self._conn().execute(sql + " ORDER BY name")]

    def release_machine(self, name: str) -> None:
        with self.tx() as conn:
            conn.execute("UPDATE machines SET released=? WHERE name=?", (utcnow(), name))

    # -- jobs ----------------------------------------------------------------------------

    def add_job(self, spec: JobSpec, state: JobState = JobState.QUEUED) -> JobRecord:
        self.machine(spec.machine)
        created = spec.created or utcnow()
        with self.tx() as conn:
            conn.execute(
                "INSERT INTO jobs VALUES (?,?,?,?,0,NULL,?,NULL)",
                (spec.job_id, spec.machine, json.dumps(spec.to_json()), state.value, created),
            )
        return self.job(spec.job_id)

    def update_job(
        self,
        job_id: str,
        *,
        state: JobState,
        attempts: int,
        label: str | None = None,
        ended: str | None = None,
    ) -> None:
        with self.tx() as conn:
            conn.execute(
                "UPDATE jobs SET state=?, attempts=?, label=?, ended=? WHERE job_id=?",
                (state.value, attempts, label, ended, job_id),
            )

    def job(self, job_id: str) -> JobRecord:
        row = self._conn().execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        if row is None:
            raise UnknownJobError(job_id)
        return _job(row)

    def resolve_job(self, ref: str) -> str:
        """The full id of the job ``ref`` names: its exact id, or a prefix that only one job
        id starts with (as git accepts a short commit hash). Every verb resolves through here."""
        conn = self._conn()
        if ref and conn.execute("SELECT 1 FROM jobs WHERE job_id=?", (ref,)).fetchone():
            return ref
        rows = conn.execute(
            "SELECT job_id FROM jobs WHERE substr(job_id, 1, ?) = ? ORDER BY created",
            (len(ref), ref),
        ).fetchall()
        if not ref or not rows:
            raise UnknownJobError(ref)
        if len(rows) > 1:
            raise AmbiguousJobError(ref, [r["job_id"] for r in rows])
        return str(rows[0]["job_id"])

    def jobs(self, machine: str | None = None) -> list[JobRecord]:
        if machine is None:
            rows = self._conn().execute("SELECT * FROM jobs ORDER BY created")
        else:
            rows = self._conn().execute(
                "SELECT * FROM jobs WHERE machine=? ORDER BY created", (machine,)
            )
        return [_job(r) for r in rows]


def _machine(row: sqlite3.Row) -> Machine:
    return Machine(
        name=row["name"],
        backend=row["backend"],
        profile=row["profile"],
        connection=json.loads(row["connection"]),
        durable_root=row["durable_root"],
        price_per_hour=row["price_per_hour"],
        registered=row["registered"],
        released=row["released"],
    )


def _job(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        job_id=row["job_id"],
        machine=row["machine"],
        spec=JobSpec.from_json(json.loads(row["spec"])),
        state=JobState(row["state"]),
        attempts=row["attempts"],
        created=row["created"],
        ended=row["ended"],
        label=row["label"],
    )

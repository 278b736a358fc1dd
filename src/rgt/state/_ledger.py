"""What the state DB records besides machines and jobs: pulls, approvals and vendor
instances. A mixin of :class:`rgt.state.store.Store`, which owns the connection and the
transactions; each write here is one short transaction (``tx``)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from typing import Any

from rgt.state._dbwrite import RERUN, pull_rerun
from rgt.state._schema import utcnow


class Ledger:
    """Pulls, approvals and vendor instances (``Store`` provides ``tx`` and ``_conn``)."""

    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError

    def tx(
        self, doing: str = "save the change", then: str = RERUN
    ) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    # -- pulls ---------------------------------------------------------------------------

    def record_pull(
        self,
        job_id: str,
        dest: str,
        files: dict[str, Any],  # path -> {sha256, bytes, mtime_ns} (older records: sha256)
        manifest_sha256: str,
        verified: bool,
        report: dict[str, Any],
    ) -> None:
        then = pull_rerun(job_id, dest, verified=verified)
        with self.tx(f"record the pull of {job_id} to {dest}", then) as conn:
            conn.execute(
                "INSERT INTO pulls (job_id, dest, files, manifest_sha256, verified, report, time)"
                " VALUES (?,?,?,?,?,?,?)",
                (
                    job_id,
                    dest,
                    json.dumps(files),
                    manifest_sha256,
                    int(verified),
                    json.dumps(report),
                    utcnow(),
                ),
            )

    def last_pull(self, job_id: str) -> dict[str, Any] | None:
        row = (
            self._conn()
            .execute("SELECT * FROM pulls WHERE job_id=? ORDER BY id DESC LIMIT 1", (job_id,))
            .fetchone()
        )
        if row is None:
            return None
        return {
            "job_id": row["job_id"],
            "dest": row["dest"],
            "files": json.loads(row["files"]),
            "manifest_sha256": row["manifest_sha256"],
            "verified": bool(row["verified"]),
            "report": json.loads(row["report"]),
            "time": row["time"],
        }

    # -- approvals -----------------------------------------------------------------------

    def add_approval(self, machine: str, action: str, approver: str, tty: str) -> None:
        with self.tx() as conn:
            conn.execute(
                "INSERT INTO approvals (machine, action, approver, tty, time) VALUES (?,?,?,?,?)",
                (machine, action, approver, tty, utcnow()),
            )

    def pending_approval(self, machine: str, action: str) -> dict[str, Any] | None:
        row = (
            self._conn()
            .execute(
                "SELECT * FROM approvals WHERE machine=? AND action=? AND consumed IS NULL "
                "ORDER BY id DESC LIMIT 1",
                (machine, action),
            )
            .fetchone()
        )
        return dict(row) if row else None

    def consume_approval(self, approval_id: int) -> None:
        with self.tx() as conn:
            conn.execute("UPDATE approvals SET consumed=? WHERE id=?", (utcnow(), approval_id))

    # -- vendor instances ----------------------------------------------------------------

    def record_vendor_instance(
        self,
        machine: str,
        vendor: str,
        instance_id: str,
        *,
        price: float | None,
        state: str,
        disk_gb: float | None = None,
    ) -> None:
        with self.tx() as conn:
            conn.execute(
                "INSERT INTO vendor_instances VALUES (?,?,?,?,?,?,?,NULL) ON CONFLICT(vendor, "
                "instance_id) DO UPDATE SET state=excluded.state, price_per_hour="
                "COALESCE(excluded.price_per_hour, price_per_hour)",
                (vendor, instance_id, machine, price, disk_gb, state, utcnow()),
            )

    def set_vendor_instance_state(
        self, vendor: str, instance_id: str, state: str, *, released: bool = False
    ) -> None:
        with self.tx() as conn:
            conn.execute(
                "UPDATE vendor_instances SET state=?, released=COALESCE(released, ?) "
                "WHERE vendor=? AND instance_id=?",
                (state, utcnow() if released else None, vendor, instance_id),
            )

    def vendor_instances(self, machine: str | None = None) -> list[dict[str, Any]]:
        """Newest first; ``released`` is None while rgt believes the instance may bill."""
        sql, args = "SELECT * FROM vendor_instances", []
        if machine is not None:
            sql, args = sql + " WHERE machine=?", [machine]
        rows = self._conn().execute(sql + " ORDER BY created DESC", args)
        return [dict(r) for r in rows]

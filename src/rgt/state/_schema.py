"""The state DB's schema: append-only migrations, applied in order, numbered by
``PRAGMA user_version``. A released version is never edited; a change is a new entry."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE machines (
        name TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        profile TEXT NOT NULL,
        connection TEXT NOT NULL,
        durable_root TEXT NOT NULL,
        price_per_hour REAL,
        registered TEXT NOT NULL,
        released TEXT
    );
    CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY,
        machine TEXT NOT NULL REFERENCES machines(name),
        spec TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        label TEXT,
        created TEXT NOT NULL,
        ended TEXT
    );
    CREATE INDEX jobs_by_machine ON jobs(machine);
    CREATE TABLE pulls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs(job_id),
        dest TEXT NOT NULL,
        files TEXT NOT NULL,
        manifest_sha256 TEXT NOT NULL,
        verified INTEGER NOT NULL,
        report TEXT NOT NULL,
        time TEXT NOT NULL
    );
    CREATE INDEX pulls_by_job ON pulls(job_id);
    CREATE TABLE approvals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        machine TEXT NOT NULL,
        action TEXT NOT NULL,
        approver TEXT NOT NULL,
        tty TEXT NOT NULL,
        time TEXT NOT NULL,
        consumed TEXT
    );
    """,
    # Vendor instances (rgt.vendors): recorded the moment a create answers, before the machine
    # is reachable, so an interrupted `up` or a failed-but-billing create is never orphaned.
    """
    CREATE TABLE vendor_instances (
        vendor TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        machine TEXT NOT NULL,
        price_per_hour REAL,
        disk_gb REAL,
        state TEXT NOT NULL,
        created TEXT NOT NULL,
        released TEXT,
        PRIMARY KEY (vendor, instance_id)
    );
    CREATE INDEX vendor_instances_by_machine ON vendor_instances(machine);
    """,
)


def utcnow() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def apply_migrations(conn: sqlite3.Connection, version: int) -> None:
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        for statement in filter(str.strip, script.split(";")):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version={number}")

"""trackio's local store: one SQLite database per project (``<TRACKIO_DIR>/<project>.db``).

Read with the standard library's ``sqlite3``, read-only: trackio's own ``SQLiteStorage`` reads
only from the ``TRACKIO_DIR`` fixed when trackio is first imported, so it cannot be pointed at an
arbitrary folder without side effects. The tables read are trackio's ``configs`` (one JSON
config per run) and ``metrics`` (one JSON row of values per logged step). trackio records no run
status, so every run's status is ``unknown``; keys starting with ``_`` in the config are
trackio's own (``_Created``, ``_Username``, ``_Group``).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

from rgt.verify.tracker.record import Point, TrackedRun, flatten, sort_points

_MAGIC = b"SQLite format 3\x00"


def is_store(path: Path) -> bool:
    """A trackio database: SQLite, with trackio's ``configs`` and ``metrics`` tables."""
    if path.suffix != ".db":
        return False
    try:
        with path.open("rb") as handle:
            if handle.read(len(_MAGIC)) != _MAGIC:
                return False
        with closing(_connect(path)) as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except (OSError, sqlite3.Error):
        return False
    return {"configs", "metrics"} <= tables


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def read(path: Path) -> list[TrackedRun]:
    with closing(_connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        by_id = _column(conn, "metrics", "run_id") and _column(conn, "configs", "run_id")
        ident = "run_id" if by_id else "run_name"
        configs = {row[ident]: row for row in conn.execute("SELECT * FROM configs")}
        history: dict[str, dict[str, list[Point]]] = {}
        names: dict[str, str] = {}
        for row in conn.execute("SELECT * FROM metrics ORDER BY id"):
            names[row[ident]] = row["run_name"]
            _add_row(history.setdefault(row[ident], {}), row)
    runs = sorted(set(configs) | set(history))
    return [_record(path, run, configs.get(run), history.get(run, {}), names) for run in runs]


def _column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def _add_row(history: dict[str, list[Point]], row: sqlite3.Row) -> None:
    stamp = _time(row["timestamp"])
    for key, value in json.loads(row["metrics"]).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            history.setdefault(key, []).append(Point(int(row["step"]), float(value), stamp))
        elif value is None or value in ("NaN", "nan"):  # NaN has no JSON form; trackio nulls it
            history.setdefault(key, []).append(Point(int(row["step"]), float("nan"), stamp))


def _time(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None


def _record(
    path: Path,
    run: str,
    config_row: sqlite3.Row | None,
    history: dict[str, list[Point]],
    names: dict[str, str],
) -> TrackedRun:
    config: dict[str, Any] = json.loads(config_row["config"]) if config_row else {}
    created = config.get("_Created")
    return TrackedRun(
        source="trackio",
        run_id=run,
        name=config_row["run_name"] if config_row else names.get(run, run),
        status="unknown",
        path=f"{path}#{run}",
        config=flatten({k: v for k, v in config.items() if not k.startswith("_")}),
        history={key: sort_points(points) for key, points in history.items()},
        start_time=_time(created if isinstance(created, str) else None),
    )

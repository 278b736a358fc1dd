"""Truncated and garbled state files: status.json, manifest.json, events.jsonl, state.db.

The job really succeeded; then one of its files is cut or garbled (as a full disk or a crashed
filesystem leaves it) and the real CLI reads it. A reader may say "succeeded" (the truth, e.g.
from DONE and the manifest), or report the file as damaged, naming it; it may never report
another state, store one, hang, or die with a traceback.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.faults import corruption as bad
from tests.faults.harness import (
    Outcome,
    assert_clear_error,
    assert_pulled_exactly,
    assert_refused_pull,
    assert_untouched,
    rng,
    snapshot,
)
from tests.faults.world import World

LIVE = ("queued", "running", "retrying")


def _cases(kinds: tuple[str, ...], commands: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(kind, command, i, id=f"{kind}-{i}-{command}")
        for i, kind in enumerate(kinds)
        for command in commands
    ]


def _cache_says(world: World, state: str) -> None:
    """What `rgt run` leaves for a long job: the local cache last saw it running."""
    with sqlite3.connect(world.home / "state.db") as db:
        db.execute("UPDATE jobs SET state = ?, ended = NULL", (state,))


def _cached_state(world: World) -> str:
    with sqlite3.connect(world.home / "state.db") as db:
        return str(db.execute("SELECT state FROM jobs").fetchone()[0])


def _job_entry(doc: Any) -> dict[str, Any]:
    if isinstance(doc, dict) and isinstance(doc.get("jobs"), list) and doc["jobs"]:
        return dict(doc["jobs"][0])
    assert isinstance(doc, dict) and "state" in doc, f"no job in the answer: {doc}"
    return doc


def assert_truthful(out: Outcome, truth: str, damaged: str) -> None:
    """The truth, or the damage named; never another state, never a traceback."""
    assert "Traceback (most recent call last)" not in out.stderr, str(out)
    doc = out.doc()
    if isinstance(doc, dict) and "error" in doc:
        assert_clear_error(out, names=[damaged])
        return
    job = _job_entry(doc)
    if job["state"] != truth:
        assert damaged in json.dumps(job), (
            f"a {truth} job whose {damaged} is damaged was reported as {job['state']!r} "
            f"without naming the damage:\n{out}"
        )
        assert job["state"] not in LIVE, f"reported as live ({job['state']}):\n{out}"


@pytest.mark.parametrize(("kind", "command", "i"), _cases(bad.JSON_KINDS, ("status", "watch")))
def test_corrupt_status_json(fresh: World, kind: str, command: str, i: int) -> None:
    status = fresh.job_dir / "status.json"
    bad.apply(status, bad.corrupt_json(status.read_bytes(), kind, rng("status", kind, i)))
    _cache_says(fresh, "running")
    if command == "status":
        out = fresh.cli("status", fresh.job_id, "--json")
    else:
        out = fresh.cli("watch", fresh.job_id, "--interval", "0.2", "--no-gpu", "--json")
    assert_truthful(out, "succeeded", "status.json")
    assert _cached_state(fresh) in ("running", "succeeded"), "a false state was stored"


@pytest.mark.parametrize("kind", ["cut", "garble", "list", "removed"])
def test_pull_with_corrupt_status_json(fresh: World, kind: str) -> None:
    status = fresh.job_dir / "status.json"
    bad.apply(status, bad.corrupt_json(status.read_bytes(), kind, rng("status-pull", kind)))
    _cache_says(fresh, "running")
    area = fresh.trial_dir(f"status-pull-{kind}")
    dest = area / "dest"
    before = snapshot(area)
    out = fresh.cli("pull", fresh.job_id, "--to", str(dest), "--json")
    if out.code == 0:
        assert_pulled_exactly(dest, fresh.files)
    else:
        assert_clear_error(out, names=["status.json"])
    assert_untouched(before, snapshot(area, skip=[dest]), area)


@pytest.mark.parametrize(("kind", "command", "i"), _cases(bad.JSON_KINDS, ("pull", "down")))
def test_corrupt_manifest_json(fresh: World, kind: str, command: str, i: int) -> None:
    manifest = fresh.job_dir / "manifest.json"
    bad.apply(manifest, bad.corrupt_json(manifest.read_bytes(), kind, rng("manifest", kind, i)))
    area = fresh.trial_dir(f"manifest-{kind}-{i}-{command}")
    dest = area / "dest"
    before = snapshot(area)
    if command == "pull":
        out = fresh.cli("pull", fresh.job_id, "--to", str(dest), "--json")
        assert_refused_pull(out)
        if isinstance(out.doc(), dict) and "error" in out.doc():
            assert "manifest" in json.dumps(out.doc()), f"the error does not name it:\n{out}"
    else:
        out = fresh.cli("down", "box", "--yes", "--json")
        assert out.code != 0, f"down passed with a damaged manifest:\n{out}"
        assert "Traceback (most recent call last)" not in out.stderr, str(out)
        doc = out.doc()
        assert isinstance(doc, dict) and doc.get("error") not in (None, "InternalError"), (
            f"down with a damaged manifest: {doc and doc.get('error')}: "
            f"{doc and str(doc.get('message'))[:160]}\n{out}"
        )
    assert_untouched(before, snapshot(area, skip=[dest]), area)


@pytest.mark.parametrize(
    ("kind", "command", "i"), _cases(bad.EVENT_KINDS, ("watch-job", "watch-once"))
)
def test_corrupt_events_jsonl(fresh: World, kind: str, command: str, i: int) -> None:
    events = fresh.job_dir / "events.jsonl"
    bad.apply(events, bad.corrupt_events(events.read_bytes(), kind, rng("events", kind, i)))
    if command == "watch-job":
        out = fresh.cli("watch", fresh.job_id, "--interval", "0.2", "--no-gpu", "--json")
        assert_truthful(out, "succeeded", "events.jsonl")
        assert out.code == 0 or "error" in (out.doc() or {}), str(out)
    else:
        out = fresh.cli("watch", "--once", "--no-gpu", "--json")
        assert "Traceback (most recent call last)" not in out.stderr, str(out)
        doc = out.doc()
        if isinstance(doc, dict) and "error" in doc:
            assert_clear_error(out, names=["events.jsonl"])
        else:
            assert out.code == 0 and _job_entry(doc)["state"] == "succeeded", str(out)


@pytest.mark.parametrize(("kind", "command", "i"), _cases(bad.DB_KINDS, ("status", "pull")))
def test_corrupt_state_db(fresh: World, kind: str, command: str, i: int) -> None:
    db = fresh.home / "state.db"
    for side in ("state.db-wal", "state.db-shm"):
        (fresh.home / side).unlink(missing_ok=True)  # the cut must be what sqlite reads
    bad.apply(db, bad.corrupt_db(db.read_bytes(), kind, rng("db", kind, i)))
    damaged = None if kind == "removed" else db.read_bytes()
    area = fresh.trial_dir(f"db-{kind}-{i}-{command}")
    dest = area / "dest"
    if command == "status":
        out = fresh.cli("status", "--json")
    else:
        out = fresh.cli("pull", fresh.job_id, "--to", str(dest), "--json")
    _assert_db_verdict(out, fresh, command, kind, dest)
    if damaged is not None and out.code != 0:
        assert db.read_bytes() == damaged, "the damaged state.db was replaced (records lost)"


def _assert_db_verdict(out: Outcome, world: World, command: str, kind: str, dest: Path) -> None:
    assert "Traceback (most recent call last)" not in out.stderr, str(out)
    if out.code != 0:
        assert_clear_error(out, names=["state.db"] if kind != "removed" else [world.job_id])
        return
    doc = out.doc()
    if command == "pull":
        assert_pulled_exactly(dest, world.files)
    else:
        listed = [j["job_id"] for j in doc.get("jobs", [])]
        assert kind == "removed" or world.job_id in listed, (
            f"a damaged state.db ({kind}) was read as a database without the job:\n{out}"
        )

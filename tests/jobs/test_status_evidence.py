"""A missing or damaged status.json: the state shown is the one the machine's other files prove
(the terminal event in events.jsonl, DONE), or an honest ``unknown``; never a live state for
an ended job, never ``queued``, never a follow that waits for ever. Real jobs on the local
backend, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rgt.models import JobState
from rgt.state.store import Store
from tests.jobs.test_corrupt_state import Live, status_of
from tests.watch.test_derived_events import QUICK, launch, rgt


def _finished(tmp_path: Path) -> tuple[str, Path]:
    job_id = launch(tmp_path, QUICK)
    assert rgt("watch", job_id, "--json", "--no-gpu").returncode == 0
    return job_id, tmp_path / "root" / ".rgt" / "jobs" / job_id


def _cache(job_id: str, state: JobState) -> None:
    Store.open().update_job(job_id, state=state, attempts=1, ended=None)


def test_removed_status_of_an_ended_job_is_its_end_named_and_not_resumed(tmp_path: Path) -> None:
    job_id, job_dir = _finished(tmp_path)
    (job_dir / "DONE").unlink()  # the end must come from the terminal event alone
    (job_dir / "status.json").unlink()
    _cache(job_id, JobState.RUNNING)
    job = status_of(job_id)
    assert job["state"] == "succeeded" and not job.get("heartbeat_lost"), job
    problem = job["problem"]
    assert problem["kind"] == "missing" and problem["path"] == str(job_dir / "status.json")
    assert "rgt resume" not in problem["fix"] and "events.jsonl" in problem["fix"], problem
    assert Store.open().job(job_id).state == JobState.SUCCEEDED  # proven, so cached
    resumed = json.loads(rgt("resume", job_id, "--json").stdout)
    assert resumed["resumed"] is False and "has ended (succeeded)" in resumed["reason"]
    assert not (job_dir / "status.json").exists()  # no agent was started


def test_garbled_status_with_only_done_is_succeeded(tmp_path: Path) -> None:
    job_id, job_dir = _finished(tmp_path)
    (job_dir / "events.jsonl").write_bytes(b"")  # nothing but DONE says how it ended
    (job_dir / "status.json").write_bytes(b'{"state": "succ\xff')
    _cache(job_id, JobState.RUNNING)
    once = json.loads(rgt("watch", job_id, "--once", "--json", "--full", "--no-gpu").stdout)
    assert once["state"] == "succeeded" and once["state_source"] == "DONE", once
    assert once["problem"]["kind"] == "corrupt" and "heartbeat_lost" not in once["alerts"]


def test_no_evidence_and_no_agent_is_unknown_and_watch_ends(tmp_path: Path) -> None:
    live = Live(tmp_path)
    try:
        assert status_of(live.job_id)["state"] == "running"  # cached
        live.kill_all()
        (live.dir / "status.json").unlink()
        job = status_of(live.job_id)
        assert job["state"] == "unknown" and job["problem"]["kind"] == "missing", job
        assert "status.json is missing" in job["reason"], job  # the agent is gone: resume
        once = json.loads(rgt("watch", live.job_id, "--once", "--json", "--no-gpu").stdout)
        assert once["state"] == "unknown", once
        assert once["reason"].startswith("unknown: status file missing/corrupt"), once
        assert Store.open().job(live.job_id).state == JobState.RUNNING  # nothing proven
        argv = [sys.executable, "-m", "rgt.cli", "watch", live.job_id, "--interval", "0.3"]
        proc = subprocess.run([*argv, "--no-gpu"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "status.json" in proc.stdout, proc.stdout + proc.stderr
    finally:
        live.kill_all()

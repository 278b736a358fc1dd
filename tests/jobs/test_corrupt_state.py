"""Corrupt state never lies and never hangs: a cut status.json, a cut manifest.json, lines of
events.jsonl that are not events, a job directory that vanished, a state.db that is not one.
Real jobs on the local backend, through the real CLI; the files are damaged as a full disk or
a crash would leave them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgt.models import JobState
from rgt.state.store import Store
from tests.watch.test_derived_events import QUICK, launch, rgt

LONG = "import time\nfor i in range(900):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"


class Live:
    """A running job launched through `rgt run`, and its files on the machine."""

    def __init__(self, tmp_path: Path, script: str = LONG) -> None:
        self.job_id = launch(tmp_path, script)
        self.dir = tmp_path / "root" / ".rgt" / "jobs" / self.job_id
        self.agent = int((self.dir / "agent.pid").read_text())
        self.pid = self._job_pid()

    def _job_pid(self) -> int | None:
        """The job's pid, once the agent wrote its first status (a loaded machine may take
        longer than the run's 1 s probe to get there)."""
        deadline = time.monotonic() + 60
        while not (self.dir / "status.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = json.loads((self.dir / "status.json").read_text()).get("pid")
        return pid if isinstance(pid, int) else None

    def kill_all(self) -> None:
        for pid, kill in ((self.agent, os.kill), (self.pid, os.killpg)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if isinstance(pid, int):
                    kill(pid, signal.SIGCONT)
                    kill(pid, signal.SIGKILL)

    def cut(self, name: str) -> Path:
        path = self.dir / name
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return path


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    job = Live(tmp_path)
    yield job
    job.kill_all()
    new_agent = job.dir / "agent.pid"  # a resumed agent, if the test started one
    if new_agent.exists():
        rgt("cancel", job.job_id, "--json")


def status_of(job_id: str) -> dict[str, Any]:
    proc = rgt("status", job_id, "--json")
    assert proc.returncode == 0, proc.stderr
    job: dict[str, Any] = json.loads(proc.stdout)["jobs"][0]
    return job


def watch_follow(job_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Following a job that cannot end must end: the timeout turns a hang into a failure."""
    argv = [sys.executable, "-m", "rgt.cli", "watch", job_id, "--interval", "0.3", "--no-gpu"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_cut_status_is_reported_never_cached_as_another_state(live: Live) -> None:
    assert status_of(live.job_id)["state"] == "running"  # cached
    os.kill(live.agent, signal.SIGSTOP)  # frozen: it cannot rewrite the file under us
    path = live.cut("status.json")
    job = status_of(live.job_id)
    assert job["state"] == "running", job  # the last known state, not "queued"/"failed"
    assert job["problem"]["kind"] == "corrupt" and job["problem"]["path"] == str(path)
    assert "rgt resume" in job["problem"]["fix"] and "state_file" in job["alerts"]
    assert Store.open().job(live.job_id).state == JobState.RUNNING
    once = json.loads(rgt("watch", live.job_id, "--once", "--json", "--no-gpu").stdout)
    assert once["state"] == "running" and once["problem"]["path"] == str(path)


@pytest.mark.slow
def test_cut_status_with_no_agent_ends_watch_and_resume_rebuilds_it(live: Live) -> None:
    assert status_of(live.job_id)["state"] == "running"  # cached
    live.kill_all()
    path = live.cut("status.json")
    proc = watch_follow(live.job_id)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{path}: the file is cut or garbled" in proc.stdout
    assert f"rgt resume {live.job_id}" in proc.stdout
    resumed = rgt("resume", live.job_id, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["resumed"] is True
    rebuilt = json.loads(path.read_text())  # from events.jsonl: attempt 1 was counted
    assert rebuilt["attempt"] == 2 and rebuilt["state"] in ("retrying", "running")


@pytest.mark.slow
def test_cut_manifest_is_a_named_error(tmp_path: Path) -> None:
    job = Live(tmp_path, QUICK)
    assert watch_follow(job.job_id, "--json").returncode == 0  # succeeded
    path = job.cut("manifest.json")
    proc = rgt("pull", job.job_id, "--to", str(tmp_path / "pulled"), "--json")
    assert proc.returncode == 1, proc.stdout
    error = json.loads(proc.stdout)
    assert error["error"] == "StateFileError" and error["path"] == str(path)
    assert "cut or garbled" in error["message"] and "rgt resume" in error["fix"]


@pytest.mark.slow
def test_event_lines_that_are_not_events_are_skipped_and_counted(live: Live) -> None:
    with (live.dir / "events.jsonl").open("a") as events:
        events.write('[1, 2]\n"just a string"\n{"no": "kind"}\n{"cut": \n')
    proc = rgt("watch", "--once", "--json", "--full", "--no-gpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (job,) = [j for j in json.loads(proc.stdout)["jobs"] if j["job_id"] == live.job_id]
    assert job["events_skipped"] == 4 and job["state"] == "running"
    human = rgt("watch", "--once", "--no-gpu")
    assert human.returncode == 0, human.stderr


@pytest.mark.slow
def test_removed_job_dir_is_named_with_the_fix(live: Live) -> None:
    assert status_of(live.job_id)["state"] == "running"  # cached
    live.kill_all()
    shutil.rmtree(live.dir)
    job = status_of(live.job_id)
    assert job["state"] == "running" and job["problem"]["kind"] == "job_dir_missing", job
    assert "job directory missing on the machine" in job["reason"]
    assert Store.open().job(live.job_id).state == JobState.RUNNING  # not "never launched"
    proc = watch_follow(live.job_id)
    assert proc.returncode == 1 and "job directory missing on the machine" in proc.stdout
    gate = rgt("down", "box", "--check", "--json")  # never "has not ended (state queued)"
    assert gate.returncode == 3
    reasons = " ".join(json.loads(gate.stdout)["reasons"])
    assert "job directory missing on the machine" in reasons and "--abandon" in reasons
    assert "has not ended" not in reasons


@pytest.mark.parametrize("content", [b"", b"not a database at all\n" * 50])
def test_state_db_that_is_not_sqlite_is_refused(content: bytes) -> None:
    home = Path(os.environ["RGT_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    db = home / "state.db"
    db.write_bytes(content)
    proc = rgt("status", "--json")
    assert proc.returncode == 1, proc.stdout
    error = json.loads(proc.stdout)
    assert error["error"] == "StateError" and str(db) in error["message"]
    assert "empty" in error["message"] if not content else "not an SQLite" in error["message"]
    assert "mv" in error["fix"] and db.read_bytes() == content  # never recreated over


def test_fresh_home_creates_the_state_db() -> None:
    db = Path(os.environ["RGT_HOME"]) / "state.db"
    assert not db.exists()
    assert rgt("status", "--json").returncode == 0
    assert db.read_bytes().startswith(b"SQLite format 3\x00")
    assert not [p for p in db.parent.iterdir() if p.name.startswith(".state.db.new")]

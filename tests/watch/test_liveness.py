"""A dead or frozen agent is reported the same way by `watch JOB` (human and JSON), `status`
(human and JSON) and `watch --once --json`, within a bound, with what to do (`rgt resume`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.watch.test_derived_events import derived, launch, rgt

LONG = "import time\nfor i in range(900):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"
BOUND_S = 15.0  # from the agent's death to every view saying so


@pytest.fixture
def lost_job(tmp_path: Path) -> Iterator[tuple[str, float]]:
    """A running job whose agent was just killed with SIGKILL: (job id, time of the kill)."""
    job_id = launch(tmp_path, LONG)
    job_dir = tmp_path / "root" / ".rgt" / "jobs" / job_id
    status = json.loads((job_dir / "status.json").read_text())
    os.kill(int((job_dir / "agent.pid").read_text()), signal.SIGKILL)
    yield job_id, time.monotonic()
    _kill_group(status.get("pid"))


def _kill_group(pid: Any) -> None:
    if isinstance(pid, int):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def watch_job(job_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`rgt watch JOB` as a user runs it: it follows the job, so on today's code (which never
    saw the dead agent) it would wait for ever; the timeout turns that into a failure."""
    return subprocess.run(
        [sys.executable, "-m", "rgt.cli", "watch", job_id, "--interval", "0.5", "--no-gpu", *args],
        capture_output=True,
        text=True,
        timeout=BOUND_S + 30,
        env=os.environ.copy(),
    )


def test_watch_job_human_shows_heartbeat_lost(lost_job: tuple[str, float]) -> None:
    job_id, killed = lost_job
    proc = watch_job(job_id)
    assert time.monotonic() - killed < BOUND_S
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[heartbeat_lost]" in proc.stdout  # rich used to eat it as markup
    assert "the agent is not running" in proc.stdout
    assert f"rgt resume {job_id}" in proc.stdout


def test_watch_job_json_status_and_patrol_agree(lost_job: tuple[str, float]) -> None:
    job_id, killed = lost_job
    proc = watch_job(job_id, "--json")
    assert proc.returncode == 1, proc.stderr
    followed = json.loads(proc.stdout)
    status_json = json.loads(rgt("status", job_id, "--json").stdout)["jobs"][0]
    status_human = rgt("status", job_id).stdout
    patrol = derived(job_id)
    assert time.monotonic() - killed < BOUND_S
    for view in (followed, status_json):
        assert view["state"] == "running" and "heartbeat_lost" in view["alerts"], view
        assert view["heartbeat_lost"]["agent_alive"] is False
        assert f"rgt resume {job_id}" in view["heartbeat_lost"]["next"]
    assert followed["heartbeat_lost"]["why"] == status_json["heartbeat_lost"]["why"]
    assert [e["kind"] for e in patrol] == ["heartbeat_lost"]
    assert patrol[0]["detail"]["why"] == followed["heartbeat_lost"]["why"]
    assert "heartbeat_lost" in status_human and "rgt resume" in status_human


@pytest.mark.slow
def test_frozen_agent_is_lost_after_the_bound(tmp_path: Path) -> None:
    """SIGSTOP: the agent's process and lock are there, its heartbeat is not."""
    job_id = launch(tmp_path, LONG)
    job_dir = tmp_path / "root" / ".rgt" / "jobs" / job_id
    agent = int((job_dir / "agent.pid").read_text())
    pid = json.loads((job_dir / "status.json").read_text()).get("pid")
    limit = {"RGT_WATCH_HEARTBEAT_LOST_S": "8"}  # the agent beats every 2 s
    os.kill(agent, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        first = json.loads(rgt("status", job_id, "--json", "--full", env=limit).stdout)["jobs"][0]
        assert first["agent_alive"] is True
        assert first["heartbeat_lost"] is None or time.monotonic() - stopped > 6, first
        time.sleep(max(0.0, 9.0 - (time.monotonic() - stopped)))
        later = json.loads(rgt("status", job_id, "--json", "--full", env=limit).stdout)["jobs"][0]
        assert later["heartbeat_lost"] is not None, later
        assert "no heartbeat for" in later["heartbeat_lost"]["why"]
        assert later["heartbeat_lost"]["heartbeat_age_s"] > 8
    finally:
        os.kill(agent, signal.SIGCONT)
        os.kill(agent, signal.SIGKILL)
        _kill_group(pid)


def test_logs_follow_stops_on_a_lost_agent(lost_job: tuple[str, float]) -> None:
    """`rgt logs -f` used to print the log and wait for ever once the agent was gone."""
    job_id, killed = lost_job
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "logs", job_id, "-f"],
        capture_output=True,
        text=True,
        timeout=BOUND_S + 30,
        env=os.environ.copy(),
    )
    assert time.monotonic() - killed < BOUND_S + 5
    assert proc.returncode == 1, proc.stderr
    assert "step 0" in proc.stdout
    assert "the agent is not running" in proc.stderr and f"rgt resume {job_id}" in proc.stderr


def test_logs_follow_goes_on_into_the_next_attempt(tmp_path: Path) -> None:
    """A retried job's log continues in attempt-2.log: `logs -f` follows it there and exits
    with the job's outcome. Attempt 1 lasts until `logs -f` has shown its line, whatever the
    machine's load."""
    go = tmp_path / "go"
    script = (
        "import os, signal, time\n"
        "print('attempt', os.environ['RGT_ATTEMPT'], flush=True)\n"
        "if os.environ['RGT_ATTEMPT'] == '1':\n"
        "    deadline = time.time() + 60\n"
        f"    while not os.path.exists({str(go)!r}) and time.time() < deadline:\n"
        "        time.sleep(0.1)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "print('finished', flush=True)\n"
    )
    job_id = launch(tmp_path, script)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rgt.cli", "logs", job_id, "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    go.touch()  # attempt 1 is killed only now, while `logs -f` follows it
    rest, err = proc.communicate(timeout=120)
    out = first + rest
    assert proc.returncode == 0, out + err
    assert first.strip() == "attempt 1" and "attempt 2" in out
    assert "finished" in out

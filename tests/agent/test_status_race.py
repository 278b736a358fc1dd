"""A job read in the instant its agent records the end and exits is read as ended, not lost.

The reader takes status.json, then probes the agent's lock. An agent that writes its terminal
status and exits between those two steps used to leave the reader with a live state and a dead
agent: `heartbeat_lost` ("the agent is not running"), so `rgt watch`, `wait` and the demo
stopped following a job that had just succeeded. The interleaving is forced here with a real
process holding the real lock: it records the end and exits exactly between the two steps.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rgt.agent import _liveness, jobfiles
from rgt.agent._system import now_iso

HOLD_LOCK = """
import sys
from rgt.agent._liveness import try_lock
assert try_lock(sys.argv[1]) is not None
print("locked", flush=True)
sys.stdin.read()  # holds the lock until told to end
"""


def status(state: str, pid: int) -> bytes:
    doc = {"job_id": "j", "state": state, "attempt": 1, "agent_pid": pid, "heartbeat": now_iso()}
    return json.dumps(doc).encode()


@pytest.fixture
def agent(tmp_path: Path) -> Any:
    job_dir = tmp_path / "j"
    job_dir.mkdir()
    (job_dir / "spec.json").write_text("{}")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(job_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    (job_dir / "status.json").write_bytes(status("running", proc.pid))
    yield job_dir, proc
    proc.kill()
    proc.wait()


def test_an_end_recorded_between_the_read_and_the_probe_is_read(
    agent: tuple[Path, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_dir, proc = agent
    probe = _liveness.lock_held

    def agent_ends_first(path: str) -> bool:
        (job_dir / "status.json").write_bytes(status("succeeded", proc.pid))
        proc.communicate("")  # the agent exits: the kernel drops its lock
        return probe(path)

    monkeypatch.setattr(_liveness, "lock_held", agent_ends_first)
    doc = _liveness.status_doc(str(job_dir))
    assert doc["agent_alive"] is False
    assert doc["state"] == "succeeded"
    assert jobfiles.heartbeat_lost(doc, doc["now"], limit_s=120.0) is None


def test_a_live_agent_and_a_dead_one_are_told_apart(
    agent: tuple[Path, subprocess.Popen[str]],
) -> None:
    job_dir, proc = agent
    alive = _liveness.status_doc(str(job_dir))
    assert (alive["state"], alive["agent_alive"]) == ("running", True)
    assert jobfiles.heartbeat_lost(alive, alive["now"], limit_s=120.0) is None
    proc.kill()  # died without recording an end: lost, at once
    proc.wait()
    dead = _liveness.status_doc(str(job_dir))
    assert (dead["state"], dead["agent_alive"]) == ("running", False)
    lost = jobfiles.heartbeat_lost(dead, dead["now"], limit_s=120.0)
    assert lost is not None and "not running" in lost["why"]

"""The agent's session clock (rgt.agent._session) at chosen moments: a real JobRecorder writing
events.jsonl, a real mirror folder whose LATEST.json a real Checkpointer wrote."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from rgt.agent._record import JobRecorder
from rgt.agent._session import SessionClock
from rgt.agent.paths import JobPaths
from rgt.ckpt import Checkpointer

STARTED = 1_000_000.0
CAP = 12 * 3600


def _clock(tmp: Path, mirror: Path, durable: Path) -> tuple[SessionClock, Path]:
    job = tmp / "job"
    job.mkdir()
    spec = {
        "machine": "nb",
        "command": ["python", "train it.py", "--lr", "0.1"],
        "env": {
            "RGT_SESSION_PLATFORM": "colab",
            "RGT_SESSION_STARTED": f"{STARTED:.0f}",
            "RGT_SESSION_CAP_S": str(CAP),
            "RGT_SESSION_DURABLE": str(durable),
            "RGT_CKPT_MIRROR": str(mirror),
        },
    }
    return SessionClock(spec, JobRecorder(JobPaths(str(job), "j1"), [])), job / "events.jsonl"


def _warnings(events: Path) -> list[dict[str, Any]]:
    if not events.exists():
        return []
    return [json.loads(line) for line in events.read_text().splitlines()]


def test_warns_once_per_mark_with_the_newest_verified_checkpoint(
    tmp_path: Path, hostile_name: str
) -> None:
    durable = tmp_path / hostile_name
    mirror = durable / "j1" / "ckpt"
    clock, events = _clock(tmp_path, mirror, durable)
    ends = STARTED + CAP
    clock.tick(now=ends - 3 * 3600)
    assert _warnings(events) == []
    clock.tick(now=ends - 3500)  # the 60-min mark: nothing on Drive yet
    Checkpointer(tmp_path / "local", mirror=mirror).save({"step": 7}, 7)
    clock.tick(now=ends - 3400)
    clock.tick(now=ends - 1700)  # the 30-min mark
    clock.tick(now=ends - 1650)
    early, late = _warnings(events)
    assert [early["detail"]["mark_min"], late["detail"]["mark_min"]] == [60, 30]
    assert early["kind"] == late["kind"] == "session_ending"
    assert early["severity"] == "warning" and early["detail"]["newest_checkpoint"] is None
    assert "no checkpoint has reached" in early["next"]
    assert late["detail"]["minutes_left"] == 28
    assert late["detail"]["newest_checkpoint"]["step"] == 7
    up, run = (shlex.split(cmd) for cmd in late["next"].split("`")[1::2])
    assert up == ["rgt", "up", "colab", "--name", "nb", "--drive", str(durable)]
    assert run == ["rgt", "run", "nb", "--env", f"RGT_CKPT_MIRROR={mirror}", "--",
                   "python", "train it.py", "--lr", "0.1"]  # fmt: skip


def test_an_attempt_that_starts_late_warns_once_for_the_nearest_mark(tmp_path: Path) -> None:
    clock, events = _clock(tmp_path, tmp_path / "mirror", tmp_path)
    clock.tick(now=STARTED + CAP - 300)  # past all three marks
    clock.tick(now=STARTED + CAP - 200)
    (only,) = _warnings(events)
    assert only["detail"]["mark_min"] == 10 and only["detail"]["minutes_left"] == 5


def test_no_clock_without_a_notebook_session(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    clock = SessionClock({"env": {}}, JobRecorder(JobPaths(str(tmp_path / "job"), "j"), []))
    clock.tick(now=0.0)
    assert not clock.active and not (tmp_path / "job" / "events.jsonl").exists()

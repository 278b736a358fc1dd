"""`rgt up kaggle` → `rgt run` → time-limit kill → `rgt resume` (a new kernel version from the
previous output's checkpoints) → succeeded → `rgt pull` verifies → the gate passes; all
through the CLI against the fake API, which runs every pushed kernel as a local process."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import ok, rgt
from tests.kaggle.conftest import KEY, USER
from tests.kaggle.fake import FakeKaggle

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


def wait_for(job_id: str, *, label: str | None = None, state: str | None = None) -> Any:
    """Poll `rgt status JOB` until the job shows ``label`` or ``state``."""
    deadline = time.monotonic() + 60
    while True:
        (job,) = ok(rgt("status", job_id, "--json", "--full"))["jobs"]
        if (label and job["label"] == label) or (state and job["state"] == state):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.5)


def test_run_preempt_resume_pull_gate(kaggle: FakeKaggle, tmp_path: Path) -> None:
    kaggle.time_limit_s = 120.0
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copy(HERE / "train_steps.py", project / "train.py")
    up = ok(rgt("up", "kaggle", "--name", "kg", "--gpu", "T4x2", "--json"))
    assert up["backend"] == "kaggle"
    run = ok(rgt("run", "kg", "--probe-seconds", "1", "--json", "--", sys.executable,
                 "train.py", "8", "0.3", cwd=project))  # fmt: skip
    job_id = run["job_id"]
    first = kaggle.pushes[0]
    assert first["isPrivate"] is True and first["kernelType"] == "script"
    assert first["machineShape"] == "NvidiaTeslaT4" and first["kernelDataSources"] == []

    # The run-time limit strikes once the job has checkpointed a few steps (a loaded machine
    # may take seconds to import torch): the limit drops to what has already elapsed.
    _wait_file(kaggle.base, "ckpt-000000000003.json")
    kaggle.time_limit_s = 0.0
    stopped = wait_for(job_id, label="preempted")
    assert stopped["state"] == "running" and not stopped["agent_alive"], stopped
    assert stopped["liveness"] == "kaggle" and "rgt resume" in stopped["reason"]
    # `rgt watch` reads through the same interpret as `rgt status`: the API's word, not the
    # mirror's last document.
    watched = ok(rgt("watch", "kg", "--once", "--no-gpu", "--full", "--json"))
    (seen,) = [j for j in watched["jobs"] if j["job_id"] == job_id]
    assert (seen["state"], seen["label"]) == ("running", "preempted"), seen
    assert seen["liveness"] == "kaggle" and not seen["agent_alive"]

    kaggle.time_limit_s = 60.0  # the next version has time to finish
    resumed = rgt("resume", job_id, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    second = kaggle.pushes[1]
    assert second["slug"] == first["slug"] and second["kernelDataSources"] == [first["slug"]]

    wait_for(job_id, state="succeeded")
    assert len(kaggle.pushes) == 2
    mirror = Path(os.environ["RGT_HOME"]) / "kaggle" / "kg" / ".rgt" / "jobs" / job_id
    assert {p.name for p in mirror.glob("kaggle-v*.log")} == {"kaggle-v1.log", "kaggle-v2.log"}
    log = rgt("logs", job_id)  # the latest attempt's log, from the version's output
    assert log.returncode == 0 and "step 8" in log.stdout and "starting at step 0" not in log.stdout
    pulled = ok(rgt("pull", job_id, "--to", str(tmp_path / "pulled"), "--json"))
    assert pulled["ok"] is True, pulled
    result = json.loads(next((tmp_path / "pulled").rglob("result.json")).read_text())
    assert result["steps"] == 8 and result["started_at"] > 0  # resumed, not from zero
    assert result["total"] == sum(range(9))  # the state carried across the kill is exact
    gate = rgt("down", "kg", "--check", "--json")  # pulled and verified: only a human is missing
    assert gate.returncode == 3 and '"only_approval_missing": true' in gate.stdout
    assert "everything is pulled and verified" in gate.stderr

    _no_key_anywhere(kaggle, Path(os.environ["RGT_HOME"]))


def _wait_file(base: Path, name: str) -> None:
    deadline = time.monotonic() + 60
    while not any(base.rglob(name)):
        assert time.monotonic() < deadline, f"no {name} under {base}"
        time.sleep(0.2)


def _no_key_anywhere(kaggle: FakeKaggle, home: Path) -> None:
    """The planted key is in no file rgt wrote, no request body or path, no kernel's text."""
    for path in home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert not any(KEY in line for line in kaggle.received)
    assert all(KEY not in push["text"] for push in kaggle.pushes)
    for path in kaggle.base.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert USER in kaggle.pushes[0]["slug"]

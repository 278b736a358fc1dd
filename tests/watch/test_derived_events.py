"""Events only an outside reader can raise: a lost agent (then `rgt resume`), a finished job
whose artifacts were never pulled."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import rgt, started

LONG = (
    "import time\nfor i in range(600):\n    print('step', i, 'loss', 1.0, flush=True)\n"
    "    time.sleep(0.1)\n"
)
QUICK = (
    "import os, pathlib\npathlib.Path(os.environ['RGT_OUTPUT_DIR'], 'r.json').write_text('[1]')\n"
)


def launch(tmp_path: Path, script: str) -> str:
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    (project / "job.py").write_text(script)
    if rgt("status", "box", "--json").returncode != 0:
        assert rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root")).returncode == 0
    proc = rgt(
        "run", "box", "--probe-seconds", "1", "--json", "--", sys.executable, "job.py", cwd=project
    )
    assert proc.returncode == 0, proc.stderr
    job_id: str = json.loads(proc.stdout)["job_id"]
    started(tmp_path / "root" / ".rgt" / "jobs" / job_id / "status.json")
    return job_id


def derived(job_id: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    proc = rgt("watch", "--once", "--json", "--full", "--no-gpu", env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return [e for e in doc["events"] if e.get("derived") and e["job_id"] == job_id]


@pytest.mark.slow
def test_lost_agent_is_reported_and_resumed(tmp_path: Path) -> None:
    job_id = launch(tmp_path, LONG)
    job_dir = tmp_path / "root" / ".rgt" / "jobs" / job_id
    agent_pid = int((job_dir / "agent.pid").read_text())
    os.kill(agent_pid, signal.SIGKILL)
    time.sleep(0.5)
    kinds = [e["kind"] for e in derived(job_id)]
    assert kinds == ["heartbeat_lost"]
    resumed = rgt("resume", job_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["resumed"] is True
    deadline = time.monotonic() + 60
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = json.loads(rgt("status", job_id, "--json").stdout)["jobs"][0]
        if status["attempt"] == 2 and status["state"] == "running":
            break
        time.sleep(0.3)
    assert status["attempt"] == 2 and status["state"] == "running", status
    assert derived(job_id) == []
    again = json.loads(rgt("resume", job_id, "--json").stdout)
    assert again["resumed"] is False  # one agent per job, never two
    assert rgt("cancel", job_id, "--json").returncode == 0


@pytest.mark.slow
def test_finished_but_not_pulled(tmp_path: Path) -> None:
    job_id = launch(tmp_path, QUICK)
    assert rgt("watch", job_id, "--json").returncode == 0
    now = {"RGT_WATCH_NOT_PULLED_H": "0"}
    assert [e["kind"] for e in derived(job_id, now)] == ["not_pulled"]
    assert derived(job_id) == []  # the default threshold is hours, not seconds
    assert rgt("pull", job_id, "--to", str(tmp_path / "pulled")).returncode == 0
    assert derived(job_id, now) == []

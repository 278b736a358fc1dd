"""The whole agent zipapp on a real Python 3.8 (the oldest a rented image may have): a job that
succeeds with a verified manifest, and an external kill -9 that is retried and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rgt import _fs
from rgt.agent.build import build_agent
from rgt.agent.paths import RootPaths
from rgt.models import JobSpec, RetryPolicy

PY38 = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))

JOB = """
import os, pathlib, time
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
marker = out / "attempts.txt"
marker.write_text(marker.read_text() + os.environ["RGT_ATTEMPT"] if marker.exists() else
                  os.environ["RGT_ATTEMPT"])
time.sleep(float(os.environ.get("SLEEP", "0")))
(out / "result.json").write_text('{"ok": true}')
"""

pytestmark = pytest.mark.skipif(not PY38, reason="no Python 3.8 interpreter on this machine")


def _job(tmp_path: Path, job_id: str, sleep: float) -> tuple[Path, Path]:
    root = RootPaths(str(tmp_path / "durable"))
    paths = root.job(job_id)
    snapshot = Path(root.snapshot("snap"))
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "job.py").write_text(JOB)
    Path(paths.root).mkdir(parents=True)
    os.symlink("../../code/snap", paths.code)
    spec = JobSpec(
        job_id=job_id,
        machine="m",
        command=(str(PY38[-1]), "job.py"),
        env={"SLEEP": str(sleep)},
        retry=RetryPolicy(max_retries=2, backoff_s=0.1),
    )
    _fs.atomic_write_json(paths.spec, spec.to_json())
    return Path(paths.root), build_agent(tmp_path / "agent")


def _run(agent: Path, job_dir: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["RGT_AGENT_HEARTBEAT_S"] = "0.2"
    return subprocess.Popen(
        [str(PY38[-1]), "-I", str(agent), "run", str(job_dir)], env=env, start_new_session=True
    )


def test_success_on_python38(tmp_path: Path) -> None:
    job_dir, agent = _job(tmp_path, "py38-ok", 0)
    assert _run(agent, job_dir).wait(timeout=120) == 0, (job_dir / "agent.log").read_text()
    status = json.loads((job_dir / "status.json").read_text())
    assert status["state"] == "succeeded" and (job_dir / "DONE").is_file()
    manifest = json.loads((job_dir / "manifest.json").read_text())
    assert "outputs/result.json" in [f["path"] for f in manifest["files"]]


@pytest.mark.slow  # > 1 s on two cores
def test_external_kill_is_retried_on_python38(tmp_path: Path) -> None:
    job_dir, agent = _job(tmp_path, "py38-kill", 3)
    proc = _run(agent, job_dir)
    deadline = time.monotonic() + 60
    pid = None
    while pid is None and time.monotonic() < deadline:
        try:
            status = json.loads((job_dir / "status.json").read_text())
            started = (job_dir / "outputs" / "attempts.txt").exists()  # the job is past startup
            pid = status.get("pid") if status.get("state") == "running" and started else None
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    assert pid, (job_dir / "agent.log").read_text()
    os.kill(int(pid), signal.SIGKILL)
    assert proc.wait(timeout=120) == 0, (job_dir / "agent.log").read_text()
    status = json.loads((job_dir / "status.json").read_text())
    assert status["state"] == "succeeded" and status["attempt"] == 2
    assert status["label"] is None  # succeeded: the first attempt's label is in its event
    assert (job_dir / "outputs" / "attempts.txt").read_text() == "12"

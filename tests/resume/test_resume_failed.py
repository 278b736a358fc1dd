"""`rgt resume JOB` on a failed job, through the real CLI, agent and files (local backend):
a new attempt from the newest valid checkpoint with the job's resume form, or exit 1 with
the reason; never "the job has ended (failed)" with exit 0."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.clirun import ok, rgt

pytestmark = pytest.mark.slow

# Writes out/step_1..3 (accelerate's folder names), then hits a bug; resumed with
# --from DIR it continues from that step and ends.
SCRIPT = """
import os, sys
resume = sys.argv[sys.argv.index("--from") + 1] if "--from" in sys.argv else None
start = int(resume.rsplit("_", 1)[1]) if resume else 0
print("starting at step %d" % start, flush=True)
for step in range(start + 1, start + 4):
    os.makedirs("out/step_%d" % step, exist_ok=True)
    open("out/step_%d/model.bin" % step, "w").write(str(step))
if resume is None and "--no-save" not in sys.argv:
    raise ValueError("a bug after step 3")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ok(rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root"), "--json"))
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(SCRIPT)
    (proj / "bug.py").write_text("raise ValueError('a bug before any checkpoint')\n")
    return proj


def _failed(project: Path, script: str) -> str:
    launched = rgt(
        "run", "box", "--probe-seconds", "30", "--ckpt", "out/step_*",
        "--resume-with", "--from {ckpt}", "--json", "--", sys.executable, script, cwd=project,
    )  # fmt: skip
    doc = json.loads(launched.stdout)
    assert doc["state"] == "failed", doc
    return str(doc["job_id"])


def test_resume_restarts_a_failed_job_from_its_newest_checkpoint(project: Path) -> None:
    job_id = _failed(project, "train.py")
    proc = rgt("resume", job_id, "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["resumed"] is True, doc
    assert "has ended" not in doc["reason"]
    assert rgt("watch", job_id, "--json").returncode == 0
    status = json.loads(rgt("status", job_id, "--json").stdout)["jobs"][0]
    assert status["state"] == "succeeded" and status["attempt"] == 2
    events_file = project.parent / "root" / ".rgt" / "jobs" / job_id / "events.jsonl"
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    said = [e["detail"]["said"] for e in events if e["kind"] == "resuming"]
    assert len(said) == 1 and said[0].startswith("resumed from step 3 (checkpoint "), said
    log = rgt("logs", job_id, "--attempt", "2").stdout
    assert said[0] in log and "starting at step 3" in log


def test_resume_of_a_failed_job_without_a_checkpoint_exits_1_with_the_reason(
    project: Path,
) -> None:
    job_id = _failed(project, "bug.py")
    proc = rgt("resume", job_id, "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["resumed"] is False, doc
    assert "cannot resume the failed job" in doc["reason"] and "out/step_*" in doc["reason"]
    status = json.loads(rgt("status", job_id, "--json").stdout)["jobs"][0]
    assert status["state"] == "failed" and status["attempt"] == 1

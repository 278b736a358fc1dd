"""Autostop on the local backend, with a stop action that records that it ran.

The stop fires only after every job ended and every artifact re-verified on storage that
survives the stop; never for a missing or changed artifact, never under a running job; an arming
fires once, across kill -9 of the watcher and its restart."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.autostop.helpers import (
    arm,
    events,
    files,
    kill9,
    kinds,
    project,
    recorder,
    run_job,
    state,
    stops,
    wait_ended,
    wait_for,
)
from tests.clirun import ok, rgt

WRITE = "import time, sys\ntime.sleep(float(sys.argv[1]))\nopen('out.txt', 'w').write('result')\n"


@pytest.fixture
def box(tmp_path: Path) -> tuple[str, Path, Path]:
    root, record = tmp_path / "root", tmp_path / "STOPPED"
    up = rgt("up", "local", "--name", "box", "--root", str(root), "--self-stop", recorder(record))
    assert up.returncode == 0, up.stderr
    return "box", root, record


def _finished_job(name: str, tmp_path: Path) -> str:
    job = run_job(name, project(tmp_path, WRITE), "python3", "train.py", "0")
    assert wait_ended(name, job) == "succeeded"
    return job


@pytest.mark.slow
def test_fires_once_after_the_jobs_ended_and_their_artifacts_verify(
    box: tuple[str, Path, Path], tmp_path: Path
) -> None:
    name, root, record = box
    _finished_job(name, tmp_path)
    code, seen = arm(name, "--after-jobs")
    assert code == 0, seen
    assert wait_for(lambda: stops(record), 30), kinds(root)
    assert kinds(root)[-2:] == ["autostop_fired", "autostop_stop_ran"]
    # At most once: a watcher started again (by hand, as patrol would) does not fire again.
    agent = sorted((root / ".rgt" / "agent").glob("agent-*.pyz"))[-1]
    argv = [sys.executable, str(agent), "autostop", str(root / ".rgt"), "--once"]
    subprocess.run(argv, check=True, timeout=60)
    ok(rgt("watch", "--once", "--json"))  # patrol: its hook must not start a second firing
    time.sleep(2)
    assert len(stops(record)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["missing", "changed", "unverified"])
def test_a_missing_or_changed_artifact_blocks_the_stop(
    box: tuple[str, Path, Path], tmp_path: Path, damage: str
) -> None:
    name, root, record = box
    job = _finished_job(name, tmp_path)
    artifact = root / ".rgt" / "jobs" / job / "work" / "out.txt"
    assert artifact.read_text() == "result"
    if damage == "missing":
        artifact.unlink()
    elif damage == "changed":
        artifact.write_text("tampered")
    else:  # no manifest: nothing says what the job's results are, nor that they were re-read
        (root / ".rgt" / "jobs" / job / "manifest.json").unlink()
    code, seen = arm(name)
    assert code == 0, seen
    blocked = wait_for(lambda: [e for e in events(root) if e["kind"] == "autostop_blocked"], 30)
    assert blocked, kinds(root)
    words = {
        "missing": "out.txt is missing",
        "changed": "out.txt no longer matches",
        "unverified": "no readable manifest.json: its artifacts were never verified",
    }
    assert words[damage] in blocked[0]["detail"]["reason"]
    assert state(root)["last_refusal"]["reason"] == blocked[0]["detail"]["reason"]
    time.sleep(3)
    assert stops(record) == [] and kinds(root).count("autostop_blocked") == 1  # once per reason
    shown = ok(rgt("status", "--json"))["autostop"]["box"]  # visible: policy and the reason
    assert shown["not_fired_because"] == blocked[0]["detail"]["reason"]
    assert shown["when"] == ["every job ended"] and shown["watcher_alive"] is True
    assert "not fired: job" in rgt("status").stdout


@pytest.mark.slow
def test_not_while_a_job_runs_and_survives_kill9_of_the_watcher(
    box: tuple[str, Path, Path], tmp_path: Path
) -> None:
    name, root, record = box
    job = run_job(name, project(tmp_path, WRITE), "python3", "train.py", "12")
    code, seen = arm(name, "--after-jobs")
    assert code == 0, seen
    first = wait_for(lambda: state(root).get("watcher_pid"), 20)
    assert first
    time.sleep(2)
    assert stops(record) == []  # the job still runs
    kill9(int(first))
    report = ok(rgt("watch", "--once", "--json"))  # patrol's hook starts a new watcher
    assert report["machines"][0]["autostop"]["armed"] is True
    second = wait_for(lambda: (p := state(root).get("watcher_pid")) != first and p, 20)
    assert second, state(root)
    assert wait_ended(name, job) == "succeeded"
    assert wait_for(lambda: stops(record), 30), kinds(root)
    time.sleep(2)
    assert len(stops(record)) == 1 and kinds(root).count("autostop_fired") == 1


@pytest.mark.slow
def test_disarmed_it_never_fires(box: tuple[str, Path, Path], tmp_path: Path) -> None:
    name, root, record = box
    job = run_job(name, project(tmp_path, WRITE), "python3", "train.py", "6")
    assert arm(name)[0] == 0
    code, seen = arm(name, "off")
    assert code == 0, seen
    assert not Path(files(root).policy).exists()
    assert wait_ended(name, job) == "succeeded"
    time.sleep(3)
    assert stops(record) == []
    status = json.loads(rgt("watch", "--once", "--json").stdout)
    assert "autostop" not in status["machines"][0]  # the compact form shows only an armed one


@pytest.mark.slow
def test_kill9_of_the_job_agent_then_resume_fires_once_after_the_end(
    box: tuple[str, Path, Path], tmp_path: Path
) -> None:
    name, root, record = box
    job = run_job(name, project(tmp_path, WRITE), "python3", "train.py", "6")
    assert arm(name, "--after-jobs")[0] == 0
    agent = int((root / ".rgt" / "jobs" / job / "agent.pid").read_text())
    kill9(agent)  # the job's agent dies: its job is neither running supervised nor ended
    time.sleep(8)  # the job's own process would have ended by now
    assert stops(record) == []  # a job without a recorded end is never "ended"
    assert ok(rgt("resume", job, "--json"))  # a new agent: ends the orphan, runs attempt 2
    assert wait_ended(name, job) == "succeeded"
    assert wait_for(lambda: stops(record), 30), kinds(root)
    time.sleep(2)
    assert len(stops(record)) == 1

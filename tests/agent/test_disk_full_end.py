"""A disk that stays full never leaves a job "running" for ever: the agent survives every write
it cannot make (agent.lock, agent.log, agent.pid, status, events, the attempt's log, manifest,
DONE) and, when the job cannot be finished, fails it as ``disk_full``. Real tmpfs mounts
(bytes or inodes exhausted), real agents."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from tests import clirun
from tests.agent.conftest import Job

FILL_AND_EXIT = """
import os, pathlib
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
with open(out / "filler.bin", "wb") as handle:
    try:
        while True:
            handle.write(b"x" * 65536)
            handle.flush()
    except OSError:
        pass
"""
INODES_AND_EXIT = """
import os, pathlib
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
try:
    for i in range(100000):
        (out / ("f%06d" % i)).touch()
except OSError:
    pass
"""
QUICK = "print('done')\n"
SHORT_WAIT = {"RGT_AGENT_TERMINAL_WAIT_S": "1.5"}


def fill(directory: Path) -> None:
    """Take every byte, then every inode, of the filesystem under ``directory``."""
    # Unbuffered: a buffered file holding the bytes a write could not place would raise
    # ENOSPC again when it is closed, outside the suppress.
    with open(directory / "filler.bin", "wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"x" * 65536)
    with contextlib.suppress(OSError):
        for i in range(100000):
            (directory / f"inode-{i}").touch()


@pytest.mark.slow  # > 1 s on two cores
def test_disk_full_when_the_job_ends_fails_it_as_disk_full(
    make_job: Callable[..., Job], small_tmpfs: Callable[[str, int], Path]
) -> None:
    job = make_job(durable=small_tmpfs("2m", 1024)).write(FILL_AND_EXIT)
    job.start(**SHORT_WAIT)
    assert job.finish(timeout=60) == 1, job.agent_log()
    status = job.status()
    assert status["state"] == "failed" and status["label"] == "disk_full", status
    assert "the disk refused manifest.json or DONE" in status["reason"]
    assert "No space left on device" in status["reason"]
    assert not (job.dir / "DONE").exists() and not (job.dir / "manifest.json").exists()


@pytest.mark.slow  # > 1 s on two cores
def test_inodes_exhausted_when_the_job_ends_fails_it_as_disk_full(
    make_job: Callable[..., Job], small_tmpfs: Callable[[str, int], Path]
) -> None:
    job = make_job(durable=small_tmpfs("16m", 400)).write(INODES_AND_EXIT)
    job.start(**SHORT_WAIT)
    assert job.finish(timeout=60) == 1, job.agent_log()
    status = job.status()  # no inode for a temp file: landed by an in-place overwrite
    assert status["state"] == "failed" and status["label"] == "disk_full", status
    (failed,) = job.events("failed")  # events.jsonl still had blocks to grow into
    assert failed["detail"]["label"] == "disk_full"


@pytest.mark.slow  # > 1 s on two cores
def test_agent_started_on_a_full_disk_ends_without_a_crash(
    make_job: Callable[..., Job], small_tmpfs: Callable[[str, int], Path]
) -> None:
    """agent.log, agent.pid, status.json, events.jsonl and the attempt's log all fail."""
    disk = small_tmpfs("2m", 256)
    job = make_job(durable=disk).write(QUICK)
    (job.dir / "agent.lock").touch()  # a previous agent of this job created it
    fill(disk)
    proc = job.start(**SHORT_WAIT)
    assert job.finish(timeout=60) == 1
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()
    for name in ("filler.bin", *(p.name for p in disk.glob("inode-*"))):
        (disk / name).unlink()
    from rgt.agent import jobfiles

    doc = json.loads(job.agent_cmd("status").stdout)
    assert doc["status_file"] == "missing" and doc["agent_alive"] is False
    lost = jobfiles.heartbeat_lost(doc, doc["now"], limit_s=0.0)
    assert lost is not None and "no agent ever wrote status.json" in lost["why"]
    job.start()  # space is free again: the next agent runs the job to its end
    assert job.finish(timeout=60) == 0, job.agent_log()
    assert job.status()["state"] == "succeeded"


def test_no_inode_for_the_lock_is_refused_in_words(
    make_job: Callable[..., Job], small_tmpfs: Callable[[str, int], Path]
) -> None:
    disk = small_tmpfs("2m", 256)
    job = make_job(durable=disk).write(QUICK)
    fill(disk)
    proc = job.start()
    assert job.finish(timeout=30) == 1
    assert proc.stderr is not None
    said = proc.stderr.read().decode()
    assert "cannot create" in said and "agent.lock" in said and "Traceback" not in said


@pytest.mark.slow
def test_resume_on_a_full_disk_tells_the_truth(
    tmp_path: Path, small_tmpfs: Callable[[str, int], Path]
) -> None:
    disk = small_tmpfs("8m", 512)
    env = dict(SHORT_WAIT, RGT_AGENT_CANCEL_GRACE_S="2", RGT_RESUME_WAIT_S="30")
    from tests.watch.test_derived_events import LONG

    rgt = partial(clirun.rgt, env=env, cwd=tmp_path)

    assert rgt("up", "local", "--name", "box", "--root", str(disk)).returncode == 0
    (tmp_path / "job.py").write_text(LONG)
    run = rgt("run", "box", "--probe-seconds", "1", "--json", "--", sys.executable, "job.py")
    assert run.returncode == 0, run.stderr
    job_id = json.loads(run.stdout)["job_id"]
    job_dir = disk / ".rgt" / "jobs" / job_id
    assert clirun.started(job_dir / "status.json")["state"] == "running"
    os.kill(int((job_dir / "agent.pid").read_text()), 9)
    fill(disk)
    resumed = rgt("resume", job_id, "--json")
    doc = json.loads(resumed.stdout)
    assert resumed.returncode == 1, doc  # not "agent started again"
    assert doc["ok"] is False and doc["state"] == "failed" and doc["label"] == "disk_full", doc
    assert "ended the job: failed (disk_full)" in doc["reason"]
    after = json.loads(rgt("status", job_id, "--json", "--full").stdout)["jobs"][0]
    assert after["state"] == "failed" and after["heartbeat_lost"] is None

"""`rgt triage JOB` on a launched job: the first failing rank, the agent's evidence, the hang.

Through the real CLI (`rgt up local`, `rgt run`, `rgt triage`, `rgt cancel`), real torchrun
(torch 2.13.0 CPU) with two gloo ranks:

* rank 1 is SIGKILLed with no retry budget left (``--retries 0``): the merged log alone says
  ``host_oom`` (torchrun's "exitcode -9"); ``rgt triage JOB`` says what the agent found, that
  rank 1 was killed from outside while the cgroup OOM counter did not move (``preempted``),
  keeping the log's own reading as ``log_label``;
* rank 1 sleeps inside a step while rank 0 waits in ``all_reduce``: ``rgt triage JOB`` of the
  running job shows the agent's hang dump, naming rank 1.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from rgt.agent.paths import RootPaths
from tests.clirun import rgt

JOB = """
import os, sys, time
import torch, torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
for step in range(40):
    value = torch.ones(1)
    dist.all_reduce(value)
    print("rank %d step %d" % (rank, step), flush=True)
    if rank == 1 and step == 3:
        open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "rank1-pid"), "w").write(str(os.getpid()))
        if sys.argv[1] == "hang":
            time.sleep(600)
    time.sleep(0.3)
"""


@pytest.fixture
def box(tmp_path: Path) -> Path:
    root = tmp_path / "root dir"
    assert rgt("up", "local", "--name", "box", "--root", str(root)).returncode == 0
    (tmp_path / "train.py").write_text(JOB)
    return root


def _run(tmp_path: Path, mode: str, *options: str) -> str:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    launcher += ["--nproc_per_node=2", "train.py", mode]
    options += ("--probe-seconds", "1", "--json", "--")
    proc = rgt("run", "box", *options, *launcher, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["job_id"])


def _wait_file(path: Path, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)
    return path


@pytest.mark.slow
def test_triage_of_a_killed_rank_shows_the_rank_and_the_counter(box: Path, tmp_path: Path) -> None:
    job_id = _run(tmp_path, "kill", "--retries", "0")
    outputs = Path(RootPaths(str(box)).job(job_id).output_dir)
    pid = int(_wait_file(outputs / "rank1-pid").read_text())
    os.kill(pid, signal.SIGKILL)
    watched = rgt("watch", job_id, "--interval", "0.3", "--json", timeout=120)
    assert json.loads(watched.stdout)["state"] == "failed", watched.stdout

    doc = json.loads(rgt("triage", job_id, "--json").stdout)
    assert (doc["label"], doc["retryable"], doc["log_label"]) == ("preempted", True, "host_oom")
    first = doc["first_failing_rank"]
    assert (first["rank"], first["pid"], first["signal"]) == (1, pid, "SIGKILL"), doc
    assert doc["evidence"][0].startswith("torchrun: first failing rank 1"), doc
    assert doc["evidence"][1].startswith(("cgroup oom_kill unchanged", "no cgroup")), doc
    assert doc["rank_logs"] == "logs/attempt-1"
    assert doc["explain_entry"] == "rgt explain preempted"
    human = rgt("triage", job_id).stdout
    assert f"first failing rank 1 (pid {pid}): SIGKILL" in human, human


@pytest.mark.slow
def test_triage_of_a_hung_job_names_the_stuck_rank(box: Path, tmp_path: Path) -> None:
    job_id = _run(tmp_path, "hang", "--env", "RGT_WATCH_HANG_S=4")
    try:
        deadline = time.monotonic() + 120
        while True:
            doc = json.loads(rgt("triage", job_id, "--json").stdout)
            # On a loaded machine the launch itself can be silent for longer than the hang
            # limit, and that silence is dumped too (ranks inside init_process_group): wait
            # for the dump of the hang this job makes, at step 3.
            if doc.get("hang") and doc["hang"].get("stuck") == [1]:
                break
            assert time.monotonic() < deadline, doc
            time.sleep(1)
    finally:
        rgt("cancel", job_id, "--json")
    assert doc["state"] == "running" and doc["failure"] is False
    assert (doc["hang"]["stuck"], doc["hang"]["in_collective"]) == ([1], [0]), doc
    assert doc["hang"]["next"].startswith("rank 1 at <module> (train.py:14)"), doc

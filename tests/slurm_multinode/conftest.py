"""A two-node Slurm (``tests/slurm_nodes.py``) registered with ``rgt up slurm`` as ``cluster``.

Its ``SLURM_CONF`` is set for the test only (the CLI children and every job inherit it:
``sbatch`` exports the submitter's environment), with short agent clocks, and the venv's
``bin`` first on ``PATH`` so a job's bare ``torchrun`` is the one with torch. The durable root
is under the test's temp dir, which both nodes see (one filesystem, two network namespaces):
the shared filesystem every node of a real cluster mounts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import ok, rgt
from tests.slurm_nodes import SlurmNodes

ENDED = ("succeeded", "failed", "cancelled")


@dataclass
class Cluster:
    nodes: SlurmNodes
    root: Path  # the machine's durable root
    project: Path  # the code `rgt run` pushes

    def job_dir(self, job_id: str) -> Path:
        return self.root / ".rgt" / "jobs" / job_id

    def events(self, job_id: str) -> list[dict[str, Any]]:
        raw = (self.job_dir(job_id) / "events.jsonl").read_text()
        return [json.loads(line) for line in raw.splitlines() if line.strip()]


@pytest.fixture
def cluster(
    slurm_two_nodes: SlurmNodes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Cluster:
    monkeypatch.setenv("SLURM_CONF", str(slurm_two_nodes.conf))
    monkeypatch.setenv("RGT_AGENT_CANCEL_GRACE_S", "5")
    monkeypatch.setenv("RGT_AGENT_HEARTBEAT_S", "0.5")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    root, project = tmp_path / "root", tmp_path / "project"
    root.mkdir()
    project.mkdir()
    ok(rgt("up", "slurm", "--name", "cluster", "--root", str(root), "--json"))
    return Cluster(slurm_two_nodes, root, project)


def status(job_id: str) -> dict[str, Any]:
    doc = ok(rgt("status", job_id, "--json", "--full"))
    (job,) = [j for j in doc["jobs"] if j["job_id"] == job_id]
    return job


def wait_ended(job_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = status(job_id)
        if job["state"] in ENDED or time.monotonic() > deadline:
            return job
        time.sleep(1)

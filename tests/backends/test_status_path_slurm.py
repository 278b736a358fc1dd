"""`rgt status` (refresh), `rgt watch` (patrol), a sweep's cells and the teardown gate agree on
a Slurm job's state because they read one path, and on Slurm the scheduler decides liveness.

The cluster is the real single-node test Slurm. The multi-node case is simulated honestly: the
host that answers runs every reader of the job's files (``agent status``, ``agent patrol``,
``agent cancel``) in its own PID namespace, as a login node that shares the filesystem but not
the compute node's processes. There the agent's pid + lock check fails while Slurm says the
job is RUNNING: no view may call that heartbeat_lost, and `resume` must not start a second
agent (a second allocation).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgt.backends import backend_for
from rgt.backends.slurm import SlurmBackend
from rgt.jobs.launch import LaunchOptions, launch, refresh, resume
from rgt.lifecycle import gate
from rgt.models import JobState, Machine
from rgt.state.store import Store, utcnow
from rgt.status import cache as status_cache
from rgt.sweep import _state as _sweep_state
from rgt.watch.patrol import PatrolOptions, patrol
from tests.backends.conformance import status_doc
from tests.slurm import SlurmCluster

LOGIN_NODE = """#!/bin/sh
# Readers of the job's files run where the compute node's processes are invisible.
for arg; do [ "$arg" = run ] && exec {py} "$@"; done
exec unshare --pid --fork --mount-proc {py} "$@"
"""
JOB = "import time\nfor i in range(600):\n    print('step', i, flush=True)\n    time.sleep(0.2)\n"


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    monkeypatch.setenv("RGT_AGENT_HEARTBEAT_S", "0.5")  # jobs inherit the submitter's env
    monkeypatch.setenv("RGT_AGENT_CANCEL_GRACE_S", "3")
    return slurm_cluster


@pytest.fixture
def machine(cluster: SlurmCluster, tmp_path: Path) -> Iterator[str]:
    """A Slurm machine whose answering host is a "login node" (see the module doc)."""
    wrapper = tmp_path / "login-python"
    wrapper.write_text(LOGIN_NODE.format(py=sys.executable))
    wrapper.chmod(0o755)
    root = tmp_path / "shared fs"
    root.mkdir()
    connection = {"slurm": {"grace_s": 30}, "python": str(wrapper)}
    machine = Machine(
        name="cluster",
        backend="slurm",
        profile="slurm",
        connection=connection,
        durable_root=str(root),
        registered=utcnow(),
    )
    Store.open().add_machine(machine)
    yield "cluster"
    for job in Store.open().jobs("cluster"):
        cluster.run("scancel", "--jobname", f"rgt-{job.job_id}", check=False)


def start(store: Store, tmp_path: Path, name: str) -> str:
    project = tmp_path / name
    project.mkdir()
    (project / "job.py").write_text(JOB)
    command = ("python3", "job.py")
    return launch(store, "cluster", LaunchOptions(command=command, cwd=project)).job_id


def wait_running(backend: SlurmBackend, job_id: str, timeout: float = 120) -> Path:
    status = Path(backend.job_paths(job_id).status)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if status.exists() and json.loads(status.read_text()).get("state") == "running":
            return status
        time.sleep(0.3)
    raise AssertionError(f"{job_id} never ran: {status_doc(backend, job_id)}")


def our_slurm_jobs(cluster: SlurmCluster, job_id: str) -> list[str]:
    out = cluster.run("squeue", "-h", "--name", f"rgt-{job_id}", "-o", "%i %T")
    return out.split("\n")[:-1]


@pytest.mark.slow
def test_views_agree_and_slurm_decides_liveness(
    machine: str, cluster: SlurmCluster, tmp_path: Path
) -> None:
    store = Store.open()
    job_id = start(store, tmp_path, "proj")
    backend = backend_for(store, machine)
    assert isinstance(backend, SlurmBackend)
    wait_running(backend, job_id)
    time.sleep(2 * 0.5 + 1)  # a few heartbeats

    # The simulation bites: the agent's own check, from the answering host, says "dead".
    assert backend.agent_call("status", job_id)["agent_alive"] is False
    shown = refresh(store, job_id)
    assert (shown["state"], shown["agent_alive"], shown["liveness"]) == ("running", True, "slurm")
    assert shown["heartbeat_lost"] is None and shown["alerts"] == []

    watched = patrol(store, job_id, PatrolOptions(gpu=False))["jobs"]
    assert [(j["state"], j["alerts"]) for j in watched] == [("running", [])]
    record = store.job(job_id)
    swept = _sweep_state.read_machine(store, machine, [record])
    assert not isinstance(swept, str)
    view = _sweep_state._job_view(store, record, swept[job_id], unreachable=False)
    verdict = gate.evaluate(store, backend)
    assert [(r["state"], r["ended"]) for r in verdict.jobs] == [("running", False)]
    assert view.state == "running" and store.job(job_id).state == JobState.RUNNING

    before = our_slurm_jobs(cluster, job_id)
    answer = resume(store, job_id)
    assert answer["resumed"] is False and "slurm says so" in answer["reason"]
    assert our_slurm_jobs(cluster, job_id) == before and len(before) == 1  # no second agent


def test_a_held_job_waits_without_heartbeat_lost(
    machine: str, cluster: SlurmCluster, tmp_path: Path
) -> None:
    store = Store.open()
    cluster.run("scontrol", "update", "PartitionName=debug", "State=DOWN")
    try:
        job_id = start(store, tmp_path, "held")
        backend = backend_for(store, machine)
        assert isinstance(backend, SlurmBackend)
        status = status_cache.observe(store, backend, [store.job(job_id)])[job_id]
        assert (status.state, status.waiting, status.agent_alive) == (JobState.QUEUED, True, False)
        shown = refresh(store, job_id)
        assert shown["heartbeat_lost"] is None
        assert resume(store, job_id)["reason"].startswith("it waits in the queue")
        assert len(our_slurm_jobs(cluster, job_id)) == 1
    finally:
        cluster.run("scontrol", "update", "PartitionName=debug", "State=UP")

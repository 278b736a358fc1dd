"""On Kubernetes the API server decides whether a job lives, on every read path.

The agent on the claim is asked through rgt's files pod, whose pid check can never see a
job's processes (they run in the job's own pod). So the one read, however it is asked —
for the jobs of `rgt status`, with events for `rgt watch`, for every job dir (the teardown
gate's roster) — and `rgt adopt` recording the job must all take the API's word. The fake
API server loses the node under a running job: the API says the pod Failed while its
processes run on, and the agent's files still say running — the case where a read that
trusted the agent would call a dead job alive."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("kubernetes", reason="pip install 'remote-gpu-trainer[kubernetes]'")

from rgt.backends.base import Backend
from rgt.errors import NotSupportedError
from rgt.jobs.adopt import adopt
from rgt.models import JobSpec, JobState
from rgt.state.store import Store, utcnow
from rgt.status.read import read
from rgt.transport.snapshot import take_snapshot
from tests.backends.k8s_fake import FakeApi, k8s_api  # noqa: F401  (the fixture)
from tests.backends.test_status_round_trips_k8s import kube


def submit_sleeper(backend: Backend, tmp_path: Path, job_id: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(120)\n")
    snapshot = take_snapshot(project)
    backend.push_snapshot(snapshot)
    spec = JobSpec(job_id=job_id, machine=backend.machine.name,
                   command=(backend.python, "job.py"), code_snapshot=snapshot.digest,
                   created=utcnow())  # fmt: skip
    backend.submit(spec)


def wait_running(backend: Backend, job_id: str) -> None:
    deadline = time.monotonic() + 60
    while backend.read_jobs([job_id]).statuses[job_id].state is not JobState.RUNNING:
        assert time.monotonic() < deadline, backend.read_jobs([job_id]).statuses[job_id]
        time.sleep(0.3)


@pytest.mark.slow
def test_a_pod_lost_with_its_node_is_failed_on_every_read_path(
    k8s_api: FakeApi,  # noqa: F811
    tmp_path: Path,
) -> None:
    backend = kube(k8s_api, tmp_path)
    submit_sleeper(backend, tmp_path, "k8s-lost")
    wait_running(backend, "k8s-lost")
    name = next(iter(k8s_api.cluster.jobs))
    k8s_api.cluster.lose_node(name)

    # The agent's own word, read on the claim: still running (its process lives on here).
    assert backend.read_jobs().agent_docs()["k8s-lost"]["state"] == "running"

    by_status = read(backend, ["k8s-lost"]).job("k8s-lost")  # `rgt status`, a sweep
    by_watch = read(backend, events=8).job("k8s-lost")  # `rgt watch`
    by_gate = read(backend).job("k8s-lost")  # the gate's roster: every job dir
    for seen in (by_status, by_watch, by_gate):
        assert seen.state is JobState.FAILED, seen
        assert seen.liveness == "kubernetes" and not seen.agent_alive
        assert seen.extra["k8s"]["state"] == "failed"
        assert "BackoffLimitExceeded" in (seen.reason or "")

    # `rgt adopt` (the job was launched from another RGT_HOME: this store never saw it)
    # records the API's word too, through the same cache writer as every read.
    adopted = adopt(Store.open(), backend.machine.name, ["k8s-lost"])
    assert adopted["adopted"][0]["state"] == "failed"
    record = Store.open().job("k8s-lost")
    assert (record.state, record.label) == (JobState.FAILED, by_status.label)


def test_resume_on_kubernetes_names_a_command_that_exists(
    k8s_api: FakeApi,  # noqa: F811
    tmp_path: Path,
) -> None:
    backend = kube(k8s_api, tmp_path)
    with pytest.raises(NotSupportedError) as caught:
        backend.detach(["true"], job=backend.job_paths("j"))
    assert "rgt launch" not in caught.value.fix
    assert f"rgt run {backend.machine.name} -- " in caught.value.fix

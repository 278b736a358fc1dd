"""A status read of N Kubernetes jobs costs the same few round trips as one: one exec reads
every agent's files on the claim, one list of rgt's Jobs and one of their pods (by label).
Counted on the fake API server (``tests/backends/k8s_fake.py``), which records every request
the official client sends it; the pods run for real on this host."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

pytest.importorskip("kubernetes", reason="pip install 'remote-gpu-trainer[kubernetes]'")

from rgt.backends import get_backend
from rgt.backends._k8s_up import KubeUp, register_kubernetes
from rgt.backends.base import Backend
from rgt.backends.statusdoc import JobStatus
from rgt.models import JobSpec, JobState
from rgt.state.store import Store, utcnow
from rgt.transport.snapshot import take_snapshot
from tests.backends.k8s_fake import FakeApi, k8s_api  # noqa: F401  (the fixture)


def kube(k8s_api: FakeApi, tmp_path: Path) -> Backend:  # noqa: F811
    root = tmp_path / "claim"
    root.mkdir()
    up = KubeUp(context=k8s_api.context, namespace="ml", pvc="rgt-claim",
                kubeconfig=str(k8s_api.kubeconfig))  # fmt: skip
    return get_backend(register_kubernetes(Store.open(), "kube-rt", up, str(root)))


def submit_five(backend: Backend, tmp_path: Path) -> list[str]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text("print('done', flush=True)\n")
    snapshot = take_snapshot(project)
    backend.push_snapshot(snapshot)
    ids = [f"k8s-rt-{i}" for i in range(5)]
    for job_id in ids:
        spec = JobSpec(job_id=job_id, machine=backend.machine.name,
                       command=(backend.python, "job.py"), code_snapshot=snapshot.digest,
                       created=utcnow())  # fmt: skip
        backend.submit(spec)
    return ids


def wait_ended(backend: Backend, ids: Sequence[str]) -> dict[str, JobStatus]:
    deadline = time.monotonic() + 120
    while True:
        found = backend.read_jobs(ids).statuses
        # Ended by the agents' word and by the Jobs the API lists (the fake marks a Job
        # succeeded a moment after its pod's process exits).
        listed = all((s.extra.get("k8s") or {}).get("state") == "succeeded" for s in found.values())
        if (listed and all(s.has_ended for s in found.values())) or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


@pytest.mark.slow
def test_five_kubernetes_jobs_cost_three_round_trips(
    k8s_api: FakeApi,  # noqa: F811
    tmp_path: Path,
) -> None:
    backend = kube(k8s_api, tmp_path)
    ids = submit_five(backend, tmp_path)
    assert {s.state for s in wait_ended(backend, ids).values()} == {JobState.SUCCEEDED}

    before = len(k8s_api.cluster.requests)
    found = backend.read_jobs([*ids, "never-launched"]).statuses
    sent = k8s_api.cluster.requests[before:]
    assert len(sent) == 3, sent
    assert sum(1 for r in sent if r.endswith("/exec")) == 1
    assert {r.rsplit("/", 1)[-1] for r in sent} == {"exec", "jobs", "pods"}
    assert [found[j].state for j in ids] == [JobState.SUCCEEDED] * 5
    assert all(found[j].liveness == "kubernetes" and not found[j].agent_alive for j in ids)
    assert found["never-launched"].exists is False
    assert all(found[j].extra["k8s"]["state"] == "succeeded" for j in ids)  # the listed Jobs

"""Kubernetes multi-pod jobs (``--nodes N``: an Indexed Job and a headless Service), without a
cluster: the manifests against the official client's models, the init container's script run
by ``sh``, the group's state on odd API answers, and the whole path end to end through rgt's
backend against the local fake of the documented API (``tests/backends/k8s_fake.py``), whose
pods run on this host. NOT run on a live cluster."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes", reason="pip install 'remote-gpu-trainer[kubernetes]'")

from kubernetes.client.exceptions import ApiException

from rgt.backends._render.fit import K8S_MAX_PODS, fit
from rgt.backends._render.k8s import INDEX_ANNOTATION, render_job, render_service
from rgt.backends.base import Backend
from rgt.backends.kubernetes import KubernetesBackend, check_manifest, job_state, to_model
from rgt.cli import main
from rgt.errors import UsageError
from rgt.models import JobSpec, JobState, RetryPolicy
from rgt.resources import Resources
from rgt.state.store import Store, utcnow
from rgt.transport.snapshot import take_snapshot
from tests.backends.k8s_fake import FakeApi, k8s_api  # noqa: F401  (the fixture)
from tests.backends.test_kubernetes import _run_init, k8s_job, response

TWO = Resources(gpus="A100:4", cpus=8, nodes=2)


def test_an_indexed_job_and_a_headless_service_match_the_api_schema() -> None:
    job = k8s_job(resources=TWO)
    manifest, service = render_job(job), render_service(job)
    check_manifest(manifest)
    check_manifest(service)
    spec = manifest["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["backoffLimit"] == 2 and "backoffLimitPerIndex" not in spec
    assert spec["podReplacementPolicy"] == "Failed"
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == job.name
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"  # per pod
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
    assert service["spec"]["selector"] == {"rgt/job": job.name}
    assert service["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    for container in (*pod["initContainers"], *pod["containers"]):
        env = {e["name"]: e for e in container["env"]}
        assert env["RGT_NNODES"]["value"] == "2"
        assert env["RGT_MASTER_ADDR"]["value"] == f"{job.name}-0.{job.name}"
        assert env["RGT_MASTER_PORT"]["value"] == "29500"
        path = env["RGT_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert path == f"metadata.annotations['{INDEX_ANNOTATION}']"


def test_one_pod_renders_no_index_no_service_fields() -> None:
    spec = render_job(k8s_job())["spec"]
    assert not {"completionMode", "completions", "parallelism", "podReplacementPolicy"} & set(spec)
    pod = spec["template"]["spec"]
    assert "subdomain" not in pod and all("env" not in c for c in pod["containers"])


def test_init_script_gives_pod_r_its_own_dir_and_the_groups_checkpoints(
    tmp_path: Path, hostile_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = k8s_job(durable_root=str(hostile_dir), resources=TWO)
    for rank in ("0", "1"):
        monkeypatch.setenv("RGT_NODE_RANK", rank)
        _run_init(job, tmp_path, '{"v": 1}')
    job_dir = Path(job.job_dir)
    node = job_dir / "nodes" / "1"
    assert json.loads((node / "spec.json").read_text()) == {"v": 1}
    assert (node / "code" / "train.py").read_text() == "print('train')\n"
    assert (node / "ckpt").resolve() == (job_dir / "ckpt").resolve()
    assert (node / "logs").is_dir() and not (job_dir / "nodes" / "0").exists()
    script = render_job(job)["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert '[ "$RGT_NODE_RANK" = 0 ] || job="$job/nodes/$RGT_NODE_RANK"' in script


@pytest.mark.parametrize(
    ("resources", "said"),
    [
        (Resources(nodes=2, partition="gpu"), "--partition: partition, account and qos"),
        (Resources(nodes=2, qos="high"), "--qos: partition, account and qos"),
        (Resources(nodes=K8S_MAX_PODS + 1), f"over {K8S_MAX_PODS} pods"),
    ],
)
def test_kubernetes_refuses_before_anything_is_created(resources: Resources, said: str) -> None:
    from tests.test_resources import backend_of

    backend = backend_of("kubernetes", namespace="ml", pvc="c", image="python:3.12-slim")
    with pytest.raises(UsageError) as caught:
        fit(backend, resources)  # type: ignore[arg-type]
    assert said in caught.value.message and caught.value.fix
    assert fit(backend, Resources(nodes=K8S_MAX_PODS)) is not None  # type: ignore[arg-type]


def test_a_job_name_too_long_for_its_pod_hostnames_is_refused() -> None:
    with pytest.raises(UsageError, match="at most 63") as caught:
        render_job(k8s_job(job_id="x" * 58, resources=Resources(nodes=12)))
    assert "--job-id" in caught.value.fix


# ---- the group's state from the API's answers (hand-made in the documented shapes) ----


def indexed_job(conditions: list[dict[str, Any]] | None = None, nodes: int = 2) -> dict[str, Any]:
    spec = {"completionMode": "Indexed", "completions": nodes, "parallelism": nodes}
    return {"metadata": {"name": "rgt-j"}, "spec": spec,
            "status": {"active": nodes, "conditions": conditions or []}}  # fmt: skip


def pod(index: Any, phase: str, ended: dict[str, Any] | None = None) -> dict[str, Any]:
    notes = {INDEX_ANNOTATION: index} if index is not None else {}
    status: dict[str, Any] = {"phase": phase}
    if ended:
        status["containerStatuses"] = [{"name": "agent", "state": {"terminated": ended}}]
    return {"metadata": {"name": f"rgt-j-{index}", "annotations": notes}, "status": status}


OOM = {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-12-01T00:00:05Z"}
TERM = {"reason": "Error", "exitCode": 143, "finishedAt": "2026-12-01T00:00:09Z"}
FAILED = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
          "message": "Job has reached the specified backoff limit"}  # fmt: skip


def test_alive_only_while_every_index_runs() -> None:
    assert job_state(indexed_job(), [pod("0", "Running"), pod("1", "Running")])["state"] == (
        "running"
    )
    half = job_state(indexed_job(), [pod("0", "Running"), pod("1", "Pending")])
    assert half["state"] == "queued" and "1 of 2 pods running (waiting: index 1)" in half["reason"]
    assert job_state(indexed_job(), [pod("0", "Running")])["state"] == "queued"  # index 1 absent


def test_the_index_that_failed_first_is_the_cause_with_the_single_pod_label() -> None:
    out = job_state(indexed_job([FAILED]), [pod("0", "Failed", TERM), pod("1", "Failed", OOM)])
    single = job_state(*response("failed_oomkilled"))  # one pod OOMKilled: the same mapping
    assert (out["state"], out["index"], out["label"]) == ("failed", 1, single["label"])
    assert out["reason"].startswith("index 1: OOMKilled (exit 137); BackoffLimitExceeded")
    error = {"reason": "Error", "exitCode": 2, "finishedAt": "2026-12-01T00:00:01Z"}
    plain = job_state(indexed_job([FAILED]), [pod("0", "Failed", error), pod("1", "Running")])
    one = {**response("failed_oomkilled")[0]}  # the one-pod path: no OOM, BackoffLimitExceeded
    assert plain["label"] == job_state(one, [])["label"] == "unknown"
    assert plain["reason"].startswith("index 0: Error (exit 2)")


def test_an_index_lost_while_the_job_goes_on_is_retrying_and_its_replacement_runs() -> None:
    lost = job_state(indexed_job(), [pod("0", "Running"), pod("1", "Failed", OOM)])
    assert lost["state"] == "retrying" and lost["index"] == 1
    assert "index 1 failed (OOMKilled (exit 137))" in lost["reason"]
    pods = [pod("0", "Running"), pod("1", "Failed", OOM), pod("1", "Running")]
    assert job_state(indexed_job(), pods)["state"] == "running"


@pytest.mark.parametrize(
    "odd",
    [
        pod(None, "Running"),  # no index at all
        pod("x", "Failed", OOM),  # not a number
        pod("7", "Failed", OOM),  # outside 0..N-1
        pod("-1", "Failed", OOM),
        pod("9" * 40, "Failed", OOM),  # a number no job has
        {"metadata": {}, "status": None},  # nothing where the API always writes something
    ],
)
def test_pods_that_are_no_node_of_the_job_are_left_out_and_counted(odd: dict[str, Any]) -> None:
    out = job_state(indexed_job(), [pod("0", "Running"), odd, pod("1", "Running")])
    assert (out["state"], out["odd_pods"]) == ("running", 1)


def test_a_complete_job_succeeded_and_an_index_that_finished_first_is_up() -> None:
    done = indexed_job([{"type": "Complete", "status": "True"}])
    assert job_state(done, [])["state"] == "succeeded"
    first = job_state(indexed_job(), [pod("0", "Running"), pod("1", "Succeeded")])
    assert first["state"] == "running"


# ---- the fake API server: it checks what the API documents, and refuses the rest ----


def test_the_fake_refuses_what_the_api_would(k8s_api: FakeApi, tmp_path: Path) -> None:  # noqa: F811
    from kubernetes import client

    backend = kube_named(k8s_api, tmp_path, "kube-refuse")
    api = backend.api()  # type: ignore[attr-defined]
    job = render_job(k8s_job(job_id="no-service", namespace="ml", resources=TWO))
    cases = [
        (job, "no Service 'rgt-no-service'"),
        ({**job, "spec": {**job["spec"], "completions": None}}, "completions: Required"),
        ({**job, "spec": {**job["spec"], "completionMode": "Sideways"}}, "Unsupported value"),
    ]
    for doc, said in cases:
        with pytest.raises(ApiException) as caught:
            client.BatchV1Api(api).create_namespaced_job("ml", doc)
        assert caught.value.status == 422 and said in caught.value.body
    assert "rgt-no-service" not in k8s_api.cluster.jobs


def kube_named(k8s_api: FakeApi, tmp_path: Path, name: str) -> Backend:  # noqa: F811
    from rgt.backends import get_backend
    from rgt.backends._k8s_up import KubeUp, register_kubernetes
    from rgt.state.store import Store

    root = tmp_path / f"claim-{name}"
    root.mkdir()
    up = KubeUp(context=k8s_api.context, namespace="ml", pvc="rgt-claim",
                kubeconfig=str(k8s_api.kubeconfig))  # fmt: skip
    return get_backend(register_kubernetes(Store.open(), name, up, str(root)))


# ---- end to end: rgt's backend against the fake, two pods running on this host ----

SHOW_ENV = """import json, os, time
keys = ("RGT_NNODES", "RGT_NODE_RANK", "RGT_MASTER_ADDR", "RGT_MASTER_PORT", "JOB_COMPLETION_INDEX")
print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
time.sleep(120)
"""


def submit_pair(backend: Backend, tmp_path: Path, job_id: str) -> JobSpec:
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text(SHOW_ENV)
    snapshot = take_snapshot(project)
    backend.push_snapshot(snapshot)
    spec = JobSpec(job_id=job_id, machine=backend.machine.name,
                   command=(backend.python, "job.py"), code_snapshot=snapshot.digest,
                   created=utcnow(), retry=RetryPolicy(max_retries=1))  # fmt: skip
    backend.submit(spec, None, Resources(gpus="1", nodes=2))  # backoffLimit 1: one pod lost
    return spec


def env_line(backend: Backend, job_id: str) -> dict[str, str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in backend.log(job_id, 1).decode().splitlines():
            if line.startswith("ENV "):
                found: dict[str, str] = json.loads(line[4:])
                return found
        time.sleep(0.3)
    raise AssertionError(f"no ENV line in {job_id}'s log")


def wait_state(backend: Backend, job_id: str, state: JobState) -> Any:
    deadline = time.monotonic() + 60
    while (seen := backend.read_jobs([job_id]).statuses[job_id]).state is not state:
        assert time.monotonic() < deadline, seen
        time.sleep(0.3)
    return seen


@pytest.mark.slow
def test_two_pods_rendezvous_env_then_an_index_oomkilled_retried_failed_then_cancel(
    k8s_api: FakeApi,  # noqa: F811
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    backend = kube_named(k8s_api, tmp_path, "kube-pair")
    assert isinstance(backend, KubernetesBackend)
    Store.open().add_job(submit_pair(backend, tmp_path, "k8s-pair"))
    name = "rgt-k8s-pair"
    cluster = k8s_api.cluster
    assert cluster.services[name]["spec"]["clusterIP"] == "None"
    pods = sorted(p["metadata"]["name"] for p in cluster.pods.values()
                  if (p["metadata"].get("labels") or {}).get("job-name") == name)  # fmt: skip
    assert len(pods) == 2 and all(p.startswith((f"{name}-0-", f"{name}-1-")) for p in pods)

    seen = [env_line(backend, "k8s-pair"), env_line(backend.on_node("k8s-pair", 1), "k8s-pair")]
    assert [e["RGT_NODE_RANK"] for e in seen] == ["0", "1"]
    assert [e["JOB_COMPLETION_INDEX"] for e in seen] == ["0", "1"]
    assert {(e["RGT_NNODES"], e["RGT_MASTER_ADDR"], e["RGT_MASTER_PORT"]) for e in seen} == {
        ("2", f"{name}-0.{name}", "29500")
    }
    with pytest.raises(UsageError, match="has no node 2"):
        backend.on_node("k8s-pair", 2)
    capfd.readouterr()
    with pytest.raises(SystemExit):  # `rgt logs JOB --node 1`: pod 1's log
        main(["logs", "k8s-pair", "--node", "1"])
    assert '"RGT_NODE_RANK": "1"' in capfd.readouterr().out

    alive = wait_state(backend, "k8s-pair", JobState.RUNNING)
    assert alive.agent_alive and alive.liveness == "kubernetes"
    assert [p["phase"] for p in alive.extra["k8s"]["pods"]] == ["Running", "Running"]
    # An odd answer: a pod listed under the job's labels with no completion index (another
    # controller's, or a hand-made one). It is no node of the job: counted, not believed.
    labels = {"app.kubernetes.io/managed-by": "rgt", "rgt/job": name, "job-name": name}
    odd = {"metadata": {"name": "intruder", "labels": labels}, "status": {"phase": "Failed"}}
    with cluster.lock:
        cluster.pods["intruder"] = odd
    still = backend.read_jobs(["k8s-pair"]).statuses["k8s-pair"]
    assert (still.state, still.extra["k8s"]["odd_pods"]) == (JobState.RUNNING, 1)
    with cluster.lock:
        del cluster.pods["intruder"]

    cluster.fail_index(name, 1, "OOMKilled", 137)  # within the Job's backoffLimit
    lost = wait_state(backend, "k8s-pair", JobState.RETRYING)
    assert not lost.agent_alive and lost.extra["k8s"]["index"] == 1
    assert "index 1 failed (OOMKilled (exit 137))" in (lost.reason or "")
    cluster.replace_index(name, 1)  # the controller's back-off delay passed: a new pod 1
    again = wait_state(backend, "k8s-pair", JobState.RUNNING)
    assert [p["phase"] for p in again.extra["k8s"]["pods"]] == ["Running", "Running"]

    cluster.fail_index(name, 1, "OOMKilled", 137)  # past the backoffLimit: the Job fails
    failed = wait_state(backend, "k8s-pair", JobState.FAILED)
    single = job_state(*response("failed_oomkilled"))["label"]  # the one-pod path's label
    assert (failed.label, failed.extra["k8s"]["index"], failed.agent_alive) == (single, 1, False)
    assert (failed.reason or "").startswith("index 1: OOMKilled (exit 137)")

    backend.cancel("k8s-pair")
    assert name not in cluster.jobs and name not in cluster.services
    assert ("jobs", name, "Background") in cluster.deletes
    assert ("services", name, None) in cluster.deletes
    assert not [p for p in cluster.pods.values() if p["metadata"]["labels"].get("job-name") == name]


def test_a_manifest_round_trips_through_the_clients_models() -> None:
    job = render_job(k8s_job(resources=TWO))
    model = to_model(job)
    assert model.spec.completion_mode == "Indexed" and model.spec.template.spec.subdomain


def test_node_0_ended_is_not_the_group_ended() -> None:
    """The agent's files read are pod 0's: the gate and `rgt status` must not see the job
    ended while another index runs, nor succeeded when another index failed."""
    from rgt.backends._k8s_state import merge

    node0 = {"state": "succeeded", "done": True, "label": None, "reason": None}
    running = job_state(indexed_job(), [pod("0", "Succeeded"), pod("1", "Running")])
    out = merge(node0, running)
    assert (out["state"], out["agent_alive"], out["done"]) == ("running", True, False)
    failed = job_state(indexed_job([FAILED]), [pod("0", "Succeeded"), pod("1", "Failed", OOM)])
    out = merge(node0, failed)
    assert (out["state"], out["label"], out["done"]) == ("failed", "host_oom", True)
    assert out["k8s"]["index"] == 1 and out["reason"].startswith("index 1: OOMKilled")
    done = job_state(indexed_job([{"type": "Complete", "status": "True"}]), [])
    assert merge(node0, done)["state"] == "succeeded"


WRITE_RANK = """import os, pathlib
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
rank = os.environ["RGT_NODE_RANK"]
(out / ("rank-%s.txt" % rank)).write_text("rank " + rank)
"""


@pytest.mark.slow
def test_pull_and_the_gate_cover_every_pod(k8s_api: FakeApi, tmp_path: Path) -> None:  # noqa: F811
    from rgt.jobs.launch import LaunchOptions, launch
    from rgt.jobs.pull import pull
    from rgt.lifecycle.gate import evaluate

    backend = kube_named(k8s_api, tmp_path, "kube-both")
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text(WRITE_RANK)
    store = Store.open()
    options = LaunchOptions(command=(backend.python, "job.py"), cwd=project, job_id="k8s-both",
                            resources=Resources(nodes=2, partition="gpu"))  # fmt: skip
    with pytest.raises(UsageError, match="--partition"):  # refused before anything starts
        launch(store, "kube-both", options)
    assert "rgt-k8s-both" not in k8s_api.cluster.jobs and not store.jobs()
    launch(store, "kube-both", dataclasses.replace(options, resources=Resources(nodes=2)))
    wait_state(backend, "k8s-both", JobState.SUCCEEDED)

    found = backend.manifest("k8s-both")
    assert found is not None and found[0]["nodes"] == 2
    paths = {e["path"] for e in found[0]["files"]}
    assert {"outputs/rank-0.txt", "nodes/1/outputs/rank-1.txt"} <= paths
    assert not [p for p in paths if p.startswith("nodes/1/ckpt/")]  # the group's ckpt: once

    gate = {row["job"]: row for row in evaluate(store, backend).jobs}["k8s-both"]
    assert gate["ended"] and not gate["pulled"]  # pod 1's file too: nothing pulled yet
    result = pull(store, "k8s-both", tmp_path / "pulled")
    assert result.ok, result.report
    assert (tmp_path / "pulled" / "nodes/1/outputs/rank-1.txt").read_text() == "rank 1"
    assert (tmp_path / "pulled" / "outputs/rank-0.txt").read_text() == "rank 0"
    gate = {row["job"]: row for row in evaluate(store, backend).jobs}["k8s-both"]
    assert gate["pulled"] and gate["verified"], gate

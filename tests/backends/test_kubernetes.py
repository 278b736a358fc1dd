"""The Kubernetes backend without a cluster: rendered manifests against the official client's
models and golden files, the init container's script run for real by ``sh``, and the state
logic on API responses (``tests/golden/k8s/responses/README.md`` says where they come from).
NOT run on a live cluster."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes", reason="pip install 'remote-gpu-trainer[kubernetes]'")

from rgt.backends._render.k8s import INPUT_MOUNT, K8sJob, render_input, render_job
from rgt.backends.kubernetes import BackendError, check_manifest, job_state, to_model
from rgt.errors import UsageError
from rgt.resources import Resources

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "k8s"
UPDATE = os.environ.get("RGT_UPDATE_GOLDEN") == "1"


def k8s_job(**changes: Any) -> K8sJob:
    values: dict[str, Any] = dict(
        job_id="Train_1.seed-0",
        namespace="ml",
        image="pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime",
        pvc="rgt-durable",
        durable_root="/durable",
        agent_name="agent-0.1.0-abc.pyz",
        snapshot="3f2a9c",
        resources=Resources(gpus="A100:2", cpus=8, mem_gb=48, timeout_min=600),
        grace_s=45,
        max_retries=2,
    )
    values.update(changes)
    return K8sJob(**values)


def check_golden(name: str, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if UPDATE:
        (GOLDEN / name).write_text(text)
    assert text == (GOLDEN / name).read_text(), f"{name} changed; RGT_UPDATE_GOLDEN=1 if meant"


def test_job_manifest_matches_golden_and_the_api_schema() -> None:
    manifest = render_job(k8s_job())
    check_golden("job.json", manifest)
    check_manifest(manifest)
    job = to_model(manifest)
    pod = job.spec.template.spec
    assert job.spec.backoff_limit == 2 and job.spec.active_deadline_seconds == 36000
    assert pod.restart_policy == "Never" and pod.termination_grace_period_seconds == 45
    assert pod.containers[0].resources.limits["nvidia.com/gpu"] == "2"
    assert pod.volumes[0].persistent_volume_claim.claim_name == "rgt-durable"
    assert pod.init_containers[0].name == "rgt-input"
    assert job.metadata.name == "rgt-train-1-seed-0"


def test_config_map_matches_golden_and_the_api_schema() -> None:
    manifest = render_input(k8s_job(), '{"job_id": "Train_1.seed-0"}', b"PK-agent", b"tgz")
    check_golden("configmap.json", manifest)
    check_manifest(manifest)


def test_schema_check_catches_a_misspelled_field() -> None:
    manifest = render_job(k8s_job())
    manifest["spec"]["backofLimit"] = manifest["spec"].pop("backoffLimit")
    with pytest.raises(BackendError):
        check_manifest(manifest)


def test_schema_check_catches_a_missing_required_field() -> None:
    manifest = render_job(k8s_job())
    del manifest["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ValueError, match="name"):
        to_model(manifest)


def test_no_gpu_no_limits_and_slurm_keys_are_refused() -> None:
    pod = render_job(k8s_job(resources=Resources()))["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"] == {}
    with pytest.raises(UsageError):
        render_job(k8s_job(resources=Resources(partition="gpu")))


def _run_init(job: K8sJob, tmp_path: Path, spec: str) -> None:
    """The init container's script, with the ConfigMap mount replaced by a real dir."""
    inputs = tmp_path / "input"
    inputs.mkdir(exist_ok=True)
    (inputs / "spec.json").write_text(spec)
    (inputs / "agent.pyz").write_bytes(b"agent")
    code = io.BytesIO()
    with tarfile.open(fileobj=code, mode="w:gz") as tar:
        data = b"print('train')\n"
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (inputs / "code.tar.gz").write_bytes(code.getvalue())
    script = render_job(job)["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
    subprocess.run(["sh", "-c", script.replace(INPUT_MOUNT, str(inputs))], check=True)


def test_init_script_delivers_code_once_and_never_rewrites_the_spec(
    tmp_path: Path, hostile_dir: Path
) -> None:
    job = k8s_job(durable_root=str(hostile_dir))
    _run_init(job, tmp_path, '{"v": 1}')
    job_dir = Path(job.job_dir)
    assert (job_dir / "code" / "train.py").read_text() == "print('train')\n"
    assert (Path(job.rgt_root) / "agent" / job.agent_name).read_bytes() == b"agent"
    _run_init(job, tmp_path, '{"v": 2}')  # a rescheduled pod
    assert json.loads((job_dir / "spec.json").read_text()) == {"v": 1}
    assert not list(hostile_dir.rglob("*.partial"))
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def response(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = json.loads((GOLDEN / "responses" / f"{name}.json").read_text())
    return doc["job"], doc["pods"]


@pytest.mark.parametrize(
    ("name", "state", "label", "reason_has"),
    [
        ("running", "running", None, None),
        ("succeeded", "succeeded", None, None),
        ("failed_pod_failure_policy", "failed", "unknown", "exit code 1"),
        ("failed_oomkilled", "failed", "host_oom", "BackoffLimitExceeded"),
        ("failed_deadline", "failed", "preempted", "DeadlineExceeded"),
        ("image_pull_backoff", "queued", None, "ImagePullBackOff"),
        ("unschedulable", "queued", None, "Insufficient nvidia.com/gpu"),
    ],
)
def test_state_from_recorded_responses(
    name: str, state: str, label: str | None, reason_has: str | None
) -> None:
    job, pods = response(name)
    out = job_state(job, pods)
    assert (out["state"], out["label"]) == (state, label)
    if reason_has:
        assert reason_has in out["reason"]
    status = job["status"]
    assert out["attempts"] == sum(
        int(status.get(k) or 0) for k in ("active", "succeeded", "failed")
    )


def test_recorded_responses_are_valid_api_objects() -> None:
    """The hand-written responses deserialize into the client's models (shape check)."""
    for path in sorted((GOLDEN / "responses").glob("*.json")):
        job, pods = response(path.stem)
        assert to_model(job).status is not None
        for pod in pods:
            assert to_model(pod).status.phase

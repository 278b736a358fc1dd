"""A Kubernetes cluster as a backend: one batch/v1 Job per rgt job, through the official client.

NOT RUN ON A LIVE CLUSTER. No cluster can run where rgt is developed: the rendered manifests
are checked against the API's own models (the ``kubernetes`` package) and golden files, and
the state logic against API responses written in the shape the API returns them
(``tests/golden/k8s/``). Treat the first run on a real cluster as a test.

The machine is a kubeconfig context plus a namespace, a PersistentVolumeClaim (the durable
root, mounted at ``/durable`` in every pod) and an image that has ``python3``. The agent's
files live on the claim, out of reach of a shell here, so status comes from the Job and its
pods, and logs from the pod log (the container streams the attempt logs, ``_render/k8s.py``).

``connection`` keys: ``kubeconfig``, ``context``, ``namespace`` (default ``default``), ``pvc``,
``image``, ``init_image``, ``grace_s``, ``resources``.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rgt.agent.paths import JobPaths
from rgt.backends._render.k8s import K8sJob, render_input, render_job
from rgt.backends.base import Backend
from rgt.errors import BackendError, UsageError
from rgt.models import JobSpec, Machine
from rgt.resources import Resources
from rgt.transport.base import CommandResult, ProgressFn, Transport
from rgt.transport.snapshot import Snapshot, materialize

CONFIGMAP_LIMIT = 1024 * 1024  # etcd's object size limit for a ConfigMap
# Pod states that mean "not started, and it will not start by waiting".
STUCK_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
FAILED_LABELS = {
    "DeadlineExceeded": "preempted",
    "BackoffLimitExceeded": "unknown",
    "PodFailurePolicy": "unknown",
}


class ApiOnlyTransport(Transport):
    """Kubernetes gives rgt no shell: every file operation goes through the API instead."""

    host = "kubernetes"

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = 60.0,
        cwd: str | None = None,
    ) -> CommandResult:
        raise BackendError(
            "a Kubernetes machine has no shell for rgt",
            backend="kubernetes",
            fix="use `kubectl exec` / `kubectl cp` on the job's pod",
        )

    def put(self, local: Path, remote: str, *, progress: ProgressFn | None = None) -> None:
        self.run(["put"])

    def get(self, remote: str, local: Path, *, progress: ProgressFn | None = None) -> None:
        self.run(["get"])


class KubernetesBackend(Backend):
    kind = "kubernetes"

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine, ApiOnlyTransport())
        conn = machine.connection
        self.namespace = str(conn.get("namespace") or "default")
        self.defaults = Resources.from_mapping(conn.get("resources") or {})
        self._code: dict[str, bytes] = {}
        self._api: Any = None

    def api(self) -> Any:
        """The official client, configured once from the machine's kubeconfig and context."""
        if self._api is None:
            from kubernetes import client, config

            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=self.machine.connection.get("kubeconfig"),
                context=self.machine.connection.get("context"),
            )
            self._api = client.ApiClient()
        return self._api

    def detach(self, argv: Sequence[str], *, stdin: bytes | None = None) -> None:
        raise BackendError(
            "Kubernetes starts the agent itself (the Job's container)",
            backend=self.kind,
            fix="use submit()",
        )

    def stop_meter(self) -> str:
        return (
            "the cluster bills its nodes, not rgt's jobs: every rgt Job has ended; the "
            f"claim {self.machine.connection.get('pvc')!r} is kept (delete it yourself)"
        )

    def push_snapshot(self, snapshot: Snapshot, progress: ProgressFn | None = None) -> str:
        with tempfile.TemporaryDirectory(prefix="rgt-snap-") as tmp:
            materialize(snapshot, Path(tmp) / "code")
            self._code[snapshot.digest] = _tar_gz(Path(tmp) / "code")
        return self.root.snapshot(snapshot.digest)

    def manifests(self, spec: JobSpec, resources: Resources | None = None) -> list[dict[str, Any]]:
        """The ConfigMap and the Job for ``spec`` (what ``submit`` applies)."""
        from rgt.agent.build import agent_version, build_agent
        from rgt.config import rgt_home

        conn = self.machine.connection
        job = K8sJob(
            job_id=spec.job_id,
            namespace=self.namespace,
            image=str(conn["image"]),
            pvc=str(conn["pvc"]),
            durable_root=self.machine.durable_root,
            agent_name=f"agent-{agent_version()}.pyz",
            snapshot=spec.code_snapshot,
            resources=self.defaults.merged(resources or Resources()),
            grace_s=int(conn.get("grace_s") or 30),
            max_retries=spec.retry.max_retries,
            init_image=str(conn.get("init_image") or "busybox:1.36"),
        )
        agent = build_agent(rgt_home() / "agent").read_bytes()
        code = self._code.get(spec.code_snapshot) if spec.code_snapshot else None
        config_map = render_input(job, json.dumps(spec.to_json(), indent=2), agent, code)
        size = sum(len(v) for v in config_map["binaryData"].values())
        if size > CONFIGMAP_LIMIT:
            raise UsageError(
                f"the code snapshot is {size} bytes, over a ConfigMap's 1 MiB",
                fix="bake the code into the image, or add large files to .rgtignore",
            )
        return [config_map, render_job(job)]

    def submit(
        self,
        spec: JobSpec,
        secrets: dict[str, str] | None = None,
        resources: Resources | None = None,
    ) -> JobPaths:
        if secrets:
            raise UsageError(
                "secrets are not passed to Kubernetes Jobs by rgt yet",
                fix="create a Secret and reference it from the image's entrypoint",
            )
        from kubernetes import client

        config_map, job = (to_model(m) for m in self.manifests(spec, resources))
        client.CoreV1Api(self.api()).create_namespaced_config_map(self.namespace, config_map)
        client.BatchV1Api(self.api()).create_namespaced_job(self.namespace, job)
        return self.job_paths(spec.job_id)

    def _read(self, job_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        from kubernetes import client

        name = _name(job_id)
        raw = client.BatchV1Api(self.api()).read_namespaced_job_status(name, self.namespace)
        pods = client.CoreV1Api(self.api()).list_namespaced_pod(
            self.namespace, label_selector=f"job-name={name}"
        )
        serialize = self.api().sanitize_for_serialization
        return serialize(raw), [serialize(pod) for pod in pods.items]

    def status(self, job_id: str) -> dict[str, Any]:
        job, pods = self._read(job_id)
        return job_state(job, pods)

    def log(self, job_id: str, attempt: int, offset: int = 0) -> bytes:
        """The newest pod's log (the container streams every attempt log there)."""
        from kubernetes import client

        _, pods = self._read(job_id)
        if not pods:
            return b""
        newest = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        text = client.CoreV1Api(self.api()).read_namespaced_pod_log(
            newest["metadata"]["name"], self.namespace, container="agent"
        )
        return str(text).encode()[offset:]

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Delete the Job and its pods (they get SIGTERM and the grace period); the claim and
        everything on it stay."""
        from kubernetes import client

        client.BatchV1Api(self.api()).delete_namespaced_job(
            _name(job_id), self.namespace, propagation_policy="Background"
        )
        return {"job_id": job_id, "state": "cancelled", "cancel_requested": True}


def to_model(manifest: dict[str, Any]) -> Any:
    """The client's model object (``V1Job``, ``V1ConfigMap``) for a rendered manifest. The
    models check required fields and enum values; ``check_manifest`` also catches fields they
    do not know (which deserialization silently drops)."""
    from kubernetes import client

    kind = f"{manifest['apiVersion'].split('/')[-1].capitalize()}{manifest['kind']}"
    return client.ApiClient().deserialize(json.dumps(manifest), kind, "application/json")


def check_manifest(manifest: dict[str, Any]) -> None:
    """Raise if the API schema would not carry ``manifest`` through unchanged."""
    from kubernetes import client

    back = client.ApiClient().sanitize_for_serialization(to_model(manifest))  # type: ignore[no-untyped-call]
    if back != manifest:
        raise BackendError(
            f"{manifest['kind']} does not match the Kubernetes API schema",
            backend="kubernetes",
            stderr_tail=json.dumps(back)[:2000],
        )


def _name(job_id: str) -> str:
    return K8sJob(job_id, "", "", "", "/", "", None, Resources()).name


def _tar_gz(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            tar.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)
    return buffer.getvalue()


def job_state(job: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """rgt's view of a Job from the API's JSON (``GET …/jobs/NAME/status`` and its pods)."""
    status = job.get("status") or {}
    true = {c["type"]: c for c in status.get("conditions") or [] if c.get("status") == "True"}
    out: dict[str, Any] = {
        "job": job["metadata"]["name"],
        "attempts": int(status.get("failed") or 0)
        + int(status.get("succeeded") or 0)
        + int(status.get("active") or 0),
        "label": None,
        "reason": None,
    }
    if "Complete" in true:
        return dict(out, state="succeeded")
    if "Failed" in true:
        cond = true["Failed"]
        label = _pod_label(pods) or FAILED_LABELS.get(cond.get("reason", ""), "unknown")
        return dict(
            out, state="failed", label=label, reason=f"{cond.get('reason')}: {cond.get('message')}"
        )
    waiting = _waiting_reason(pods)
    if waiting:
        return dict(out, state="queued", reason=waiting)
    return dict(out, state="running" if status.get("active") else "queued")


def _pod_label(pods: list[dict[str, Any]]) -> str | None:
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = (cs.get("state") or {}).get("terminated") or {}
            if ended.get("reason") == "OOMKilled":
                return "host_oom"
    return None


def _waiting_reason(pods: list[dict[str, Any]]) -> str | None:
    for pod in pods:
        pod_status = pod.get("status") or {}
        statuses = (pod_status.get("initContainerStatuses") or []) + (
            pod_status.get("containerStatuses") or []
        )
        for cs in statuses:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in STUCK_REASONS:
                return f"{cs['name']}: {waiting['reason']}: {waiting.get('message', '')}".strip()
        for cond in pod_status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return f"unschedulable: {cond.get('message')}"
    return None

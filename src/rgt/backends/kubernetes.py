"""A Kubernetes cluster as a backend: one batch/v1 Job per rgt job, through the official client.

The machine is a kubeconfig context, a namespace, a PersistentVolumeClaim (the durable root,
mounted at ``durable_root`` in every pod) and an image with ``python3`` and ``tar``. rgt keeps
one small pod running, ``rgt-files-<machine>``, with the claim mounted: the machine's shell
(``_k8s_exec.ExecTransport``, over the API's exec). Through it the code, the agent and the
spec go onto the claim and every file of the job is read back, so ``push``, the read,
``log``, ``events``, ``manifest`` and ``fetch`` are the base class's, as on an SSH machine.

``submit`` prepares the job dir on the claim, then applies the input ConfigMap and the Job
(``_render/k8s.py``): the Job's container runs the agent. ``--nodes N`` makes it an Indexed
Job of N pods plus a headless Service (created first) through which the pods find pod 0; the
spec carries ``RGT_NNODES``, ``RGT_MASTER_ADDR`` and ``RGT_MASTER_PORT``, each pod its own
``RGT_NODE_RANK``. Pod R > 0 runs its agent in ``jobs/<id>/nodes/R`` (``on_node``: its log).
The read (``interpret``) merges the agent's files with the Job and its pods (``_k8s_state.py``,
``_k8s_group.py``): the API decides liveness and says why a pod is stuck.

Not supported (``NotSupportedError``): secrets (a Job's container has no private stdin for
them), ``detach`` (the Job's container starts the agent). Tested against a fake API server on
loopback that runs the pods on the test host (``tests/backends/k8s_fake.py``, a local fake of
the documented API: Indexed Jobs, Services, a pod-level failure), NOT on a live cluster: treat
the first run on a real cluster as a test.

``connection`` keys: ``kubeconfig``, ``context``, ``namespace`` (default ``default``), ``pvc``,
``image``, ``init_image``, ``grace_s``, ``resources``, ``python``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rgt.agent.paths import JobPaths
from rgt.backends._k8s_exec import ExecTransport
from rgt.backends._k8s_group import group_manifest
from rgt.backends._k8s_state import job_state, merge
from rgt.backends._render.fit import K8S_MAX_PODS
from rgt.backends._render.k8s import (
    MANAGED_BY,
    K8sJob,
    master_addr,
    render_input,
    render_job,
    render_service,
)
from rgt.backends.base import Backend
from rgt.backends.statusdoc import JobStatus
from rgt.errors import BackendError, NotSupportedError, UsageError
from rgt.models import JobSpec, JobState, Machine
from rgt.resources import Resources

__all__ = ["BackendError", "KubernetesBackend", "check_manifest", "job_state", "to_model"]

CONFIGMAP_LIMIT = 1024 * 1024  # etcd's object size limit for a ConfigMap
FILES_CONTAINER = "files"


def files_pod_name(machine: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", machine.lower()).strip("-")
    return f"rgt-files-{slug}"[:63].rstrip("-")


class KubernetesBackend(Backend):
    kind = "kubernetes"
    carries_secrets = False

    def __init__(self, machine: Machine) -> None:
        conn = machine.connection
        self.namespace = str(conn.get("namespace") or "default")
        self.files_pod = files_pod_name(machine.name)
        self._api: Any = None
        self._node = 0  # which pod's files this backend reads (``on_node``)
        transport = ExecTransport(self.api, self.namespace, self.files_pod, FILES_CONTAINER)
        super().__init__(machine, transport)
        self.defaults = Resources.from_mapping(conn.get("resources") or {})

    def api(self) -> Any:
        """The official client, configured once from the machine's kubeconfig and context."""
        if self._api is None:
            try:
                from kubernetes import client, config
            except ImportError as exc:  # an optional extra: say which
                raise UsageError(
                    f"the Kubernetes backend needs the {exc.name!r} package",
                    fix="pip install 'remote-gpu-trainer[kubernetes]'",
                ) from exc

            configuration = client.Configuration()
            conn = self.machine.connection
            try:
                config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=conn.get("kubeconfig"),
                    context=conn.get("context"),
                    client_configuration=configuration,
                )
            except (config.ConfigException, OSError) as exc:
                raise UsageError(
                    f"cannot use kubeconfig context {conn.get('context')!r}: {exc}",
                    fix="check --context and --kubeconfig (`kubectl config get-contexts`)",
                ) from exc
            self._api = client.ApiClient(configuration)
        return self._api

    def detach(
        self,
        argv: Sequence[str],
        *,
        job: JobPaths,
        stdin: bytes | None = None,
        resources: Resources | None = None,
    ) -> None:
        raise NotSupportedError(
            "starting the agent detached (rgt resume)",
            self.kind,
            why="the Job's container starts the agent, and Kubernetes restarts lost pods itself",
            fix=(
                f"run it again (`rgt run {self.machine.name} -- CMD`, with `--ckpt` to resume);"
                " its checkpoints on the claim are kept"
            ),
        )

    def stop_meter(self) -> str:
        """Delete the files pod rgt started; the claim and the cluster's nodes stay."""
        api = self.api()
        from kubernetes import client

        client.CoreV1Api(api).delete_namespaced_pod(self.files_pod, self.namespace)
        return (
            f"deleted rgt's files pod {self.files_pod}; the cluster bills its nodes, not rgt's "
            f"jobs, and every rgt Job has ended; the claim "
            f"{self.machine.connection.get('pvc')!r} is kept (delete it yourself)"
        )

    def manifests(self, spec: JobSpec, resources: Resources | None = None) -> list[dict[str, Any]]:
        """The ConfigMap and the Job for ``spec`` (what ``submit`` applies), and for a
        multi-pod job the headless Service. The code is on the claim already
        (``push_snapshot``); the ConfigMap carries the spec and the agent, which the init
        container writes only where they are missing."""
        from rgt.agent.build import build_agent
        from rgt.config import rgt_home

        job = self._k8s_job(spec, resources)
        agent = build_agent(rgt_home() / "agent").read_bytes()
        config_map = render_input(job, json.dumps(spec.to_json(), indent=2), agent, None)
        size = sum(len(v) for v in config_map["binaryData"].values())
        if size > CONFIGMAP_LIMIT:
            raise UsageError(
                f"the job's inputs are {size} bytes, over a ConfigMap's 1 MiB",
                fix="keep the job's spec small (env values, artifact lists)",
            )
        service = [render_service(job)] if job.nodes > 1 else []
        return [config_map, render_job(job), *service]

    def _k8s_job(self, spec: JobSpec, resources: Resources | None) -> K8sJob:
        from rgt.agent.build import agent_version

        conn = self.machine.connection
        return K8sJob(
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

    def with_rendezvous(self, spec: JobSpec, resources: Resources | None) -> JobSpec:
        """``spec`` with the group's variables for a multi-pod job (every pod's agent reads
        ``RGT_NNODES`` to know it is one node of a group: a lost peer restarts the group,
        ``rgt.agent._fleet``); ``RGT_NODE_RANK`` is each pod's own, from the pod."""
        job = self._k8s_job(spec, resources)
        if job.nodes < 2:
            return spec
        group = {
            "RGT_NNODES": str(job.nodes),
            "RGT_MASTER_ADDR": master_addr(job),
            "RGT_MASTER_PORT": str(job.master_port),
        }
        return dataclasses.replace(spec, env={**spec.env, **group})

    def submit(
        self,
        spec: JobSpec,
        secrets: dict[str, str] | None = None,
        resources: Resources | None = None,
    ) -> JobPaths:
        """Put the job's dir on the claim (code link, spec, agent), then apply the Job."""
        self.refuse_secrets(secrets)
        self.api()  # the client is there and configured (or the error names the extra)
        from kubernetes import client

        spec = self.with_rendezvous(spec, resources)
        manifests = self.manifests(spec, resources)  # refused here before anything is created
        self.install_agent()
        job = self.prepare(spec)
        config_map, k8s_job, *service = (to_model(m) for m in manifests)
        core = client.CoreV1Api(self.api())
        core.create_namespaced_config_map(self.namespace, config_map)
        for headless in service:  # before the pods, so their names resolve from the start
            core.create_namespaced_service(self.namespace, headless)
        client.BatchV1Api(self.api()).create_namespaced_job(self.namespace, k8s_job)
        return job

    def interpret(self, docs: Mapping[str, Mapping[str, Any]]) -> dict[str, JobStatus]:
        """The agent's documents (read on the claim through rgt's files pod) judged by the API
        server: one list of rgt's Jobs and one of their pods, for any number of jobs. The
        agent's own pid check ran in the files pod, which never holds a job's processes, so
        liveness is the API's word: an active pod runs the agent; a queued Job's pod will
        start it (no heartbeat is due meanwhile). The one read (``read_jobs``: ``rgt status``,
        ``watch``, the gate, adopt) comes through here."""
        launched = [j for j, d in docs.items() if d.get("exists") is not False]
        api = self._read_all() if launched else {}
        out = {}
        for job_id, found in docs.items():
            doc = dict(found)
            if doc.get("exists") is not False:
                doc = merge(doc, api.get(_name(job_id)))
            status = JobStatus.from_doc({**doc, "job_id": job_id}, job_id)
            out[job_id] = status.with_(
                liveness="kubernetes",
                agent_alive=status.state is JobState.RUNNING,
                waiting=status.state is JobState.QUEUED,
            )
        return out

    def _read_all(self) -> dict[str, dict[str, Any]]:
        """Job name -> rgt's view of it, for every Job rgt manages in the namespace: one
        list of the Jobs and one of their pods, both by rgt's label."""
        self.api()
        from kubernetes import client

        selector = f"app.kubernetes.io/managed-by={MANAGED_BY}"
        jobs = client.BatchV1Api(self.api()).list_namespaced_job(
            self.namespace, label_selector=selector
        )
        pods = client.CoreV1Api(self.api()).list_namespaced_pod(
            self.namespace, label_selector=selector
        )
        serialize = self.api().sanitize_for_serialization
        by_job: dict[str, list[dict[str, Any]]] = {}
        for pod in (serialize(p) for p in pods.items):
            labels = pod["metadata"].get("labels") or {}
            by_job.setdefault(str(labels.get("job-name") or labels.get("rgt/job")), []).append(pod)
        listed = (serialize(j) for j in jobs.items)
        return {
            j["metadata"]["name"]: job_state(j, by_job.get(j["metadata"]["name"], []))
            for j in listed
        }

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Ask the agent to end the job (its CANCEL file on the claim: it records
        ``cancelled``), delete the Job (its pods get SIGTERM and the grace period), wait for
        the pods to go, then let the agent in rgt's files pod record the end itself when the
        job's agent could not (killed before it wrote a status). The claim and everything on
        it stay."""
        from kubernetes import client

        self.transport.write_bytes(self.job_paths(job_id).cancel_request, b"")
        client.BatchV1Api(self.api()).delete_namespaced_job(
            _name(job_id), self.namespace, propagation_policy="Background"
        )
        self._delete_service(job_id)
        self._wait_pods_gone(job_id, int(self.machine.connection.get("grace_s") or 30) + 30)
        doc = self.agent_call("cancel", job_id, timeout=120)
        return dict(doc, job_id=job_id, cancel_requested=True)

    def _delete_service(self, job_id: str) -> None:
        """A multi-pod job's headless Service (a one-pod job has none: 404 is fine)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            client.CoreV1Api(self.api()).delete_namespaced_service(_name(job_id), self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def on_node(self, job_id: str, rank: int) -> KubernetesBackend:
        """This backend reading pod ``rank``'s files of a multi-pod job (``rgt logs JOB
        --node R``): its agent's dir is ``jobs/<id>/nodes/R`` on the claim (pod 0's is the
        job's own). A rank the job does not have is refused."""
        nodes = self._nodes(job_id)
        if not 0 <= rank < nodes:
            raise UsageError(
                f"job {job_id} has no node {rank} (it runs {nodes} pod(s): nodes 0..{nodes - 1})",
                fix=f"give --node 0 to {nodes - 1}",
            )
        view = KubernetesBackend(self.machine)
        view._api, view._node = self._api, rank
        return view

    def manifest(self, job_id: str) -> tuple[dict[str, Any], bytes] | None:
        """A multi-pod job's manifest is its group's (``_k8s_group.group_manifest``): none
        until every pod wrote its own (each pod's agent writes it when its node ends)."""
        found = super().manifest(job_id)
        nodes = self._nodes(job_id) if found is not None and not self._node else 1
        if found is None or nodes < 2:
            return found
        others = [self.on_node(job_id, rank).manifest(job_id) for rank in range(1, nodes)]
        if any(other is None for other in others):
            return None
        return group_manifest(found[0], [other[0] for other in others if other is not None])

    def _nodes(self, job_id: str) -> int:
        """How many pods the job runs (``RGT_NNODES`` in its spec on the claim; 1 if absent)."""
        raw = self.transport.read_bytes(self.job_paths(job_id).spec) or b"{}"
        try:
            nodes = int((json.loads(raw).get("env") or {}).get("RGT_NNODES") or 1)
        except (ValueError, TypeError, AttributeError):  # not rgt's spec: one pod
            return 1
        return min(max(nodes, 1), K8S_MAX_PODS)

    def job_paths(self, job_id: str) -> JobPaths:
        paths = super().job_paths(job_id)
        if not self._node:
            return paths
        return JobPaths(f"{paths.root}/nodes/{self._node}", job_id)

    def _wait_pods_gone(self, job_id: str, timeout_s: float) -> None:
        """Until no pod of the Job is listed (deleted pods stay listed through their grace
        period), or ``timeout_s``; the agent's own cancel then waits for its lock."""
        from kubernetes import client

        deadline = time.monotonic() + timeout_s
        selector = f"job-name={_name(job_id)}"
        pods = client.CoreV1Api(self.api())
        while pods.list_namespaced_pod(self.namespace, label_selector=selector).items:
            if time.monotonic() > deadline:
                return
            time.sleep(1.0)


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

"""The Kubernetes objects of one rgt job: an input ConfigMap and a batch/v1 Job.

Layout inside the pod: the PersistentVolumeClaim is mounted at ``durable_root`` (``/durable``)
and holds the usual ``.rgt/`` tree, so ``jobs/<id>/ckpt`` — the checkpoint dir — outlives every
pod. A rescheduled pod (node drained, spot node reclaimed) mounts the same claim and the agent
resumes the job from its newest checkpoint.

- The init container ``rgt-input`` delivers the inputs from the ConfigMap: the code snapshot
  (unpacked once into ``code/<digest>``, never rewritten: invariant 6), the agent zipapp and
  ``spec.json`` (written only if absent, so a restarted pod never changes a running job).
- The container ``agent`` runs the agent and streams the job's attempt logs to stdout, which
  is what ``kubectl logs`` and the API's pod log show.
- Retries are the agent's (it classifies first); Kubernetes retries only pods that vanished:
  ``podFailurePolicy`` ignores disruptions (eviction, preemption, node loss — they do not count
  against ``backoffLimit``) and fails the Job at once when the agent exits 1, which is how it
  says "a bug, or retries exhausted: do not run me again".
- ``/dev/shm`` is a memory-backed emptyDir: a container's default is 64 MiB, too small for
  DataLoader workers (the ``shm`` triage label).

``--nodes N`` (N > 1) renders an Indexed Job of N pods and a headless Service for their
rendezvous (``render_service``; the multi-pod parts are in ``_indexed``). Each pod is one node:
pod 0 runs the agent in the job's dir, pod R in ``jobs/<id>/nodes/R`` (its own status, logs and
lock; the same spec; the group's one ``ckpt/``, so a resumed group finds the step every rank
committed). The claim must be mountable by every pod at once (ReadWriteMany, or every pod on
one node).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

from rgt.backends._render import fit
from rgt.errors import UsageError
from rgt.resources import Resources

MANAGED_BY = "rgt"
INPUT_MOUNT = "/rgt-input"
AGENT_EXIT_FAILED = 1  # the agent's exit status for failed / stopped-for-good
# The Job controller writes each pod's index here (and sets JOB_COMPLETION_INDEX from it):
# https://kubernetes.io/docs/tasks/job/indexed-parallel-processing-static/
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
MASTER_PORT = 29500  # torchrun's default; every pod has its own network namespace


@dataclass(frozen=True)
class K8sJob:
    job_id: str
    namespace: str
    image: str
    pvc: str
    durable_root: str
    agent_name: str  # agent-<version>.pyz
    snapshot: str | None
    resources: Resources
    grace_s: int = 30
    max_retries: int = 3
    init_image: str = "busybox:1.36"
    master_port: int = MASTER_PORT

    @property
    def nodes(self) -> int:
        """Pods of the job, one node each (``--nodes``)."""
        return self.resources.nodes or 1

    @property
    def name(self) -> str:
        """A DNS-1123 label: lower case, digits, '-', at most 63 characters."""
        slug = re.sub(r"[^a-z0-9-]+", "-", self.job_id.lower()).strip("-")
        return f"rgt-{slug}"[:63].rstrip("-")

    @property
    def rgt_root(self) -> str:
        return posixpath.join(self.durable_root, ".rgt")

    @property
    def job_dir(self) -> str:
        return posixpath.join(self.rgt_root, "jobs", self.job_id)


def render_job(job: K8sJob) -> dict[str, Any]:
    if any(getattr(job.resources, key) for key in ("partition", "account", "qos")):
        raise UsageError(
            "partition, account and qos are Slurm resources",
            fix="drop them for a Kubernetes machine (use the cluster's namespace "
            "and quotas instead)",
        )
    fit.check_pods(job.resources)
    spec: dict[str, Any] = {
        "backoffLimit": job.max_retries,
        "podFailurePolicy": {
            "rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": "agent",
                        "operator": "In",
                        "values": [AGENT_EXIT_FAILED],
                    },
                },
            ]
        },
        "template": {"metadata": {"labels": _labels(job)}, "spec": _pod_spec(job)},
    }
    if job.resources.timeout_min:
        spec["activeDeadlineSeconds"] = job.resources.timeout_min * 60
    metadata = {"name": job.name, "namespace": job.namespace, "labels": _labels(job)}
    gpu_type, _ = job.resources.gpu_request()
    if gpu_type:
        # GPU models are named by node labels that differ per cluster (GPU feature discovery
        # writes e.g. nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB); the request is recorded,
        # not guessed into a selector that could match nothing.
        metadata["annotations"] = {"rgt/gpu-type": gpu_type}
    if job.nodes > 1:
        _indexed(job, spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def _indexed(job: K8sJob, spec: dict[str, Any]) -> None:
    """``spec`` made an Indexed Job of ``job.nodes`` pods that start together and find pod 0
    by name: the Job controller names pod R's host ``<job>-R``, and a headless Service named
    by the pod template's ``subdomain`` gives it the DNS name ``<job>-R.<service>``
    (https://kubernetes.io/docs/tasks/job/job-with-pod-to-pod-communication/).

    ``backoffLimit`` stays the group's one budget, not ``backoffLimitPerIndex``: that one is
    for indexes that are independent work, where the others go on while one fails
    (https://kubernetes.io/blog/2025/05/13/kubernetes-v1-33-jobs-backoff-limit-per-index-goes-ga/);
    the nodes of one training job are not, and the ``FailJob`` rule on the agent's exit 1 ends
    them all. A pod that vanished (OOMKilled, node lost) is replaced under its index and
    rejoins the rendezvous; the others' agents see a lost peer and restart the group
    (``rgt.agent._fleet``). A replacement starts only once the old pod is gone
    (``podReplacementPolicy: Failed``, the default with a podFailurePolicy: two pods of one
    index would both register as that rank)."""
    _check_name(job)
    spec.update(completionMode="Indexed", completions=job.nodes, parallelism=job.nodes)
    spec["podReplacementPolicy"] = "Failed"
    pod = spec["template"]["spec"]
    pod["subdomain"] = job.name
    for container in (*pod["initContainers"], *pod["containers"]):
        container["env"] = rendezvous_env(job)


def rendezvous_env(job: K8sJob) -> list[dict[str, Any]]:
    """The SSH fleet's and Slurm's variables, so ``torchrun --nnodes "$RGT_NNODES" --node_rank
    "$RGT_NODE_RANK" --rdzv_endpoint "$RGT_MASTER_ADDR:$RGT_MASTER_PORT"`` runs unchanged.
    The rank is the pod's completion index, through the downward API."""
    index = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}
    return [
        {"name": "RGT_NNODES", "value": str(job.nodes)},
        {"name": "RGT_NODE_RANK", "valueFrom": index},
        {"name": "RGT_MASTER_ADDR", "value": master_addr(job)},
        {"name": "RGT_MASTER_PORT", "value": str(job.master_port)},
    ]


def master_addr(job: K8sJob) -> str:
    """Pod 0's name in the namespace's DNS (``<hostname>.<subdomain>``)."""
    return f"{job.name}-0.{job.name}"


def _check_name(job: K8sJob) -> None:
    host = f"{job.name}-{job.nodes - 1}"
    if len(host) > 63:  # a pod's hostname is a DNS label
        raise UsageError(
            f"job {job.job_id!r} is too long for {job.nodes} pods: pod hostnames "
            f"({host!r}) must be at most 63 characters",
            fix=f"give a shorter --job-id (at most {63 - len(host) + len(job.job_id)} characters)",
        )


def render_service(job: K8sJob) -> dict[str, Any]:
    """The headless Service (no cluster IP: DNS answers with the pods themselves) over the
    job's pods. ``publishNotReadyAddresses``: a pod is named in DNS from its start, not once
    it is Ready; the ranks meet before any readiness could be reported."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": _labels(job)},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"rgt/job": job.name},
            "ports": [{"name": "rendezvous", "port": job.master_port, "protocol": "TCP"}],
        },
    }


def _labels(job: K8sJob) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": MANAGED_BY, "rgt/job": job.name}


def _pod_spec(job: K8sJob) -> dict[str, Any]:
    mounts = [{"name": "durable", "mountPath": job.durable_root}]
    return {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": job.grace_s,
        "initContainers": [
            {
                "name": "rgt-input",
                "image": job.init_image,
                "command": ["sh", "-c", _init_script(job)],
                "volumeMounts": [
                    *mounts,
                    {"name": "input", "mountPath": INPUT_MOUNT, "readOnly": True},
                ],
            }
        ],
        "containers": [
            {
                "name": "agent",
                "image": job.image,
                "command": ["sh", "-c", _agent_script(job)],
                "resources": _container_resources(job.resources),
                "volumeMounts": [*mounts, {"name": "dshm", "mountPath": "/dev/shm"}],
            }
        ],
        "volumes": [
            {"name": "durable", "persistentVolumeClaim": {"claimName": job.pvc}},
            {"name": "input", "configMap": {"name": f"{job.name}-input"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }


def _container_resources(res: Resources) -> dict[str, Any]:
    amounts: dict[str, str] = {}
    if res.cpus:
        amounts["cpu"] = str(res.cpus)
    if res.mem_gb:
        amounts["memory"] = (
            f"{int(res.mem_gb)}Gi"
            if float(res.mem_gb).is_integer()
            else (f"{-(-int(res.mem_gb * 1024 * 1000) // 1000)}Mi")
        )
    limits = dict(amounts)
    _, gpus = res.gpu_request()
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)  # extended resources: limits only
    out: dict[str, Any] = {}
    if amounts:
        out["requests"] = amounts
    if limits:
        out["limits"] = limits
    return out


def _init_script(job: K8sJob) -> str:
    q = shlex.quote
    lines = [
        "set -eu",
        f"root={q(job.rgt_root)}",
        f"job={q(job.job_dir)}",
        'mkdir -p "$root/agent" "$root/code" "$job/logs"',
        f'[ -e "$root/agent/{job.agent_name}" ] || '
        f'cp {INPUT_MOUNT}/agent.pyz "$root/agent/{job.agent_name}"',
        f'[ -e "$job/spec.json" ] || cp {INPUT_MOUNT}/spec.json "$job/spec.json"',
    ]
    if job.snapshot:
        code = f'"$root/code/{job.snapshot}"'
        lines += [
            f"if [ ! -d {code} ]; then",
            f"  rm -rf {code}.partial && mkdir -p {code}.partial",
            f"  tar -xzf {INPUT_MOUNT}/code.tar.gz -C {code}.partial",
            f"  mv {code}.partial {code}",
            "fi",
            f'ln -sfn "../../code/{job.snapshot}" "$job/code"',
        ]
    if job.nodes > 1:
        lines += _node_dir_lines(job)
    return "\n".join(lines) + "\n"


def _node_dir_lines(job: K8sJob) -> list[str]:
    """Pod R > 0's own job dir, ``nodes/R``: the job's spec, its code, the group's ``ckpt``."""
    code = [f'  ln -sfn "../../../../code/{job.snapshot}" "$node/code"'] if job.snapshot else []
    return [
        'mkdir -p "$job/ckpt"',
        'if [ "$RGT_NODE_RANK" != 0 ]; then',
        '  node="$job/nodes/$RGT_NODE_RANK"',
        '  mkdir -p "$node/logs"',
        '  [ -e "$node/spec.json" ] || cp "$job/spec.json" "$node/spec.json"',
        '  ln -sfn ../../ckpt "$node/ckpt"',
        *code,
        "fi",
    ]


def _agent_script(job: K8sJob) -> str:
    """Run the agent; follow its log and every attempt log it may write onto stdout. Pod R > 0
    of a multi-pod job runs it in its own dir, ``nodes/R``."""
    logs = " ".join(f'"$job/logs/attempt-{n}.log"' for n in range(1, job.max_retries + 2))
    node = ['[ "$RGT_NODE_RANK" = 0 ] || job="$job/nodes/$RGT_NODE_RANK"'] if job.nodes > 1 else []
    agent = shlex.quote(posixpath.join(job.rgt_root, "agent", job.agent_name))
    lines = [
        f"job={shlex.quote(job.job_dir)}",
        *node,
        f'python3 {agent} run "$job" &',
        "agent=$!",
        f'tail -q -n +1 -F "$job/agent.log" {logs} 2>/dev/null &',
        "trap 'kill -TERM \"$agent\"' TERM",
        'while :; do wait "$agent"; rc=$?; kill -0 "$agent" 2>/dev/null || break; done',
        "sleep 1; exit $rc",
    ]
    return "\n".join(lines) + "\n"


def render_input(
    job: K8sJob, spec_json: str, agent: bytes, code_tgz: bytes | None
) -> dict[str, Any]:
    """The ConfigMap the init container reads (binaryData is base64, 1 MiB in total)."""
    import base64

    binary = {"agent.pyz": base64.b64encode(agent).decode()}
    if code_tgz is not None:
        binary["code.tar.gz"] = base64.b64encode(code_tgz).decode()
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{job.name}-input",
            "namespace": job.namespace,
            "labels": _labels(job),
        },
        "data": {"spec.json": spec_json},
        "binaryData": binary,
    }

"""``rgt up kubernetes --name NAME --context C --namespace N --pvc P``: start the machine's files
pod (the claim mounted at the durable root, ``sleep`` as its command), wait until it runs,
check that it has ``python3`` and ``tar``, and record the machine."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rgt.backends.kubernetes import FILES_CONTAINER, KubernetesBackend
from rgt.errors import BackendError, UsageError
from rgt.models import Machine
from rgt.state.store import Store, utcnow

DEFAULT_IMAGE = "python:3.12-slim"  # the jobs' image too: it needs python3 and tar
READY_TIMEOUT_S = 300.0  # an image pull on a fresh node takes minutes


@dataclass(frozen=True)
class KubeUp:
    context: str | None
    namespace: str
    pvc: str
    kubeconfig: str | None = None
    image: str = DEFAULT_IMAGE


def register_kubernetes(store: Store, name: str, up: KubeUp, root: str | None) -> Machine:
    if not up.pvc:
        raise UsageError(
            "a Kubernetes machine needs a PersistentVolumeClaim for its durable files",
            fix="give --pvc CLAIM (an existing claim in the namespace; ReadWriteMany when jobs "
            "may run on several nodes)",
        )
    connection: dict[str, Any] = {
        "context": up.context,
        "namespace": up.namespace,
        "pvc": up.pvc,
        "image": up.image,
    }
    if up.kubeconfig:
        connection["kubeconfig"] = up.kubeconfig
    machine = Machine(
        name=name,
        backend="kubernetes",
        profile="kubernetes",
        connection=connection,
        durable_root=root or _profile_root(),
        registered=utcnow(),
    )
    backend = KubernetesBackend(machine)
    start_files_pod(backend)
    wait_running(backend, READY_TIMEOUT_S)
    backend.transport.check(["sh", "-c", "command -v tar >/dev/null && command -v python3"])
    backend.transport.mkdir(backend.root.root)
    store.add_machine(machine)
    return machine


def _profile_root() -> str:
    from rgt.profiles import load_profile

    return str(load_profile("kubernetes").durable_dir or "/mnt/rgt")


def files_pod(backend: KubernetesBackend) -> dict[str, Any]:
    mount = {"name": "durable", "mountPath": backend.machine.durable_root}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": backend.files_pod,
            "namespace": backend.namespace,
            "labels": {"app.kubernetes.io/managed-by": "rgt", "rgt/files": backend.files_pod},
        },
        "spec": {
            "containers": [
                {
                    "name": FILES_CONTAINER,
                    "image": str(backend.machine.connection["image"]),
                    "command": ["sleep", "infinity"],
                    "volumeMounts": [mount],
                }
            ],
            "volumes": [
                {
                    "name": "durable",
                    "persistentVolumeClaim": {"claimName": backend.machine.connection["pvc"]},
                }
            ],
        },
    }


def start_files_pod(backend: KubernetesBackend) -> None:
    """Create the files pod unless it is there (a second `rgt up` of the same name)."""
    api = backend.api()
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from rgt.backends.kubernetes import to_model

    core = client.CoreV1Api(api)
    try:
        core.create_namespaced_pod(backend.namespace, to_model(files_pod(backend)))
    except ApiException as exc:
        if exc.status != 409:  # 409: it exists already
            raise BackendError(
                f"the cluster refused rgt's files pod: {exc.reason}",
                backend="kubernetes",
                returncode=exc.status,
                stderr_tail=str(exc.body or "")[-2000:],
                fix="check the context, the namespace and your rights to create pods in it",
            ) from exc


def wait_running(backend: KubernetesBackend, timeout: float) -> None:
    from kubernetes import client

    core = client.CoreV1Api(backend.api())
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(backend.files_pod, backend.namespace)
        phase = pod.status.phase if pod.status else None
        if phase == "Running":
            return
        if phase in ("Failed", "Succeeded") or time.monotonic() > deadline:
            raise BackendError(
                f"rgt's files pod {backend.files_pod} is {phase}, not Running",
                backend="kubernetes",
                fix=f"`kubectl -n {backend.namespace} describe pod {backend.files_pod}` says "
                "why (image pull, the claim not bound, quota)",
            )
        time.sleep(1.0)


def kube_up(options: dict[str, str | None]) -> KubeUp:
    """The CLI's `--context/--namespace/--pvc/--kubeconfig/--k8s-image` values."""
    return KubeUp(
        context=options.get("context"),
        namespace=options.get("namespace") or "default",
        pvc=options.get("pvc") or "",
        kubeconfig=options.get("kubeconfig"),
        image=options.get("k8s_image") or DEFAULT_IMAGE,
    )

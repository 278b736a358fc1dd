"""The fake API server's Indexed Jobs and Services (``tests/backends/k8s_fake.py`` serves them).

A local fake of the documented API, not a Kubernetes: what it checks is what the API server's
validation is documented to refuse (an unknown ``completionMode``, an Indexed Job without
``completions``, ``backoffLimitPerIndex`` on a NonIndexed Job, a ``restartPolicy`` a Job may not
have, a ``subdomain`` that is not a DNS label, ``podReplacementPolicy`` other than ``Failed``
with a ``podFailurePolicy``), answered as the API does, ``422 Invalid``. One check is stricter
than a real cluster, said so where it is made: a ``subdomain`` must name a Service that exists
(a real cluster starts the pods, and their names never resolve).

Pods of an Indexed Job are made as the Job controller makes them
(https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode): one per index,
named ``<job>-<index>-<suffix>``, host name ``<job>-<index>``, the index in the
``batch.kubernetes.io/job-completion-index`` annotation and label, ``JOB_COMPLETION_INDEX`` in
every container's environment; a container's ``env`` is resolved as the kubelet does it
(``value``, or a ``fieldRef`` into the pod's metadata through the downward API).
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

INDEX = "batch.kubernetes.io/job-completion-index"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
FIELD = re.compile(r"^metadata\.(annotations|labels)\['([^']+)'\]$")
MAX_INDEXED_COMPLETIONS = 100_000  # the API's cap for completionMode: Indexed


def invalid_job(job: dict[str, Any], services: dict[str, Any]) -> str | None:
    """Why the API would refuse ``job`` (None: it is accepted)."""
    spec = job.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    mode = spec.get("completionMode", "NonIndexed")
    checks = [
        (mode not in ("NonIndexed", "Indexed"),
         f"spec.completionMode: Unsupported value: {mode!r}"),
        (mode == "Indexed" and not _count(spec.get("completions")),
         "spec.completions: Required value: when completion mode is Indexed"),
        (_count(spec.get("completions")) > MAX_INDEXED_COMPLETIONS and mode == "Indexed",
         f"spec.completions: must be less than or equal to {MAX_INDEXED_COMPLETIONS}"),
        (spec.get("parallelism") is not None and _count(spec.get("parallelism")) < 0,
         "spec.parallelism: must be greater than or equal to 0"),
        ("backoffLimitPerIndex" in spec and mode != "Indexed",
         "spec.backoffLimitPerIndex: requires completionMode Indexed"),
        (pod.get("restartPolicy") not in ("Never", "OnFailure"),
         "spec.template.spec.restartPolicy: Required value: Never or OnFailure"),
        ("subdomain" in pod and not DNS_LABEL.match(str(pod["subdomain"])),
         "spec.template.spec.subdomain: must be a DNS-1123 label"),
        ("podFailurePolicy" in spec and spec.get("podReplacementPolicy", "Failed") != "Failed",
         "spec.podReplacementPolicy: must be Failed when podFailurePolicy is used"),
        # Stricter than the API (see the module's docstring): the pods' names would not resolve.
        ("subdomain" in pod and pod["subdomain"] not in services,
         f"spec.template.spec.subdomain: no Service {pod.get('subdomain')!r} (fake's own check)"),
    ]  # fmt: skip
    return next((said for failed, said in checks if failed), None)


def invalid_service(service: dict[str, Any]) -> str | None:
    spec = service.get("spec") or {}
    name = (service.get("metadata") or {}).get("name", "")
    if not DNS_LABEL.match(str(name)):
        return "metadata.name: a Service's name must be a DNS-1035 label"
    if spec.get("clusterIP") != "None" and not spec.get("ports"):
        return "spec.ports: Required value (only a headless Service may have none)"
    return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def indexed(job: dict[str, Any]) -> int:
    """How many indexes the Job has (0: not an Indexed Job)."""
    spec = job["spec"]
    return _count(spec.get("completions")) if spec.get("completionMode") == "Indexed" else 0


def indexed_pods(job: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """The Job controller's pods, one per index (parallelism = completions: all at once)."""
    return [index_pod(job, labels, index) for index in range(indexed(job))]


def index_pod(
    job: dict[str, Any], labels: dict[str, str], index: int, tries: int = 0
) -> dict[str, Any]:
    """Pod of ``index`` (``tries``: how many that index had before: a replacement's name
    differs, its host name does not)."""
    name = job["metadata"]["name"]
    suffix = hashlib.sha256(f"{name}/{index}/{tries}".encode()).hexdigest()[:5]
    spec = dict(job["spec"]["template"]["spec"], hostname=f"{name}-{index}")
    meta = {
        "name": f"{name}-{index}-{suffix}",
        "labels": {**labels, "job-name": name, INDEX: str(index)},
        "annotations": {INDEX: str(index)},
        "uid": f"{name}-{index}-{tries}",
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running"}}  # fmt: skip


def container_env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str] | None:
    """The process environment of ``container`` in ``pod`` (None: no ``env`` and no index, so
    the process inherits the test's own, as before). A ``fieldRef`` the downward API cannot
    resolve raises ValueError (the kubelet's CreateContainerConfigError)."""
    index = (pod["metadata"].get("annotations") or {}).get(INDEX)
    if not container.get("env") and index is None:
        return None
    env = dict(os.environ)
    if index is not None:
        env["JOB_COMPLETION_INDEX"] = index
    for var in container.get("env") or []:
        env[var["name"]] = _value(pod, var)
    return env


def _value(pod: dict[str, Any], var: dict[str, Any]) -> str:
    if "value" in var:
        return str(var["value"])
    path = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
    found = FIELD.match(path)
    if found is None:
        raise ValueError(f"unsupported fieldPath {path!r}")
    table = pod["metadata"].get(found.group(1)) or {}
    if found.group(2) not in table:
        raise ValueError(f"{path!r}: no such key on pod {pod['metadata']['name']}")
    return str(table[found.group(2)])


def index_of(pod: dict[str, Any]) -> int | None:
    raw = (pod["metadata"].get("annotations") or {}).get(INDEX)
    return int(raw) if raw is not None else None


def terminated(code: int, reason: str, finished: str) -> dict[str, Any]:
    """A pod's status once its ``agent`` container ended with ``code`` (``reason``: the
    kubelet's word: Completed, Error, OOMKilled)."""
    state = {"terminated": {"exitCode": code, "reason": reason, "finishedAt": finished}}
    container = {"name": "agent", "image": "fake", "imageID": "fake", "ready": False,
                 "restartCount": 0, "state": state}  # fmt: skip
    return {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [container]}


def fail_job_rule(job: dict[str, Any], code: int) -> bool:
    """Whether a ``FailJob`` rule of the Job's ``podFailurePolicy`` matches the ``agent``
    container's exit ``code`` (``operator: In``; the only form rgt writes)."""
    rules = (job["spec"].get("podFailurePolicy") or {}).get("rules") or []
    for rule in rules:
        on = rule.get("onExitCodes") or {}
        ours = rule.get("action") == "FailJob" and on.get("containerName", "agent") == "agent"
        if ours and on.get("operator") == "In" and code in (on.get("values") or []):
            return True
    return False


def job_failed(reason: str, message: str) -> dict[str, Any]:
    return {"type": "Failed", "status": "True", "reason": reason, "message": message}

"""rgt's view of a Kubernetes Job from the API's JSON (the Job's status and its pods): what
``status`` adds to the agent's own files (why a pod is not running, how the Job ended)."""

from __future__ import annotations

from typing import Any

from rgt.agent import jobfiles
from rgt.backends._k8s_group import group_state, nodes_of

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


def job_state(job: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """rgt's view of a Job from the API's JSON (``GET …/jobs/NAME/status`` and its pods); a
    multi-pod job's is its group's (``_k8s_group``)."""
    status = job.get("status") or {}
    true = true_conditions(job)
    out: dict[str, Any] = {
        "job": job["metadata"]["name"],
        "attempts": int(status.get("failed") or 0)
        + int(status.get("succeeded") or 0)
        + int(status.get("active") or 0),
        "label": None,
        "reason": None,
    }
    if nodes_of(job) > 1:
        return group_state(job, pods, nodes_of(job), out)
    if "Complete" in true:
        return dict(out, state="succeeded")
    if "Failed" in true:
        cond = true["Failed"]
        label = pod_label(pods) or FAILED_LABELS.get(cond.get("reason", ""), "unknown")
        return dict(
            out, state="failed", label=label, reason=f"{cond.get('reason')}: {cond.get('message')}"
        )
    waiting = waiting_reason(pods)
    if waiting:
        return dict(out, state="queued", reason=waiting)
    return dict(out, state="running" if status.get("active") else "queued")


def true_conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Job's conditions that hold (``Complete``, ``Failed``, …), by type."""
    conditions = (job.get("status") or {}).get("conditions") or []
    held = (c for c in conditions if isinstance(c, dict) and c.get("status") == "True")
    return {str(c.get("type")): c for c in held}


def pod_label(pods: list[dict[str, Any]]) -> str | None:
    """rgt's label for pods that ended: the kernel's OOM killer is ``host_oom``."""
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = (cs.get("state") or {}).get("terminated") or {}
            if ended.get("reason") == "OOMKilled":
                return "host_oom"
    return None


def waiting_reason(pods: list[dict[str, Any]]) -> str | None:
    """Why a pod is stuck before it runs (an image pull, no node fits), if one is."""
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


AGENT_TERMINAL = jobfiles.TERMINAL  # the one spelling (the agent ships it)


def merge(agent: dict[str, Any], api: dict[str, Any] | None) -> dict[str, Any]:
    """The agent's files (on the claim) say what happened to the job; the API says whether its
    pod runs. Liveness is the API's: the agent's own pid check ran in the files pod, which
    never holds the job's processes. ``api`` is None when the Job is gone (deleted, or
    removed after it finished)."""
    out = dict(agent)
    if api is None:
        out["agent_alive"] = False
        return out
    out["k8s"] = {"job": api["job"], "state": api["state"], "reason": api["reason"]}
    if "pods" in api:  # a multi-pod job: one line per index
        out["k8s"].update(pods=api["pods"], odd_pods=api["odd_pods"], index=api.get("index"))
        if agent.get("state") in AGENT_TERMINAL and api["state"] != "succeeded":
            return _group_over_node0(out, api)
    if agent.get("state") in AGENT_TERMINAL:
        return out
    out["agent_alive"] = api["state"] == "running"
    if api["state"] == "failed":  # the pod died before the agent could write the end
        out.update(state="failed", label=api["label"], reason=api["reason"], done=True)
    elif api["state"] in ("queued", "retrying") and api["reason"]:  # stuck, or an index lost
        out.update(state=api["state"], reason=api["reason"])
    return out


def _group_over_node0(out: dict[str, Any], api: dict[str, Any]) -> dict[str, Any]:
    """The agent's files read are node 0's (pod 0 runs in the job's dir): node 0 may have
    ended while the group has not (a peer still running), or ended well while another index
    failed. The group's state is the API's."""
    ended = api["state"] == "failed"
    out.update(state=api["state"], agent_alive=api["state"] == "running", done=ended)
    if ended or api["reason"]:
        out.update(reason=api["reason"], label=api["label"] if ended else out.get("label"))
    return out

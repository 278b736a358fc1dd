"""rgt's view of a multi-pod job (``--nodes N``: an Indexed Job, ``_render/k8s.py``) from the
API's JSON. Each completion index is one node; the group is what its worst index is:

- ``succeeded``: the Job is Complete (every index succeeded);
- ``failed``: the Job Failed. The reason names the index that failed first and why its pod
  ended (``index 1: OOMKilled (exit 137)``); the label maps as for one pod (OOMKilled is
  ``host_oom``, else the Job's condition: ``BackoffLimitExceeded`` is ``unknown``,
  ``DeadlineExceeded`` is ``preempted``);
- ``retrying``: an index's pod failed and the Job goes on: Kubernetes starts a new pod under
  the same index, which rejoins the rendezvous (the group's retry budget is ``backoffLimit``);
- ``queued``: an index has no running pod yet (pending, unschedulable, an image pull): the
  group cannot meet until every index runs;
- ``running``: every index has a running (or already succeeded) pod: the job is alive.

Pods listed with no index, an index that is not a number or outside ``0..N-1`` are not the
job's nodes (a confused or hostile answer): they are left out and counted (``odd_pods``).
"""

from __future__ import annotations

import json
from typing import Any

from rgt.backends._render.k8s import INDEX_ANNOTATION

ENDED = ("Failed", "Succeeded")


def nodes_of(job: dict[str, Any]) -> int:
    """How many pods (nodes) the Job runs at once: 1 unless it is Indexed with N > 1."""
    spec = job.get("spec") or {}
    completions = spec.get("completions")
    if spec.get("completionMode") != "Indexed" or not isinstance(completions, int):
        return 1
    return max(completions, 1)


def group_state(
    job: dict[str, Any], pods: list[dict[str, Any]], nodes: int, out: dict[str, Any]
) -> dict[str, Any]:
    """``out`` (the Job's name and attempts) with the group's state, reason and label, and
    ``pods``: one line per index."""
    from rgt.backends._k8s_state import FAILED_LABELS, pod_label, true_conditions, waiting_reason

    by_index, odd = _by_index(pods, nodes)
    out = dict(out, pods=[_line(i, by_index.get(i, [])) for i in range(nodes)], odd_pods=odd)
    true = true_conditions(job)
    if "Complete" in true:
        return dict(out, state="succeeded")
    failed = _first_failed(by_index)
    if "Failed" in true:
        cond = true["Failed"]
        why = f"index {failed[0]}: {_why(failed[1])}; " if failed else ""
        label = (pod_label([failed[1]]) if failed else None) or FAILED_LABELS.get(
            str(cond.get("reason") or ""), "unknown"
        )
        said = f"{why}{cond.get('reason')}: {cond.get('message')}"
        return dict(out, state="failed", label=label, reason=said, index=failed and failed[0])
    return _going(out, by_index, nodes, waiting_reason(pods))


def _going(
    out: dict[str, Any], by_index: dict[int, list[dict[str, Any]]], nodes: int, stuck: str | None
) -> dict[str, Any]:
    """A Job that has not ended: retrying, queued or running (see the module's docstring)."""
    lost = [(i, p) for i, p in sorted(by_index.items()) if not _live(p) and not _up(p)]
    if lost:
        index, pod = lost[0][0], next(p for p in lost[0][1] if _failed(p))
        said = f"index {index} failed ({_why(pod)}); Kubernetes starts a new pod for it"
        return dict(out, state="retrying", reason=said, index=index)
    if stuck:
        return dict(out, state="queued", reason=stuck)
    up = [i for i in range(nodes) if _up(by_index.get(i, []))]
    if len(up) == nodes:
        return dict(out, state="running")
    behind = ", ".join(str(i) for i in range(nodes) if i not in up)
    return dict(
        out, state="queued", reason=f"{len(up)} of {nodes} pods running (waiting: index {behind})"
    )


def _by_index(
    pods: list[dict[str, Any]], nodes: int
) -> tuple[dict[int, list[dict[str, Any]]], int]:
    """Index -> its pods (a failed one and its replacement: both); how many pods had no index."""
    out: dict[int, list[dict[str, Any]]] = {}
    odd = 0
    for pod in pods:
        index = _index(pod)
        if index is None or not 0 <= index < nodes:
            odd += 1
            continue
        out.setdefault(index, []).append(pod)
    return out, odd


def _index(pod: dict[str, Any]) -> int | None:
    meta = pod.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(INDEX_ANNOTATION)
    if raw is None:
        raw = (meta.get("labels") or {}).get(INDEX_ANNOTATION)
    text = str(raw) if raw is not None else ""
    return int(text) if text.isdigit() and len(text) < 7 else None


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _live(pods: list[dict[str, Any]]) -> bool:
    return any(_phase(p) not in ENDED for p in pods)


def _up(pods: list[dict[str, Any]]) -> bool:
    """The index's pod runs, or it already succeeded (a node that finished first)."""
    return any(_phase(p) in ("Running", "Succeeded") for p in pods)


def _failed(pod: dict[str, Any]) -> bool:
    return _phase(pod) == "Failed"


def _first_failed(by_index: dict[int, list[dict[str, Any]]]) -> tuple[int, dict[str, Any]] | None:
    """The failed pod that ended first (its container's ``finishedAt``; ties by index): the
    cause. The others' ends (SIGTERM when the Job failed, a lost peer) followed from it."""
    failed = [(i, p) for i, pods in by_index.items() for p in pods if _failed(p)]
    if not failed:
        return None
    return min(failed, key=lambda found: (_finished(found[1]), found[0]))


def _terminated(pod: dict[str, Any]) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(cs, dict) and cs.get("name") == "agent":
            ended = (cs.get("state") or {}).get("terminated")
            return ended if isinstance(ended, dict) else {}
    return {}


def _finished(pod: dict[str, Any]) -> str:
    return str(_terminated(pod).get("finishedAt") or "~")  # '~' sorts after any timestamp


def _why(pod: dict[str, Any]) -> str:
    """``OOMKilled (exit 137)``, ``Error (exit 2)``, or the pod's own reason (``NodeLost``)."""
    ended = _terminated(pod)
    if ended:
        return f"{ended.get('reason') or 'terminated'} (exit {ended.get('exitCode')})"
    status = pod.get("status") or {}
    message = f": {status['message']}" if status.get("message") else ""
    return f"{status.get('reason') or 'Failed'}{message}"


def _line(index: int, pods: list[dict[str, Any]]) -> dict[str, Any]:
    if not pods:
        return {"index": index, "pod": None, "phase": None}
    pod = next((p for p in pods if _phase(p) not in ENDED), pods[-1])
    line = {"index": index, "pod": (pod.get("metadata") or {}).get("name"), "phase": _phase(pod)}
    return dict(line, why=_why(pod)) if _failed(pod) else line


def group_manifest(
    node0: dict[str, Any], others: list[dict[str, Any]]
) -> tuple[dict[str, Any], bytes]:
    """One manifest for the group, so ``rgt pull`` and the teardown gate cover every pod: pod
    0's (the job's dir) with pod R's entries under ``nodes/R/`` (its dir, relative to the
    job's: what ``fetch`` reads). ``ckpt/`` is the group's one dir (pod R's is a link to it):
    listed once, from pod 0's manifest. The bytes are canonical (sorted keys), so the pull's
    record and the gate hash the same manifest."""
    files = list(node0.get("files") or [])
    units = list(node0.get("units") or [])
    for rank, doc in enumerate(others, start=1):
        prefix = f"nodes/{rank}/"
        own = [e for e in doc.get("files") or [] if not str(e["path"]).startswith("ckpt/")]
        files += [_under(prefix, e) for e in own]
        units += [
            dict(u, path=_join(prefix, str(u.get("path"))))
            for u in doc.get("units") or []
            if not str(u.get("path")).startswith("ckpt")
        ]
    totals = {"files": len(files), "bytes": sum(int(e["bytes"]) for e in files)}
    doc = dict(node0, files=files, units=units, totals=totals, nodes=1 + len(others))
    return doc, (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _under(prefix: str, entry: dict[str, Any]) -> dict[str, Any]:
    moved = dict(entry, path=prefix + str(entry["path"]))
    if isinstance(entry.get("unit"), str):
        moved["unit"] = _join(prefix, entry["unit"])
    return moved


def _join(prefix: str, path: str) -> str:
    return prefix.rstrip("/") if path in (".", "") else prefix + path

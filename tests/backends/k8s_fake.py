"""A fake Kubernetes API server on loopback, for the endpoints rgt's Kubernetes backend uses.

It answers the official client over plain HTTP (bearer token checked) and runs "pods" as
processes on this host: the claim's mount path is a real directory here, so a pod sees the
claim where the manifest mounts it. Implemented:

- pods: create, read, list by label selector (``k=v,...``), delete; exec over a websocket
  speaking the v5 channel protocol (channels 0-3, CLOSE of stdin, the ``Status`` on the error
  channel);
- configmaps: create; jobs: create (the init container's script, then the ``agent``
  container, as processes; the ConfigMap's mount is a temp dir put in place of its path in the
  scripts; the pod carries the template's labels and ``job-name``), list by label selector,
  read status (``Complete``/``Failed`` conditions from the exit code), delete
  (SIGTERM to the pod's process group); ``Cluster.lose_node``: a pod the API calls Failed whose
  processes run on (what a partitioned node looks like from the API server);
- Indexed Jobs (``completionMode: Indexed``): validated as the API documents, one pod per index
  with its index annotation, host name and resolved ``env`` (``k8s_fake_indexed.py``);
  ``Cluster.fail_index``: one index's pod ends (OOMKilled, an exit code) and the Job fails;
- services: create (validated), read, delete; every DELETE's ``propagationPolicy`` is kept
  (``Cluster.deletes``).

Every request is recorded (``Cluster.requests``) so a test can count round trips.

Not a Kubernetes: no scheduling, images, limits, retries of pods or admission.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from rgt.backends._render.k8s import INPUT_MOUNT
from tests.backends import _ws
from tests.backends import k8s_fake_indexed as indexed

TOKEN = "fake-cluster-token"
NOW = "2026-12-01T00:00:00Z"


@dataclass
class Cluster:
    """What the fake API server holds (one namespace is enough; names are per namespace)."""

    root: Path  # scratch for ConfigMap mounts
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    configmaps: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[str] = field(default_factory=list)  # "GET /api/v1/…", one per round trip
    deletes: list[tuple[str, str, str | None]] = field(default_factory=list)  # kind, name, policy
    ends: itertools.count[int] = field(default_factory=itertools.count)  # finishedAt's clock

    def start_job(self, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        job["metadata"].update(uid=name, creationTimestamp=NOW)
        pod_spec = job["spec"]["template"]["spec"]
        labels = job["spec"]["template"].get("metadata", {}).get("labels") or {}
        pods = indexed.indexed_pods(job, labels) or [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-0", "labels": {**labels, "job-name": name},
                             "uid": name},
                "spec": pod_spec,
                "status": {"phase": "Running"},
            }
        ]  # fmt: skip
        job["status"] = {"active": len(pods), "startTime": NOW}
        self.jobs[name] = job
        for pod in pods:
            self.pods[pod["metadata"]["name"]] = pod
            threading.Thread(target=self._run_pod, args=(job, pod), daemon=True).start()

    def _run_pod(self, job: dict[str, Any], pod: dict[str, Any]) -> None:
        spec = pod["spec"]
        inputs = self._mount_config_map(spec)
        try:
            envs = [indexed.container_env(pod, c) for c in spec["containers"]]
            for init in spec.get("initContainers") or []:
                subprocess.run(_in_pod(init["command"], inputs), check=True, timeout=60,
                               env=indexed.container_env(pod, init))  # fmt: skip
        except ValueError as exc:  # the kubelet cannot make the container's environment
            waiting = {"reason": "CreateContainerConfigError", "message": str(exc)}
            pod["status"] = {"phase": "Pending", "containerStatuses": [
                {"name": "agent", "state": {"waiting": waiting}}]}  # fmt: skip
            return
        agent = spec["containers"][0]
        log = self.root / f"{pod['metadata']['name']}.log"
        with log.open("wb") as out, self.lock:
            if pod["metadata"]["name"] not in self.pods:  # deleted before its container started
                return
            proc = subprocess.Popen(
                _in_pod(agent["command"], inputs),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=envs[0],
            )
            self.procs[pod["metadata"]["name"]] = proc
        code = proc.wait()
        _kill_group(proc.pid, signal.SIGKILL)  # a container's other processes end with it
        with self.lock:
            if pod["status"].get("phase") == "Failed":  # the API said so first (fail_index)
                return
            if indexed.index_of(pod) is None:
                _ended(job, pod, code)
            else:
                self._index_ended(job, pod, code, "Completed" if code == 0 else "Error")

    def _index_ended(self, job: dict[str, Any], pod: dict[str, Any], code: int, why: str) -> None:
        """One index's pod ended, handled as the Job controller documents it: the Job is
        Complete once every index succeeded; a failure that matches the ``FailJob`` rule (the
        agent's exit 1) fails the Job at once; any other counts against ``backoffLimit`` and,
        while within it, the index gets a new pod after the controller's back-off delay (here:
        when the test calls ``replace_index``); past it, the Job fails. A failed Job's other
        pods are deleted."""
        tick = next(self.ends)  # one second per ended pod: finishedAt orders them
        pod["status"] = indexed.terminated(
            code, why, f"2026-12-01T00:{tick // 60:02d}:{tick % 60:02d}Z"
        )
        status = job["status"]
        name = job["metadata"]["name"]
        mine = [p for p in self.pods.values() if _job_of(p) == name]
        running = sum(p["status"].get("phase") == "Running" for p in mine)
        if code == 0:
            done = sum(p["status"].get("phase") == "Succeeded" for p in mine)
            status.update(succeeded=done, active=running)
            if done == indexed.indexed(job):
                status["conditions"] = [{"type": "Complete", "status": "True"}]
            return
        status.update(failed=int(status.get("failed") or 0) + 1, active=running)
        said = f"pod of index {indexed.index_of(pod)}: container agent exited {code} ({why})"
        if indexed.fail_job_rule(job, code):
            return self._job_failed(job, mine, "PodFailurePolicy", said)
        if status["failed"] > int(job["spec"].get("backoffLimit", 6)):
            return self._job_failed(job, mine, "BackoffLimitExceeded", said)

    def _job_failed(
        self, job: dict[str, Any], mine: list[dict[str, Any]], reason: str, said: str
    ) -> None:
        job["status"].update(active=0, conditions=[indexed.job_failed(reason, said)])
        for other in mine:
            if other["status"].get("phase") == "Running":
                self.pods.pop(other["metadata"]["name"])
                proc = self.procs.pop(other["metadata"]["name"], None)
                if proc:
                    _kill_group(proc.pid, signal.SIGTERM)

    def fail_index(self, name: str, index: int, reason: str = "OOMKilled", code: int = 137) -> None:
        """Index ``index`` of Job ``name`` ends as the kubelet reports it (``OOMKilled``,
        exit 137: the cgroup's OOM killer), its processes killed; the Job goes on (a new pod
        for the index once ``replace_index`` is called) or fails, as ``_index_ended`` says."""
        with self.lock:
            job = self.jobs[name]
            pod = next(
                p
                for p in self.pods.values()
                if _job_of(p) == name
                and indexed.index_of(p) == index
                and p["status"]["phase"] == "Running"
            )
            proc = self.procs.get(pod["metadata"]["name"])
            self._index_ended(job, pod, code, reason)
        if proc:
            _kill_group(proc.pid, signal.SIGKILL)

    def replace_index(self, name: str, index: int) -> None:
        """The controller's back-off delay has passed: index ``index`` gets a new pod (the
        failed one stays listed, as the API keeps it)."""
        with self.lock:
            job = self.jobs[name]
            labels = job["spec"]["template"].get("metadata", {}).get("labels") or {}
            tries = sum(_job_of(p) == name and indexed.index_of(p) == index
                        for p in self.pods.values())  # fmt: skip
            pod = indexed.index_pod(job, labels, index, tries)
            self.pods[pod["metadata"]["name"]] = pod
            job["status"]["active"] = int(job["status"].get("active") or 0) + 1
        threading.Thread(target=self._run_pod, args=(job, pod), daemon=True).start()

    def _mount_config_map(self, spec: dict[str, Any]) -> Path:
        name = next(v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v)
        found = self.configmaps[name]
        directory = Path(tempfile.mkdtemp(prefix="cm-", dir=self.root))
        for key, text in (found.get("data") or {}).items():
            (directory / key).write_text(text)
        for key, b64 in (found.get("binaryData") or {}).items():
            (directory / key).write_bytes(base64.b64decode(b64))
        return directory

    def stop_job(self, name: str) -> None:
        self.jobs.pop(name, None)
        for pod_name in [p for p, pod in self.pods.items() if _job_of(pod) == name]:
            self.pods.pop(pod_name)
            proc = self.procs.pop(pod_name, None)
            if proc:
                _kill_group(proc.pid, signal.SIGTERM)

    def lose_node(self, name: str) -> None:
        """The node under Job ``name``'s pod is gone, as the API server tells it: the pod
        Failed (``DisruptionTarget``, as the taint manager marks it), the Job Failed with
        its retries spent. The pod's processes run on here, as a partitioned node's do: the
        agent in rgt's files pod can still see them (here, one host), the API cannot."""
        with self.lock:
            job = self.jobs[name]
            for pod in (p for p in self.pods.values() if _job_of(p) == name):
                pod["status"] = {
                    "phase": "Failed",
                    "reason": "NodeLost",
                    "conditions": [{"type": "DisruptionTarget", "status": "True",
                                    "reason": "DeletionByTaintManager"}],
                }  # fmt: skip
            failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                      "message": "Job has reached the specified backoff limit"}  # fmt: skip
            job["status"] = {"failed": 1, "conditions": [failed]}

    def close(self) -> None:
        for name in list(self.jobs):
            self.stop_job(name)
        for proc in self.procs.values():
            _kill_group(proc.pid, signal.SIGKILL)


def _kill_group(pgid: int, sig: int) -> None:
    """Signal every process of a pod's session, also after its first process has exited
    (background children such as the log follower keep the group alive)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _in_pod(command: list[str], inputs: Path) -> list[str]:
    return [part.replace(INPUT_MOUNT, str(inputs)) for part in command]


def _job_of(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("labels") or {}).get("job-name")


def _ended(job: dict[str, Any], pod: dict[str, Any], code: int) -> None:
    ok = code == 0
    terminated = {"exitCode": code, "reason": "Completed" if ok else "Error"}
    pod["status"] = {
        "phase": "Succeeded" if ok else "Failed",
        "containerStatuses": [
            {
                "name": "agent",
                "image": "fake",
                "imageID": "fake",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ],
    }
    condition = {"type": "Complete" if ok else "Failed", "status": "True"}
    if not ok:
        condition.update(reason="PodFailurePolicy", message=f"container agent exited {code}")
    job["status"] = {"succeeded" if ok else "failed": 1, "conditions": [condition]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cluster: Cluster  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _parts(self) -> tuple[list[str], dict[str, list[str]]]:
        url = urlparse(self.path)
        return [p for p in url.path.split("/") if p], parse_qs(url.query)

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self._send(401, _status(401, "Unauthorized", "no or wrong bearer token"))
        return False

    def _send(self, code: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        return data

    def do_GET(self) -> None:
        self.cluster.requests.append(f"{self.command} {urlparse(self.path).path}")
        if not self._authorized():
            return
        parts, query = self._parts()
        with self.cluster.lock:
            kind, name, sub = _route(parts)
            if kind == "services":
                return self._send(*_found(self.cluster.services.get(name or ""), kind, name or ""))
            if kind == "pods" and sub == "exec":
                pod = self.cluster.pods.get(name or "")
            elif kind == "pods" and name:
                found = self.cluster.pods.get(name)
                return self._send(*_found(found, "pods", name))
            elif kind == "pods":
                items = _selected(self.cluster.pods.values(), query)
                return self._send(200, {"kind": "PodList", "apiVersion": "v1", "items": items})
            elif kind == "jobs" and name:
                return self._send(*_found(self.cluster.jobs.get(name), "jobs", name))
            elif kind == "jobs":
                items = _selected(self.cluster.jobs.values(), query)
                return self._send(
                    200, {"kind": "JobList", "apiVersion": "batch/v1", "items": items}
                )
            else:
                return self._send(404, _status(404, "NotFound", self.path))
        if pod is None or pod["status"]["phase"] != "Running":
            return self._send(400, _status(400, "BadRequest", f"pod {name} is not running"))
        _ws.serve_exec(self, query)

    def do_POST(self) -> None:
        self.cluster.requests.append(f"{self.command} {urlparse(self.path).path}")
        if not self._authorized():
            return
        kind, _, _ = _route(self._parts()[0])
        doc = self._body()
        name = doc["metadata"]["name"]
        store = {"pods": self.cluster.pods, "configmaps": self.cluster.configmaps,
                 "services": self.cluster.services}  # fmt: skip
        with self.cluster.lock:
            if name in store.get(kind, self.cluster.jobs):
                return self._send(409, _status(409, "AlreadyExists", f"{kind} {name!r}"))
            invalid = (
                indexed.invalid_job(doc, self.cluster.services) if kind == "jobs"
                else indexed.invalid_service(doc) if kind == "services" else None
            )  # fmt: skip
            if invalid:
                return self._send(422, _status(422, "Invalid", f"{kind} {name!r}: {invalid}"))
            if kind == "services":
                self.cluster.services[name] = doc
            elif kind == "jobs":
                self.cluster.start_job(doc)
            elif kind == "pods":
                doc["status"] = {"phase": "Running"}
                self.cluster.pods[name] = doc
            else:
                self.cluster.configmaps[name] = doc
        self._send(201, doc)

    def do_DELETE(self) -> None:
        self.cluster.requests.append(f"{self.command} {urlparse(self.path).path}")
        if not self._authorized():
            return
        parts, query = self._parts()
        kind, name, _ = _route(parts)
        policy = query.get("propagationPolicy", [None])[0]
        with self.cluster.lock:
            self.cluster.deletes.append((kind, name or "", policy))
            if kind == "services":
                found = self.cluster.services.pop(name or "", None)
                return self._send(*_found(found, kind, name or ""))
            if kind == "jobs":
                self.cluster.stop_job(name or "")
                return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
            pod = self.cluster.pods.pop(name or "", None)
        self._send(*_found(pod, "pods", name or ""))  # the API answers with the deleted pod


def _selected(docs: Any, query: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The objects whose labels match every ``key=value`` of the ``labelSelector``."""
    wanted = [t.partition("=")[::2] for t in query.get("labelSelector", [""])[0].split(",") if t]
    return [
        d for d in docs if all((d["metadata"].get("labels") or {}).get(k) == v for k, v in wanted)
    ]


def _route(parts: list[str]) -> tuple[str, str | None, str | None]:
    """``…/namespaces/NS/KIND[/NAME[/SUB]]`` -> (KIND, NAME, SUB)."""
    rest = parts[parts.index("namespaces") + 2 :] if "namespaces" in parts else parts[-1:]
    return rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)


def _found(doc: dict[str, Any] | None, kind: str, name: str) -> tuple[int, dict[str, Any]]:
    return (200, doc) if doc is not None else (404, _status(404, "NotFound", f"{kind} {name}"))


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}  # fmt: skip


@dataclass(frozen=True)
class FakeApi:
    url: str
    kubeconfig: Path
    context: str
    cluster: Cluster


def kubeconfig(path: Path, url: str, context: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "rgt-test", "user": {"token": TOKEN}}],
        "contexts": [{"name": context, "context": {"cluster": "fake", "user": "rgt-test"}}],
        "current-context": context,
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


@pytest.fixture(scope="session")
def k8s_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeApi]:
    root = tmp_path_factory.mktemp("k8s")
    cluster = Cluster(root)
    handler = type("BoundHandler", (Handler,), {"cluster": cluster})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    context = "ctx-" + hashlib.sha256(url.encode()).hexdigest()[:6]
    try:
        yield FakeApi(url, kubeconfig(root / "kubeconfig", url, context), context, cluster)
    finally:
        server.shutdown()
        server.server_close()
        cluster.close()

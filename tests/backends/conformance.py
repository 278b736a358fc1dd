"""One job lifecycle that every backend must pass: push code → submit → status → logs →
events → manifest → fetch. ``tests/backends/test_conformance.py`` runs it on each backend;
a new backend adds itself there."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from rgt.backends.base import Backend
from rgt.models import TERMINAL, JobSpec, JobState
from rgt.state.store import utcnow
from rgt.transport.snapshot import take_snapshot

JOB = """
import json, os, pathlib, sys
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
token = os.environ.get("TOKEN", "")
config = pathlib.Path("config.txt").read_text()
(out / "result.json").write_text(json.dumps({"config": config, "token_len": len(token)}))
print("hello from", os.environ["RGT_JOB_ID"], flush=True)
"""
SECRET = "s3cr3t-conformance-value"


def write_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.py").write_text(JOB)
    (root / "config.txt").write_text("from the snapshot")
    return root


def wait_terminal(backend: Backend, job_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = backend.status(job_id)
        if JobState(status.get("state", "queued")) in TERMINAL or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def run_lifecycle(backend: Backend, project: Path, dest: Path, job_id: str) -> None:
    snapshot = take_snapshot(project)
    remote_code = backend.push_snapshot(snapshot)
    assert remote_code == backend.root.snapshot(snapshot.digest)
    assert backend.push_snapshot(snapshot) == remote_code  # idempotent: same tree, same folder
    spec = JobSpec(
        job_id=job_id,
        machine=backend.machine.name,
        command=(backend.python, "job.py"),
        code_snapshot=snapshot.digest,
        secret_env=("TOKEN",),
        created=utcnow(),
    )
    backend.submit(spec, {"TOKEN": SECRET})
    status = wait_terminal(backend, job_id)
    assert status["state"] == "succeeded", status
    assert status["done"] is True
    log = backend.log(job_id, int(status["attempt"]))
    assert f"hello from {job_id}".encode() in log
    assert backend.log(job_id, int(status["attempt"]), offset=len(log)) == b""
    assert "succeeded" in {event.get("kind") for event in backend.events(job_id)}
    found = backend.manifest(job_id)
    assert found is not None
    manifest, _raw = found
    entry = {f["path"]: f for f in manifest["files"]}["outputs/result.json"]
    target = dest / "result.json"
    backend.fetch(job_id, "outputs/result.json", target)
    data = target.read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert data == b'{"config": "from the snapshot", "token_len": 24}'
    assert SECRET.encode() not in (
        backend.transport.read_bytes(backend.job_paths(job_id).spec) or b""
    )

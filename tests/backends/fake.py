"""An in-memory backend for fast tests of the logic above the backend (the gate, pull, status).

Job states, files and manifests live in dicts. ``submit`` runs the job's command at once, in a
scratch copy of the snapshot on this host, and keeps only what the machine would keep (its log,
events, outputs and manifest): so it passes the conformance suite, and ``set_job`` still puts a
job in any state for truth tables (16 gate combinations don't each need a training job).

Importing this module registers it as the ``fake`` backend (tests only: it is not in the
production registry).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rgt.agent.paths import JobPaths
from rgt.backends import register_backend
from rgt.backends.base import Backend
from rgt.errors import BackendError, NotSupportedError
from rgt.models import JobSpec, Machine
from rgt.resources import Resources
from rgt.state.store import utcnow
from rgt.transport.base import ProgressFn
from rgt.transport.local import LocalTransport
from rgt.transport.snapshot import Snapshot

register_backend("fake", "tests.backends.fake", "FakeBackend")


@dataclass
class Running:
    """A job's process, in a scratch copy of its snapshot (the "machine" of the fake)."""

    proc: subprocess.Popen[bytes]
    scratch: tempfile.TemporaryDirectory[str]

    @classmethod
    def start(
        cls, spec: JobSpec, secrets: dict[str, str], snapshots: dict[str, dict[str, bytes]]
    ) -> Running:
        scratch = tempfile.TemporaryDirectory(prefix="rgt-fake-")
        code, out = Path(scratch.name) / "code", Path(scratch.name) / "outputs"
        for rel, data in snapshots.get(spec.code_snapshot or "", {}).items():
            (code / rel).parent.mkdir(parents=True, exist_ok=True)
            (code / rel).write_bytes(data)
        code.mkdir(exist_ok=True)
        out.mkdir()
        env = {**os.environ, **spec.env, "RGT_JOB_ID": spec.job_id, "RGT_OUTPUT_DIR": str(out)}
        env.update({k: v for k, v in secrets.items() if k in spec.secret_env})
        log = (Path(scratch.name) / "log").open("wb")
        proc = subprocess.Popen(spec.command, cwd=code, env=env, stdout=log, stderr=log)
        log.close()
        return cls(proc, scratch)

    def finish(self) -> tuple[int, bytes, dict[str, bytes]]:
        """Kill the process if it still runs; its exit code, log and outputs; scratch gone."""
        if self.proc.poll() is None:
            self.proc.kill()
        returncode = self.proc.wait()
        root = Path(self.scratch.name)
        out = root / "outputs"
        found = {f"outputs/{p.relative_to(out).as_posix()}": p for p in out.rglob("*")}
        outputs = {rel: p.read_bytes() for rel, p in found.items() if p.is_file()}
        log = (root / "log").read_bytes()
        self.scratch.cleanup()
        return returncode, log, outputs


class FakeBackend(Backend):
    kind = "fake"
    # Shared across instances (get_backend builds a new one per call), keyed by machine name.
    jobs: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {}
    files: ClassVar[dict[str, dict[str, bytes]]] = {}
    logs: ClassVar[dict[str, bytes]] = {}
    job_events: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    snapshots: ClassVar[dict[str, dict[str, bytes]]] = {}
    running: ClassVar[dict[str, Running]] = {}
    meter_stops: ClassVar[list[str]] = []

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine, LocalTransport())
        self.jobs.setdefault(machine.name, {})

    def detach(
        self,
        argv: Sequence[str],
        *,
        job: JobPaths,
        stdin: bytes | None = None,
        resources: Resources | None = None,
    ) -> None:
        raise NotSupportedError(
            "detaching an agent", self.kind, fix="submit() runs the job; set_job() sets a state"
        )

    def stop_meter(self) -> str:
        self.meter_stops.append(self.machine.name)
        return "fake meter stopped"

    def set_job(self, job_id: str, state: str, files: dict[str, bytes] | None = None) -> None:
        """Put a job in a state; with ``files``, also write its manifest."""
        done = state in ("succeeded", "failed", "cancelled")
        status = {"job_id": job_id, "state": state, "attempt": 1, "done": done}
        self.jobs[self.machine.name][job_id] = status
        if files is not None:
            entries = [
                {"path": p, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                for p, b in sorted(files.items())
            ]
            manifest = {"schema": "rgt.manifest/1", "job_id": job_id, "state": state}
            self.files.setdefault(job_id, {}).update(files)
            self.files[job_id]["manifest.json"] = json.dumps(
                {**manifest, "files": entries}
            ).encode()

    # -- the lifecycle, in memory ------------------------------------------------------------

    def push_snapshot(self, snapshot: Snapshot, progress: ProgressFn | None = None) -> str:
        if snapshot.digest not in self.snapshots:
            self.snapshots[snapshot.digest] = {
                f.rel: (snapshot.root / f.rel).read_bytes() for f in snapshot.files
            }
        return self.root.snapshot(snapshot.digest)

    def submit(
        self,
        spec: JobSpec,
        secrets: dict[str, str] | None = None,
        resources: Resources | None = None,
    ) -> JobPaths:
        if spec.job_id in self.jobs[self.machine.name]:
            raise BackendError(f"job {spec.job_id} already exists", backend=self.kind)
        self.set_job(spec.job_id, "running")
        self.files[spec.job_id] = {"spec.json": json.dumps(spec.to_json(), indent=2).encode()}
        self.job_events[spec.job_id] = [{"kind": "attempt_started", "ts": utcnow()}]
        self.running[spec.job_id] = Running.start(spec, secrets or {}, self.snapshots)
        return self.job_paths(spec.job_id)

    def _settle(self, job_id: str, cancelled: bool = False) -> None:
        """An ended (or, with ``cancelled``, killed) process becomes the job's end state."""
        running = self.running.get(job_id)
        if running is None or (running.proc.poll() is None and not cancelled):
            return
        del self.running[job_id]
        returncode, log, outputs = running.finish()
        state = "cancelled" if cancelled else "succeeded" if returncode == 0 else "failed"
        self.logs[job_id] = log
        self.set_job(job_id, state, outputs)
        detail = {"exit_code": returncode}
        self.job_events[job_id].append({"kind": state, "ts": utcnow(), "detail": detail})

    def status(self, job_id: str) -> dict[str, Any]:
        self._settle(job_id)
        found = self.jobs[self.machine.name].get(job_id)
        return dict(found) if found else {"job_id": job_id, "state": "queued", "exists": False}

    def machine_jobs(self) -> dict[str, dict[str, Any]]:
        return {job_id: dict(status) for job_id, status in self.jobs[self.machine.name].items()}

    def cancel(self, job_id: str) -> dict[str, Any]:
        if job_id in self.running:
            self._settle(job_id, cancelled=True)
        else:
            self.set_job(job_id, "cancelled")
        return {"job_id": job_id, "state": "cancelled"}

    def events(self, job_id: str) -> list[dict[str, Any]]:
        return list(self.job_events.get(job_id, []))

    def log(self, job_id: str, attempt: int, offset: int = 0) -> bytes:
        return self.logs.get(job_id, b"")[offset:]

    def manifest(self, job_id: str) -> tuple[dict[str, Any], bytes] | None:
        raw = self.files.get(job_id, {}).get("manifest.json")
        return (json.loads(raw), raw) if raw else None

    def fetch(self, job_id: str, rel: str, dest: Path, progress: ProgressFn | None = None) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.files[job_id][rel])

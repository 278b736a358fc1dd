"""An in-memory backend for fast unit tests of logic above the backend (the gate, status).

It keeps job states and manifests in dicts instead of talking to an agent. Real behaviour is
tested on the local, ssh and slurm backends with the real agent; this one exists so that truth
tables (16 gate combinations, say) don't each need a training job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rgt.backends.base import Backend
from rgt.errors import UnknownJobError
from rgt.models import Machine
from rgt.transport.base import ProgressFn
from rgt.transport.local import LocalTransport


class FakeBackend(Backend):
    kind = "fake"
    # Shared across instances (get_backend builds a new one per call), keyed by machine name.
    jobs: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {}
    files: ClassVar[dict[str, dict[str, bytes]]] = {}
    meter_stops: ClassVar[list[str]] = []

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine, LocalTransport())
        self.jobs.setdefault(machine.name, {})

    def detach(self, argv: Sequence[str], *, stdin: bytes | None = None) -> None:
        raise NotImplementedError("the fake backend starts no processes; use set_job()")

    def stop_meter(self) -> str:
        self.meter_stops.append(self.machine.name)
        return "fake meter stopped"

    def set_job(self, job_id: str, state: str, files: dict[str, bytes] | None = None) -> None:
        """Put a job in a state; with ``files``, also write its manifest."""
        self.jobs[self.machine.name][job_id] = {"job_id": job_id, "state": state, "attempt": 1}
        if files is not None:
            import hashlib

            entries = [
                {"path": p, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                for p, b in sorted(files.items())
            ]
            manifest = {
                "schema": "rgt.manifest/1",
                "job_id": job_id,
                "state": state,
                "files": entries,
            }
            self.files[job_id] = dict(files)
            self.files[job_id]["manifest.json"] = json.dumps(manifest).encode()

    def status(self, job_id: str) -> dict[str, Any]:
        try:
            return dict(self.jobs[self.machine.name][job_id])
        except KeyError:
            raise UnknownJobError(job_id) from None

    def machine_jobs(self) -> dict[str, dict[str, Any]]:
        return {job_id: dict(status) for job_id, status in self.jobs[self.machine.name].items()}

    def manifest(self, job_id: str) -> tuple[dict[str, Any], bytes] | None:
        raw = self.files.get(job_id, {}).get("manifest.json")
        return (json.loads(raw), raw) if raw else None

    def fetch(self, job_id: str, rel: str, dest: Path, progress: ProgressFn | None = None) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.files[job_id][rel])

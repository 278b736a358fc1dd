"""A fast backend for tests of the logic above the backend (the gate, pull, status).

What it fakes is the agent, not the base: a job's state lives in a dict (``set_job`` puts a job
in any state for truth tables: 16 gate combinations don't each need a training job), while
everything the agent would leave on the machine (the code snapshot, the log, the events, the
outputs and the manifest) is written in the agent's own layout under the machine's durable
root, and read back by ``Backend``'s own derived code over a real ``LocalTransport``
(``push_snapshot``, ``events``, ``log``, ``manifest``, ``fetch`` are not overridden here). So
the conformance suite run on this fake exercises the base, and a change to how the base reads
the agent's files is seen by the fast tests too. Its one read is the base's ``read_jobs`` over a
faked ``patrol`` (``_patrol``). ``submit`` runs the job's command at once, in a
scratch copy of the pushed snapshot, and keeps only what the machine would keep.

Importing this module registers it as the ``fake`` backend (tests only: it is not in the
production registry).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
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
from rgt.transport.local import LocalTransport

register_backend("fake", "tests.backends.fake", "FakeBackend")


@dataclass
class Running:
    """A job's process, in a scratch copy of its snapshot (the "machine" of the fake)."""

    proc: subprocess.Popen[bytes]
    scratch: tempfile.TemporaryDirectory[str]

    @classmethod
    def start(cls, spec: JobSpec, secrets: dict[str, str], pushed: Path | None) -> Running:
        scratch = tempfile.TemporaryDirectory(prefix="rgt-fake-")
        code, out = Path(scratch.name) / "code", Path(scratch.name) / "outputs"
        if pushed is not None and pushed.is_dir():  # the snapshot push_snapshot put there
            shutil.copytree(pushed, code, symlinks=True)
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
        """Put a job in a state; with ``files``, also write them and the manifest naming
        them into its job dir, as the agent's finalize would."""
        done = state in ("succeeded", "failed", "cancelled")
        status = {"job_id": job_id, "state": state, "attempt": 1, "done": done}
        self.jobs[self.machine.name][job_id] = status
        if files is None:
            return
        entries = [
            {"path": p, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
            for p, b in sorted(files.items())
        ]
        manifest = {"schema": "rgt.manifest/1", "job_id": job_id, "state": state}
        for rel, data in files.items():
            self._write(job_id, rel, data)
        self._write(job_id, "manifest.json", json.dumps({**manifest, "files": entries}).encode())

    def _write(self, job_id: str, rel: str, data: bytes) -> None:
        """A file of the job dir on the "machine" (the durable root, on this host)."""
        path = Path(self.job_paths(job_id).root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def _event(self, job_id: str, kind: str, detail: dict[str, Any] | None = None) -> None:
        """One line of the job's events.jsonl, in the agent's format."""
        event = {"kind": kind, "ts": utcnow(), **({"detail": detail} if detail else {})}
        path = Path(self.job_paths(job_id).events)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as lines:
            lines.write(json.dumps(event) + "\n")

    # -- the lifecycle: the agent's part, faked ---------------------------------------------

    def submit(
        self,
        spec: JobSpec,
        secrets: dict[str, str] | None = None,
        resources: Resources | None = None,
    ) -> JobPaths:
        if spec.job_id in self.jobs[self.machine.name]:
            raise BackendError(f"job {spec.job_id} already exists", backend=self.kind)
        self.set_job(spec.job_id, "running")
        self._write(spec.job_id, "spec.json", json.dumps(spec.to_json(), indent=2).encode())
        self._event(spec.job_id, "attempt_started")
        pushed = Path(self.root.snapshot(spec.code_snapshot)) if spec.code_snapshot else None
        self.running[spec.job_id] = Running.start(spec, secrets or {}, pushed)
        return self.job_paths(spec.job_id)

    def _settle(self, job_id: str, cancelled: bool = False) -> None:
        """An ended (or, with ``cancelled``, killed) process becomes the job's end state."""
        running = self.running.get(job_id)
        if running is None or (running.proc.poll() is None and not cancelled):
            return
        del self.running[job_id]
        returncode, log, outputs = running.finish()
        state = "cancelled" if cancelled else "succeeded" if returncode == 0 else "failed"
        self._write(job_id, "logs/attempt-1.log", log)
        self.set_job(job_id, state, outputs)
        self._event(job_id, state, {"exit_code": returncode})

    def _patrol(self, events: int, gpu: bool, job_ids: Sequence[str]) -> dict[str, Any]:
        """The agent's patrol, faked: every job of this machine, a process that ended by now
        settled first (as the agent would have recorded its end). The base's ``read_jobs``
        and ``interpret`` judge it, as on every backend."""
        for job_id in [j for j in self.running if j in self.jobs[self.machine.name]]:
            self._settle(job_id)
        return {"jobs": [dict(status) for status in self.jobs[self.machine.name].values()]}

    def cancel(self, job_id: str) -> dict[str, Any]:
        if job_id in self.running:
            self._settle(job_id, cancelled=True)
        else:
            self.set_job(job_id, "cancelled")
        return {"job_id": job_id, "state": "cancelled"}

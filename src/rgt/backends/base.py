"""What every backend provides: a few primitives; everything else is derived here.

A backend binds rgt's verbs to one kind of machine. Its primitives are:

- ``transport`` (run a command, copy files) — given at construction;
- ``detach(argv, job=, stdin=, resources=)`` — start the agent on ``job`` so it outlives this
  process and the connection (``setsid`` here, ``tmux`` or ``sbatch`` elsewhere). Everything a
  backend needs is passed in: the job's paths, the secrets' bytes for the agent's stdin (never
  argv, never a file), the job's resources; nothing is handed over through attributes;
- ``stop_meter()`` — the profile's meter-stop action; only ever called behind the teardown gate.

Job submission (``submit``; ``submit_many``, one submission where ``arrays``), the one read
(``read_jobs``: a ``MachineRead`` of typed ``JobStatus`` records), logs, cancel and the
manifest are derived: they talk to the agent's files through the transport, so every backend
behaves the same (tests/backends/conformance.py). The one hook of the read is ``interpret``:
a backend whose scheduler or API knows better than the agent whether a job lives (Slurm,
Kubernetes, Kaggle) says so there. ``carries_secrets = False``: ``submit`` refuses secrets
before anything is made.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import secrets
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rgt import clip
from rgt.agent.paths import JobPaths, RootPaths
from rgt.backends.statusdoc import JobStatus, MachineRead, absent_doc
from rgt.config import rgt_home
from rgt.errors import BackendError, NotSupportedError, RgtError
from rgt.models import JobSpec, Machine
from rgt.resources import Resources
from rgt.transport.base import ProgressFn, Transport
from rgt.transport.snapshot import Snapshot, materialize, retire_damaged_argv


def staging_path(remote: str) -> str:
    """Where one launch stages a snapshot before renaming it to ``remote``: its own path, so
    concurrent launches of the same code never copy into (or rename away) each other's files."""
    return f"{remote}.partial-{os.getpid()}-{secrets.token_hex(3)}"


class Backend(abc.ABC):
    kind: ClassVar[str]
    # False where the agent cannot get the secrets over a private stdin (sbatch, a k8s Job).
    carries_secrets: ClassVar[bool] = True
    arrays: ClassVar[bool] = False  # one submission runs many jobs (a Slurm array): submit_many

    def __init__(self, machine: Machine, transport: Transport) -> None:
        self.machine = machine
        self.transport = transport
        self.root = RootPaths(machine.durable_root)
        self.python = str(machine.connection.get("python") or "python3")

    # -- primitives ------------------------------------------------------------------------

    @abc.abstractmethod
    def detach(
        self,
        argv: Sequence[str],
        *,
        job: JobPaths,
        stdin: bytes | None = None,
        resources: Resources | None = None,
    ) -> None:
        """Start ``argv`` (the agent on ``job``) on the machine so that it survives this process
        and connection. ``resources`` is the job's request; None means the machine's defaults,
        or, for a job started before (``rgt resume``), what that job was given."""

    @abc.abstractmethod
    def stop_meter(self) -> str:
        """Stop what bills (the profile's action). Called only after the teardown gate passed.
        Returns one sentence saying what was done."""

    # -- derived: the agent ----------------------------------------------------------------

    def install_agent(self) -> str:
        """Copy the agent zipapp to the machine under its versioned name (once)."""
        from rgt.agent.build import agent_version, build_agent

        remote = self.root.agent_file(agent_version())
        if not self.transport.exists(remote):
            local = build_agent(rgt_home() / "agent")
            self.transport.mkdir(self.root.agent_dir)
            self.transport.write_bytes(remote, local.read_bytes())
        return remote

    def agent_call(self, subcommand: str, job_id: str, timeout: float = 60) -> dict[str, Any]:
        agent = self.install_agent()
        job = self.job_paths(job_id)
        result = self.transport.run([self.python, agent, subcommand, job.root], timeout=timeout)
        if not result.ok:
            raise BackendError(
                f"agent {subcommand} failed for job {job_id}",
                backend=self.kind,
                returncode=result.returncode,
                stderr_tail=result.stderr_tail(),
            )
        try:
            data: dict[str, Any] = json.loads(result.text() or "{}")
        except json.JSONDecodeError as exc:
            raise BackendError(
                f"agent {subcommand} printed no JSON",
                backend=self.kind,
                stderr_tail=result.text()[-2000:],
            ) from exc
        clipped: dict[str, Any] = clip.document(data)  # the machine's words, clipped (rgt.clip)
        return clipped

    # -- derived: code and jobs ------------------------------------------------------------

    def job_paths(self, job_id: str) -> JobPaths:
        return self.root.job(job_id)

    def push_snapshot(self, snapshot: Snapshot, progress: ProgressFn | None = None) -> str:
        """Put the code snapshot at ``code/<digest>`` unless it is already there."""
        remote = self.root.snapshot(snapshot.digest)
        self.transport.check(retire_damaged_argv(remote))
        if self.transport.exists(remote):
            return remote
        self.transport.mkdir(self.root.code_dir)
        partial = staging_path(remote)
        try:
            with tempfile.TemporaryDirectory(prefix="rgt-snap-") as tmp:
                local = Path(tmp) / snapshot.digest
                materialize(snapshot, local)
                self.transport.put(local, partial, progress=progress)
            self.publish_snapshot(partial, remote)
        finally:
            self.discard_staging(partial)
        return remote

    def discard_staging(self, partial: str) -> None:
        """Remove a staging dir left by a failed or lost race; best effort (the error that
        brought us here matters more than a leftover directory)."""
        with contextlib.suppress(RgtError, OSError):
            self.transport.run(["rm", "-rf", "--", partial])

    def publish_snapshot(self, partial: str, remote: str) -> None:
        """Rename a complete staged snapshot into place. Another launch of the same code may
        have published it first (same digest, same files): then that copy stands."""
        if self.transport.run(["mv", "-T", "--", partial, remote]).ok:
            return
        if not self.transport.exists(remote):
            self.transport.check(["mv", "-T", "--", partial, remote])  # raises with the reason

    def seed_checkpoints(self, job_id: str, from_job_id: str) -> None:
        """Copy an earlier job's checkpoints into a new job's checkpoint dir before it starts,
        so ``load_latest()`` resumes from them. Only committed checkpoints are ever loaded;
        a temp file copied along is ignored and cleaned up by rgt.ckpt."""
        source = self.job_paths(from_job_id).ckpt_dir
        target = self.job_paths(job_id).ckpt_dir
        self.transport.mkdir(target)
        if self.transport.exists(source):
            self.transport.check(["cp", "-a", "--", f"{source}/.", target])

    def prepare(self, spec: JobSpec) -> JobPaths:
        """Create the job's directory, link its code snapshot, write its spec (once)."""
        job = self.job_paths(spec.job_id)
        if self.transport.exists(job.spec):
            raise BackendError(
                f"job {spec.job_id} already exists on {self.machine.name}",
                backend=self.kind,
                fix="job ids are unique; launch a new job",
            )
        self.transport.mkdir(job.logs_dir)
        if spec.code_snapshot:
            target = f"../../code/{spec.code_snapshot}"
            self.transport.check(["ln", "-sfn", "--", target, job.code])
        self.transport.write_bytes(job.spec, json.dumps(spec.to_json(), indent=2).encode())
        return job

    def submit(
        self,
        spec: JobSpec,
        secrets: dict[str, str] | None = None,
        resources: Resources | None = None,
    ) -> JobPaths:
        """Prepare the job, start its agent detached (``resources`` None: the machine's)."""
        self.refuse_secrets(secrets)
        agent = self.install_agent()
        job = self.prepare(spec)
        self.start_agent(agent, job, secrets, resources)
        return job

    def submit_many(
        self, specs: Sequence[JobSpec], resources: Resources | None = None, limit: int = 0
    ) -> str | None:
        """One job per spec; an ``arrays`` backend submits them as one and returns its id. Here
        each starts now: a ``limit`` below their count is refused, never ignored."""
        if 0 < limit < len(specs):
            fix = "submit at most that many at a time, or use a scheduler (Slurm: a job array)"
            raise NotSupportedError(f"at most {limit} at once", self.kind, fix=fix)
        for spec in specs:
            self.submit(spec, None, resources)
        return None

    def refuse_secrets(self, secrets: dict[str, str] | None) -> None:
        if secrets and not self.carries_secrets:
            raise NotSupportedError(
                "--secret",
                self.kind,
                why="the agent cannot receive them over a private stdin here, and rgt never "
                "puts a secret in argv, the environment the scheduler stores, or a file",
                fix="drop --secret for this job, or have the job read the secret from a file "
                "only you can read",
            )

    def start_agent(
        self,
        agent: str,
        job: JobPaths,
        secrets: dict[str, str] | None,
        resources: Resources | None = None,
    ) -> None:
        """Detach ``agent run JOB_DIR``; secrets go over stdin, never argv or a file."""
        self.refuse_secrets(secrets)
        argv = [self.python, agent, "run", job.root]
        if secrets:
            argv.append("--secrets-stdin")
        stdin = json.dumps(secrets).encode() if secrets else None
        self.detach(argv, job=job, stdin=stdin, resources=resources)

    # -- derived: the one read -------------------------------------------------------------

    def read_jobs(
        self, job_ids: Sequence[str] | None = None, *, events: int = 0, gpu: bool = False
    ) -> MachineRead:
        """The one read of the machine: the agent's ``patrol`` document (with the last
        ``events`` events per job and, with ``gpu``, the GPUs' readings) and the status of each
        of ``job_ids`` (None: every job directory there, the teardown gate's roster), in one
        round trip. A job with no directory has ``exists`` False. What the agent says is
        judged by ``interpret``, where a backend adds its scheduler's word on liveness.
        Reading changes nothing on the machine; ``rgt.status.read`` is its one caller."""
        patrol = self._patrol(events, gpu, job_ids or ())
        found = jobs_of(patrol)
        ids = list(found) if job_ids is None else list(dict.fromkeys(job_ids))
        return MachineRead(patrol, self.interpret({j: found.get(j) or absent_doc(j) for j in ids}))

    def _patrol(self, events: int, gpu: bool, job_ids: Sequence[str]) -> dict[str, Any]:
        """What the machine says, in one round trip: the agent's ``patrol`` of every job dir
        (``job_ids``, those the read asks for, lets a scheduler backend ask its controller
        about them in the same round trip)."""
        from rgt.backends.remote import machine_call

        args = ["--events", str(events)] + ([] if gpu else ["--no-gpu"])
        return machine_call(self, "patrol", args, timeout=60)

    def interpret(self, docs: Mapping[str, Mapping[str, Any]]) -> dict[str, JobStatus]:
        """The agent's documents (one per job of a ``patrol``) as statuses: the hook where a
        backend decides liveness. Here the agent decides it (its pid and lock on the
        machine); a scheduler's or an API's backend overrides this with its own word."""
        return {job_id: JobStatus.from_doc(doc, job_id) for job_id, doc in docs.items()}

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self.agent_call("cancel", job_id, timeout=120)

    def events(self, job_id: str) -> list[dict[str, Any]]:
        from rgt.agent.jobfiles import parse_events

        raw = self.transport.read_bytes(self.job_paths(job_id).events) or b""
        return parse_events(raw.decode("utf-8", "replace"))[0]  # bad lines skipped, counted

    def log(self, job_id: str, attempt: int, offset: int = 0) -> bytes:
        path = self.job_paths(job_id).log(attempt)
        if offset == 0:
            return self.transport.read_bytes(path) or b""
        result = self.transport.run(["tail", "-c", f"+{offset + 1}", "--", path])
        return result.stdout if result.ok else b""

    def manifest(self, job_id: str) -> tuple[dict[str, Any], bytes] | None:
        from rgt.backends.jobstatus import manifest_from

        path = self.job_paths(job_id).manifest
        raw = self.transport.read_bytes(path)
        doc = manifest_from(raw, path, job_id)  # a cut file raises StateFileError
        return None if doc is None or raw is None else (doc, raw)

    def fetch(self, job_id: str, rel: str, dest: Path, progress: ProgressFn | None = None) -> None:
        """Copy one artifact (path relative to the job dir) to ``dest``."""
        self.transport.get(f"{self.job_paths(job_id).root}/{rel}", dest, progress=progress)

    def describe(self) -> str:
        return f"{self.machine.name} ({self.kind}, {shlex.quote(self.machine.durable_root)})"


def jobs_of(patrol: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """job id -> its document in an agent ``patrol`` document."""
    return {str(j.get("job_id")): j for j in patrol.get("jobs") or [] if isinstance(j, dict)}

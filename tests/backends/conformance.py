"""The backend contract as tests (like fsspec's abstract tests): ``BackendContract`` holds them,
and each backend's test class subclasses it and provides a class-scoped ``backend`` fixture
(``tests/backends/test_conformance.py``). A new backend adds one subclass there, with the
promise mixins it keeps (``Cancels`` or ``RefusesCancel``; ``RefusesSecrets`` when it cannot
carry secrets); a test there fails while a registered backend has none.

One job runs per class (push code → submit → wait): every test then checks one promise of the
contract on that run, so the suite costs one small job per backend.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rgt.backends.base import Backend
from rgt.backends.statusdoc import JobStatus
from rgt.errors import BackendError, NotSupportedError
from rgt.models import TERMINAL, JobSpec, JobState
from rgt.state.store import utcnow
from rgt.transport.snapshot import Snapshot, take_snapshot

JOB = """
import json, os, pathlib, sys
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
token = os.environ.get("TOKEN", "")
config = pathlib.Path("config.txt").read_text()
(out / "result.json").write_text(json.dumps({"config": config, "token_len": len(token)}))
print("hello from", os.environ["RGT_JOB_ID"], flush=True)
"""
SECRET = "s3cr3t-conformance-value"
HOSTILE_ROOT = "root 'q' $(touch PWNED) ü"


def write_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.py").write_text(JOB)
    (root / "config.txt").write_text("from the snapshot")
    return root


def read_one(backend: Backend, job_id: str) -> JobStatus:
    """One job through the backend's one read (``read_jobs``)."""
    return backend.read_jobs([job_id]).job(job_id)


def status_doc(backend: Backend, job_id: str) -> dict[str, Any]:
    """One job through the one read, as its document (what ``--json`` prints)."""
    return read_one(backend, job_id).to_doc()


def wait_terminal(backend: Backend, job_id: str, timeout: float = 120) -> JobStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = read_one(backend, job_id)
        if status.state in TERMINAL or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def job_spec(backend: Backend, job_id: str, snapshot: Snapshot) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        machine=backend.machine.name,
        command=(backend.python, "job.py"),
        code_snapshot=snapshot.digest,
        secret_env=("TOKEN",),
        created=utcnow(),
    )


@dataclass(frozen=True)
class Run:
    backend: Backend
    snapshot: Snapshot
    remote_code: str
    spec: JobSpec
    status: JobStatus
    scratch: Path


class BackendContract:
    """The promises every backend keeps. Subclasses override the ``backend`` fixture."""

    carries_secrets: ClassVar[bool] = True
    registered: ClassVar[str] = ""  # the backend's name in rgt.backends.REGISTRY ("": a fake)

    @pytest.fixture(scope="class")
    @classmethod
    def home(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
        """An RGT_HOME for the class's machine (the per-test one comes after class fixtures)."""
        home = tmp_path_factory.mktemp("rh")  # short: ssh control sockets live here
        with pytest.MonkeyPatch.context() as patch:
            for key in [k for k in os.environ if k.startswith("RGT_")]:
                patch.delenv(key)
            patch.setenv("RGT_HOME", str(home))
            yield home

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, home: Path, tmp_path_factory: pytest.TempPathFactory) -> Backend:
        raise NotImplementedError("a backend's test class provides its `backend` fixture")

    @pytest.fixture(scope="class")
    @classmethod
    def run(cls, backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Run:
        scratch = tmp_path_factory.mktemp("conformance")
        snapshot = take_snapshot(write_project(scratch / "project"))
        remote_code = backend.push_snapshot(snapshot)
        spec = job_spec(backend, f"conf-{backend.kind}-1", snapshot)
        backend.submit(spec, {"TOKEN": SECRET} if cls.carries_secrets else None)
        return Run(
            backend, snapshot, remote_code, spec, wait_terminal(backend, spec.job_id), scratch
        )

    # -- code ------------------------------------------------------------------------------

    def test_code_goes_to_its_digest_once(self, run: Run) -> None:
        assert run.remote_code == run.backend.root.snapshot(run.snapshot.digest)
        assert run.backend.push_snapshot(run.snapshot) == run.remote_code  # same tree, same dir

    # -- the job ---------------------------------------------------------------------------

    def test_the_job_succeeds_and_says_it_is_done(self, run: Run) -> None:
        assert run.status.state is JobState.SUCCEEDED, run.status
        assert run.status.done is True
        assert run.status.attempt >= 1

    def test_log_reads_whole_and_from_an_offset(self, run: Run) -> None:
        attempt = run.status.attempt
        log = run.backend.log(run.spec.job_id, attempt)
        assert f"hello from {run.spec.job_id}".encode() in log
        assert run.backend.log(run.spec.job_id, attempt, offset=len(log)) == b""
        assert run.backend.log(run.spec.job_id, attempt, offset=1) == log[1:]

    def test_events_record_the_end(self, run: Run) -> None:
        assert "succeeded" in {event.get("kind") for event in run.backend.events(run.spec.job_id)}

    def test_manifest_names_what_fetch_brings_back(self, run: Run) -> None:
        found = run.backend.manifest(run.spec.job_id)
        assert found is not None
        entry = {f["path"]: f for f in found[0]["files"]}["outputs/result.json"]
        target = run.scratch / "fetched" / "result.json"
        run.backend.fetch(run.spec.job_id, "outputs/result.json", target)
        data = target.read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        token_len = len(SECRET) if self.carries_secrets else 0
        assert data == b'{"config": "from the snapshot", "token_len": %d}' % token_len

    def test_the_spec_on_the_machine_holds_no_secret(self, run: Run) -> None:
        target = run.scratch / "spec.json"
        run.backend.fetch(run.spec.job_id, "spec.json", target)
        assert run.spec.job_id.encode() in target.read_bytes()
        assert SECRET.encode() not in target.read_bytes()

    def test_a_job_id_is_submitted_once(self, run: Run) -> None:
        with pytest.raises(BackendError, match="already exists"):
            run.backend.submit(run.spec)

    def test_a_job_never_launched_is_not_on_the_machine(self, backend: Backend) -> None:
        status = read_one(backend, "never-launched")
        assert status.exists is False and status.state is JobState.QUEUED

    def test_one_read_holds_every_job_asked_or_every_job_there(self, run: Run) -> None:
        """``read_jobs(ids)``: exactly those jobs, one absent where it has no directory;
        ``read_jobs()``: every job directory on the machine (the gate's roster), each judged
        the same way, with the agent's patrol document beside them."""
        job_id = run.spec.job_id
        asked = run.backend.read_jobs([job_id, "never-launched"])
        assert set(asked.statuses) == {job_id, "never-launched"}
        assert asked.job(job_id).state is JobState.SUCCEEDED and asked.job(job_id).exists
        assert not asked.job("never-launched").exists
        everything = run.backend.read_jobs()
        assert everything.job(job_id).state is JobState.SUCCEEDED
        assert "never-launched" not in everything.statuses
        assert job_id in everything.agent_docs()

    def test_submit_many_runs_every_job_or_refuses_a_limit_it_cannot_hold(
        self, run: Run, backend: Backend
    ) -> None:
        specs = [job_spec(backend, f"conf-{backend.kind}-many-{i}", run.snapshot) for i in (1, 2)]
        specs = [replace(s, secret_env=()) for s in specs]
        if not backend.arrays:  # nothing there could hold one back: refused, nothing made
            with pytest.raises(NotSupportedError, match="at most 1 at once"):
                backend.submit_many(specs, limit=1)
            assert not backend.transport.exists(backend.job_paths(specs[0].job_id).root)
        array = backend.submit_many(specs, limit=len(specs))
        assert (array is not None) == backend.arrays  # an array names itself
        ends = [wait_terminal(backend, s.job_id).state_name for s in specs]
        assert ends == ["succeeded", "succeeded"], ends


class Cancels:
    """Mixed into the contract of a backend that can end a running job (``cancel``)."""

    def test_cancel_ends_a_running_job_as_cancelled(self, run: Run) -> None:
        backend = run.backend
        spec = job_spec(backend, f"conf-{backend.kind}-cancel", run.snapshot)
        spec = replace(spec, command=(backend.python, "-c", "import time; time.sleep(120)"))
        backend.submit(spec)
        deadline = time.monotonic() + 120
        while read_one(backend, spec.job_id).state is not JobState.RUNNING:
            assert time.monotonic() < deadline, read_one(backend, spec.job_id)
            time.sleep(0.2)
        backend.cancel(spec.job_id)
        status = wait_terminal(backend, spec.job_id)
        assert status.state is JobState.CANCELLED, status
        assert "cancelled" in {event.get("kind") for event in backend.events(spec.job_id)}

    def test_a_job_cancelled_right_after_submit_ends_cancelled(self, run: Run) -> None:
        """Before its agent wrote anything (on Kubernetes: the Job deleted before its pod's
        agent could record a status): the end is recorded anyway, never a ``queued`` job
        that nothing runs."""
        backend = run.backend
        spec = job_spec(backend, f"conf-{backend.kind}-early-cancel", run.snapshot)
        spec = replace(spec, command=(backend.python, "-c", "import time; time.sleep(120)"))
        backend.submit(spec)
        backend.cancel(spec.job_id)
        status = wait_terminal(backend, spec.job_id, timeout=60)
        assert status.state is JobState.CANCELLED, status


class RefusesCancel:
    """Mixed into the contract of a backend that cannot end a job through its API: ``cancel``
    says so, with the fix (where the human ends it), and the job is left as it was."""

    def test_cancel_is_refused_with_the_fix(self, run: Run) -> None:
        with pytest.raises(NotSupportedError) as refused:
            run.backend.cancel(run.spec.job_id)
        assert refused.value.backend == run.backend.kind and refused.value.fix
        assert read_one(run.backend, run.spec.job_id).state is run.status.state


class RefusesSecrets:
    """Mixed into the contract of a backend that cannot carry secrets (``carries_secrets``)."""

    def test_secrets_it_cannot_carry_are_refused_before_anything_starts(
        self, run: Run, backend: Backend
    ) -> None:
        spec = job_spec(backend, f"conf-{backend.kind}-secret", run.snapshot)
        with pytest.raises(NotSupportedError) as refused:
            backend.submit(spec, {"TOKEN": SECRET})
        assert refused.value.backend == backend.kind and refused.value.fix
        assert read_one(backend, spec.job_id).exists is False

"""``Backend.statuses`` is batched: one ssh round trip for N jobs on the real sshd; and what it
returns (and the agent's files) match the shipped schemas."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from types import MappingProxyType

import pytest
from jsonschema import Draft202012Validator

from rgt.backends import get_backend
from rgt.backends.ssh import SshBackend
from rgt.backends.statusdoc import JobStatus
from rgt.models import JobSpec, JobState
from rgt.state.store import utcnow
from tests.sshd import SshServer, register

SCHEMAS = Path(__file__).parents[2] / "src" / "rgt" / "schemas"
# Every ssh the transport starts is logged, then the real ssh runs it.
SHIM = '#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {ssh} "$@"\n'


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def shim_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """From now on every ssh the transport starts is logged; returns the log."""
    shim_dir, log = tmp_path / "shim", tmp_path / "ssh.log"
    shim_dir.mkdir()
    real = shutil.which("ssh")
    assert real is not None
    (shim_dir / "ssh").write_text(SHIM.format(log=log, ssh=real))
    (shim_dir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim_dir}:{os.environ['PATH']}")
    return log


def round_trips(log: Path) -> int:
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for line in lines if " -O " not in f" {line} ")


def submit(backend: SshBackend, job_id: str) -> None:
    spec = JobSpec(
        job_id=job_id,
        machine=backend.machine.name,
        command=(backend.python, "-c", "print('done', flush=True)"),
        created=utcnow(),
    )
    backend.submit(spec)


def wait_ended(backend: SshBackend, ids: list[str], timeout: float = 60) -> dict[str, JobStatus]:
    deadline = time.monotonic() + timeout
    while True:
        found = backend.read_jobs(ids).statuses
        if all(s.has_ended for s in found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def test_statuses_is_one_round_trip_for_n_jobs(
    sshd_server: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    backend = get_backend(register(sshd_server, "box", root))
    assert isinstance(backend, SshBackend)
    ids = ["j1", "j2", "j3"]
    for job_id in ids:
        submit(backend, job_id)
    ended = wait_ended(backend, ids)
    assert {s.state for s in ended.values()} == {JobState.SUCCEEDED}

    log = shim_ssh(tmp_path, monkeypatch)

    one = backend.read_jobs(["j1"]).statuses
    assert round_trips(log) == 1
    many = backend.read_jobs([*ids, "never-launched"]).statuses
    assert round_trips(log) == 2  # N+1 jobs: still one more round trip
    assert [many[j].state for j in ids] == [JobState.SUCCEEDED] * 3
    assert many["never-launched"].exists is False
    assert one["j1"].with_(now=None) == many["j1"].with_(now=None)

    status_schema = schema("status")
    for status in many.values():
        status_schema.validate(status.to_doc())
    job = root / ".rgt" / "jobs" / "j1"
    events = [json.loads(line) for line in (job / "events.jsonl").read_text().splitlines()]
    assert events and all(schema("events").is_valid(e) for e in events)
    schema("manifest").validate(json.loads((job / "manifest.json").read_text()))
    schema("status").validate(json.loads((job / "status.json").read_text()))


def test_from_doc_is_tolerant_and_keeps_what_it_does_not_know() -> None:
    doc = {
        "job_id": "j",
        "state": "running",
        "attempt": "2",  # a wrong type reads as absent, never raises
        "agent_alive": True,
        "heartbeat": 17,
        "progress": {"step": 40},
        "log_age_s": 1.5,
        "problem": None,
    }
    status = JobStatus.from_doc(doc)
    assert (status.state, status.attempt, status.heartbeat, status.step) == (
        JobState.RUNNING,
        0,
        None,
        40,
    )
    assert status.live and not status.has_ended and status.extra["log_age_s"] == 1.5
    assert JobStatus.from_doc({"state": "garbled"}, "j").state_name == "unknown"
    assert status.to_doc()["log_age_s"] == 1.5 and status.to_doc()["state"] == "running"
    with pytest.raises(AttributeError):
        status.state = JobState.FAILED  # type: ignore[misc]
    assert isinstance(status.extra, MappingProxyType)

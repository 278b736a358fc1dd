"""``rgt.status.read``: the backend's read changes nothing; the status path then records an end
that only the scheduler saw (``unrecorded_end``) through ``Backend.cancel``, once, and every
reader (`rgt status`, `watch`, the gate) sees the same answer. On a real Slurm:
``tests/backends/test_slurm_cluster.py::test_scancel_shows_as_cancelled_not_failed``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgt.backends.statusdoc import JobStatus, MachineRead
from rgt.errors import BackendError
from rgt.models import JobSpec, JobState, Machine
from rgt.state.store import Store, utcnow
from rgt.status import cache
from rgt.status.read import read, record_ends
from rgt.watch.patrol import PatrolOptions, patrol
from tests.backends.fake import FakeBackend


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[Store, FakeBackend]]:
    FakeBackend.jobs.clear()
    store = Store.open()
    machine = Machine("fk", "fake", "local", {}, str(tmp_path / "root"), registered=utcnow())
    store.add_machine(machine)
    yield store, FakeBackend(machine)
    FakeBackend.jobs.clear()


def scancelled(backend: FakeBackend, job_id: str) -> None:
    """What Slurm's ``interpret`` says after a plain scancel: cancelled, not recorded."""
    backend.set_job(job_id, "running")
    said = {"state": "cancelled", "agent_alive": False, "unrecorded_end": True}
    backend.jobs[backend.machine.name][job_id].update(said)


def test_the_backend_read_changes_nothing(fake: tuple[Store, FakeBackend]) -> None:
    _, backend = fake
    scancelled(backend, "j1")
    for _ in range(2):
        status = backend.read_jobs(["j1"]).job("j1")
        assert status.state is JobState.CANCELLED and status.unrecorded_end
        assert status.to_doc()["unrecorded_end"] is True
    assert backend.jobs["fk"]["j1"]["unrecorded_end"] is True  # nobody recorded it


def test_the_status_path_records_it_once(fake: tuple[Store, FakeBackend]) -> None:
    _, backend = fake
    scancelled(backend, "j1")
    backend.set_job("j2", "running")
    found = read(backend, ["j1", "j2"])
    assert found.job("j1").state is JobState.CANCELLED  # the answer of this read
    recorded = backend.jobs["fk"]["j1"]
    assert recorded["state"] == "cancelled" and "unrecorded_end" not in recorded
    assert backend.jobs["fk"]["j2"]["state"] == "running"  # nothing else is touched
    again = read(backend, ["j1"]).job("j1")
    assert again.state is JobState.CANCELLED and not again.unrecorded_end
    assert "unrecorded_end" not in again.to_doc()


def test_every_reader_goes_through_it(fake: tuple[Store, FakeBackend]) -> None:
    """`rgt watch` reads every job of the machine: it records the end as `rgt status` does."""
    store, backend = fake
    store.add_job(JobSpec("j1", "fk", ("true",), created=utcnow()))
    scancelled(backend, "j1")
    report = patrol(store, "fk", PatrolOptions(gpu=False))
    assert [(j["job_id"], j["state"]) for j in report["jobs"]] == [("j1", "cancelled")]
    assert "unrecorded_end" not in backend.jobs["fk"]["j1"]
    assert store.job("j1").state is JobState.CANCELLED  # cached by the one writer


class RefusingBackend(FakeBackend):
    def cancel(self, job_id: str) -> dict[str, Any]:
        raise BackendError("the machine said no", backend=self.kind)


def test_a_failed_record_is_tried_again_by_the_next_read(tmp_path: Path) -> None:
    machine = Machine("fk2", "fake", "local", {}, str(tmp_path / "root"))
    FakeBackend.jobs.clear()
    backend = RefusingBackend(machine)
    scancelled(backend, "j1")
    status = JobStatus.from_doc(backend.jobs["fk2"]["j1"], "j1")
    assert record_ends(backend, MachineRead({}, {"j1": status})) == []
    assert read(backend, ["j1"]).job("j1").unrecorded_end  # still said, still to record
    FakeBackend.jobs.clear()


def test_adopt_writes_through_the_cache(fake: tuple[Store, FakeBackend]) -> None:
    store, _ = fake
    spec = JobSpec("j9", "fk", ("true",), created=utcnow())
    cache.adopt(store, spec, JobStatus.from_doc({"state": "failed", "attempt": 2}, "j9"))
    record = store.job("j9")
    assert (record.state, record.attempts) == (JobState.FAILED, 2)

"""`rgt up` never silently replaces an active machine with jobs; `--replace` goes through the
teardown gate of the old machine first; a released machine is re-registered freely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgt.errors import GateRefused
from rgt.jobs.pull import pull
from rgt.lifecycle.machines import register
from rgt.lifecycle.teardown import record_approval
from rgt.models import JobSpec, Machine
from rgt.state.store import Store, utcnow
from tests.backends.fake import FakeBackend

GOOD = {"outputs/metrics.json": json.dumps({"loss": 0.5}).encode()}


def _rented(tmp_path: Path, name: str = "rented") -> tuple[Store, FakeBackend, str]:
    """An active (fake, metered) machine with one ended job whose artifacts are not pulled."""
    store = Store.open()
    machine = Machine(
        name=name,
        backend="fake",
        profile="local",
        connection={},
        durable_root=str(tmp_path / "old"),
        price_per_hour=1.5,
        registered=utcnow(),
    )
    store.add_machine(machine)
    backend = FakeBackend(machine)
    spec = JobSpec(job_id=f"{name}-job", machine=name, command=("true",), created=utcnow())
    store.add_job(spec)
    backend.set_job(spec.job_id, "succeeded", GOOD)
    FakeBackend.meter_stops.clear()
    return store, backend, spec.job_id


def test_up_refuses_to_replace_an_active_machine_with_jobs(tmp_path: Path) -> None:
    store, _, job_id = _rented(tmp_path)
    with pytest.raises(GateRefused) as refused:
        register(store, "local", "rented", root=str(tmp_path / "new"))
    assert refused.value.exit_code == 3
    assert refused.value.reasons == [f"job {job_id} is on rented"]
    assert "--replace" in str(refused.value.fix) and "rgt down rented" in str(refused.value.fix)
    kept = store.machine("rented")
    assert kept.backend == "fake" and kept.active and FakeBackend.meter_stops == []


def test_replace_goes_through_the_gate_of_the_old_machine(tmp_path: Path) -> None:
    store, _, job_id = _rented(tmp_path)
    with pytest.raises(GateRefused) as refused:  # not pulled, not approved
        register(store, "local", "rented", root=str(tmp_path / "new"), replace=True)
    failed = {c["name"] for c in refused.value.verdict["checks"] if not c["ok"]}
    assert failed == {"pulled", "verified", "approved"}
    assert store.machine("rented").backend == "fake" and FakeBackend.meter_stops == []
    pull(store, job_id, tmp_path / "pulled")
    with pytest.raises(GateRefused):  # pulled and verified, but no human approved
        register(store, "local", "rented", root=str(tmp_path / "new"), replace=True)
    record_approval(store, "rented", "/dev/pts/test")
    result = register(store, "local", "rented", root=str(tmp_path / "new"), replace=True)
    assert FakeBackend.meter_stops == ["rented"]  # the old meter was stopped first
    assert result.machine.backend == "local" and store.machine("rented").active
    # The old registration's job is not the new machine's: re-registering it again is free.
    register(store, "local", "rented", root=str(tmp_path / "newer"))


def test_a_released_or_unused_machine_is_re_registered_freely(tmp_path: Path) -> None:
    store = Store.open()
    register(store, "local", "idle", root=str(tmp_path / "a"))
    register(store, "local", "idle", root=str(tmp_path / "b"))  # active, no jobs
    store, _, _ = _rented(tmp_path, "gone")
    store.release_machine("gone")
    assert register(store, "local", "gone", root=str(tmp_path / "c")).machine.active

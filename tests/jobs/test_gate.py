"""The teardown gate's full truth table: ended? pulled? verified? approved?"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from rgt.errors import GateRefused
from rgt.jobs.pull import pull
from rgt.lifecycle.teardown import record_approval, teardown
from rgt.models import JobSpec, Machine
from rgt.state.store import Store, utcnow
from tests.backends.fake import FakeBackend

GOOD = {"outputs/metrics.json": json.dumps({"loss": 0.5}).encode()}
# Hash-consistent with the manifest, but it does not load: pulled, not verified.
BROKEN = {"outputs/metrics.json": b'{"loss": 0.5'}


@pytest.fixture(autouse=True)
def _fresh_fake() -> None:
    """The fake keeps its machines in class-level dicts; each test starts with none."""
    FakeBackend.jobs.clear()


def _setup(
    tmp_path: Path, ended: bool, pulled: bool, verified: bool, approved: bool
) -> tuple[Store, FakeBackend]:
    store = Store.open()
    name = f"m{int(ended)}{int(pulled)}{int(verified)}{int(approved)}"
    machine = Machine(
        name=name,
        backend="fake",
        profile="local",
        connection={},
        durable_root=str(tmp_path),
        registered=utcnow(),
    )
    store.add_machine(machine)
    backend = FakeBackend(machine)
    spec = JobSpec(job_id=f"{name}-job", machine=name, command=("true",), created=utcnow())
    store.add_job(spec)
    backend.set_job(spec.job_id, "succeeded" if ended else "running", GOOD if verified else BROKEN)
    if pulled:
        pull(store, spec.job_id, tmp_path / "pulled")
    if approved:
        record_approval(store, name, "/dev/pts/test")
    return store, backend


@pytest.mark.parametrize(
    "ended,pulled,verified,approved",
    [c for c in itertools.product([True, False], repeat=4) if c[1] or not c[2]],
)  # verified implies pulled
def test_truth_table(
    tmp_path: Path, ended: bool, pulled: bool, verified: bool, approved: bool
) -> None:
    store, backend = _setup(tmp_path, ended, pulled, verified, approved)
    name = backend.machine.name
    FakeBackend.meter_stops.clear()
    if ended and pulled and verified and approved:
        result = teardown(store, name)
        assert result["released"] and FakeBackend.meter_stops == [name]
        assert store.machine(name).released is not None
        return
    with pytest.raises(GateRefused) as refused:
        teardown(store, name, yes=True)  # --yes without a terminal approves nothing
    failed = {c["name"] for c in refused.value.verdict["checks"] if not c["ok"]}
    expected = {
        n
        for n, ok in [
            ("ended", ended),
            ("pulled", pulled),
            ("verified", verified),
            ("approved", approved),
        ]
        if not ok
    }
    assert failed == expected
    assert refused.value.exit_code == 3
    assert FakeBackend.meter_stops == []
    assert store.machine(name).released is None


def test_approval_before_a_new_job_is_stale(tmp_path: Path) -> None:
    store, backend = _setup(tmp_path, True, True, True, True)
    name = backend.machine.name
    spec = JobSpec(job_id=f"{name}-later", machine=name, command=("true",), created=utcnow())
    store.add_job(spec)
    backend.set_job(spec.job_id, "succeeded", GOOD)
    pull(store, spec.job_id, tmp_path / "later")
    with pytest.raises(GateRefused) as refused:
        teardown(store, name)
    assert [c["name"] for c in refused.value.verdict["checks"] if not c["ok"]] == ["approved"]


def test_pull_of_an_older_manifest_does_not_count(tmp_path: Path) -> None:
    store, backend = _setup(tmp_path, True, True, True, True)
    backend.set_job(
        f"{backend.machine.name}-job", "succeeded", {**GOOD, "outputs/late.json": b"[1]"}
    )
    with pytest.raises(GateRefused) as refused:
        teardown(store, backend.machine.name)
    assert {c["name"] for c in refused.value.verdict["checks"] if not c["ok"]} == {
        "pulled",
        "verified",
    }

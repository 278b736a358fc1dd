"""The gate re-checks what was pulled, sees jobs it never launched, and lets a job with no
artifacts through (truths the teardown gate used to take on trust)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rgt.jobs.pull import pull
from rgt.lifecycle.gate import evaluate
from rgt.models import JobSpec, Machine
from rgt.state.store import Store, utcnow
from tests.backends.fake import FakeBackend

GOOD = {
    "outputs/metrics.json": json.dumps({"loss": 0.5}).encode(),
    "outputs/notes.txt": b"seed 1\n",
}


@pytest.fixture(autouse=True)
def _fresh_fake() -> None:
    FakeBackend.jobs.clear()


@pytest.fixture
def box(tmp_path: Path) -> tuple[Store, FakeBackend]:
    store = Store.open()
    machine = Machine("fk", "fake", "local", {}, str(tmp_path / "root"), registered=utcnow())
    store.add_machine(machine)
    return store, FakeBackend(machine)


def add_job(store: Store, backend: FakeBackend, job_id: str, state: str, files: dict) -> None:  # type: ignore[type-arg]
    store.add_job(JobSpec(job_id=job_id, machine="fk", command=("true",), created=utcnow()))
    backend.set_job(job_id, state, files)


def failed(store: Store, backend: FakeBackend, rehash: bool = False) -> dict[str, str]:
    verdict = evaluate(store, backend, rehash=rehash)
    return {c.name: c.detail for c in verdict.checks if not c.ok and c.name != "approved"}


def test_a_deleted_pulled_file_is_noticed(box: tuple[Store, FakeBackend], tmp_path: Path) -> None:
    store, backend = box
    add_job(store, backend, "j1", "succeeded", GOOD)
    assert pull(store, "j1", tmp_path / "p").ok
    assert failed(store, backend) == {}
    (tmp_path / "p" / "outputs" / "notes.txt").unlink()
    detail = failed(store, backend)["verified"]
    assert "outputs/notes.txt was deleted" in detail
    assert f"rgt pull j1 --to {tmp_path / 'p'}" in detail


def test_an_edited_pulled_file_is_noticed(box: tuple[Store, FakeBackend], tmp_path: Path) -> None:
    store, backend = box
    add_job(store, backend, "j1", "succeeded", GOOD)
    assert pull(store, "j1", tmp_path / "p").ok
    path = tmp_path / "p" / "outputs" / "notes.txt"
    path.write_bytes(b"seed 2, edited\n")
    assert "outputs/notes.txt changed size (7 -> 15 bytes)" in failed(store, backend)["verified"]


def test_a_same_size_edit_with_its_mtime_restored_needs_rehash(
    box: tuple[Store, FakeBackend], tmp_path: Path
) -> None:
    store, backend = box
    add_job(store, backend, "j1", "succeeded", GOOD)
    assert pull(store, "j1", tmp_path / "p").ok
    path = tmp_path / "p" / "outputs" / "notes.txt"
    before = path.stat()
    path.write_bytes(b"seed 9\n")
    assert "was modified after it was verified" in failed(store, backend)["verified"]
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert failed(store, backend) == {}  # size and mtime: all the default check can see
    detail = failed(store, backend, rehash=True)["verified"]
    assert "outputs/notes.txt has different content (sha256 changed)" in detail


def test_a_pulled_file_replaced_by_a_link_is_noticed(
    box: tuple[Store, FakeBackend], tmp_path: Path
) -> None:
    store, backend = box
    add_job(store, backend, "j1", "succeeded", GOOD)
    assert pull(store, "j1", tmp_path / "p").ok
    path = tmp_path / "p" / "outputs" / "notes.txt"
    (tmp_path / "elsewhere.txt").write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.txt")
    assert "OUTSIDE the destination" in failed(store, backend)["verified"]


def test_a_job_with_no_artifacts_has_nothing_to_lose(box: tuple[Store, FakeBackend]) -> None:
    store, backend = box
    add_job(store, backend, "j1", "succeeded", {})
    verdict = evaluate(store, backend)
    assert failed(store, backend) == {}
    assert verdict.jobs[0]["note"] == "no artifacts"


def test_no_manifest_or_not_ended_still_blocks(box: tuple[Store, FakeBackend]) -> None:
    store, backend = box
    add_job(store, backend, "running", "running", {})
    store.add_job(JobSpec(job_id="bare", machine="fk", command=("true",), created=utcnow()))
    backend.set_job("bare", "failed")  # ended, but the agent wrote no manifest
    reasons = failed(store, backend)
    assert "job running: has not ended (state running)" in reasons["ended"]
    assert "job bare: artifacts not pulled" in reasons["pulled"]
    assert "job running" in reasons["pulled"]


def test_a_job_launched_elsewhere_blocks_with_the_adopt_command(
    box: tuple[Store, FakeBackend],
) -> None:
    store, backend = box
    add_job(store, backend, "mine", "succeeded", {})
    backend.set_job("theirs", "running")  # on the machine, never in this RGT_HOME
    detail = failed(store, backend)["known"]
    assert "job theirs (state running) is on the machine but not in this RGT_HOME" in detail
    assert "`rgt adopt fk theirs`" in detail


def test_a_destination_reached_through_a_link_is_the_users_choice(
    box: tuple[Store, FakeBackend], tmp_path: Path
) -> None:
    store, backend = box
    add_job(store, backend, "j1", "succeeded", GOOD)
    (tmp_path / "real results").mkdir()
    (tmp_path / "results").symlink_to(tmp_path / "real results")
    assert pull(store, "j1", tmp_path / "results").ok
    assert failed(store, backend) == {}


def test_down_rehash_on_the_command_line(
    box: tuple[Store, FakeBackend], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rgt.cli import main

    store, backend = box
    add_job(store, backend, "j1", "succeeded", GOOD)
    assert pull(store, "j1", tmp_path / "p").ok
    path = tmp_path / "p" / "outputs" / "notes.txt"
    before = path.stat()
    path.write_bytes(b"seed 9\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    for flags, expected in (((), ["approved"]), (("--rehash",), ["verified", "approved"])):
        with pytest.raises(SystemExit) as exit_:
            main(["down", "fk", "--check", "--json", *flags])
        assert exit_.value.code == 3
        checks = json.loads(capsys.readouterr().out)["verdict"]["checks"]
        assert [c["name"] for c in checks if not c["ok"]] == expected

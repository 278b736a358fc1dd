"""The local side of a pull: a full or too-small destination, an over-long --to, and a
verdict that always says why. Errors are rgt's own, with the mount and the fix; never a raw
OSError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgt.cli import main
from rgt.errors import DiskBudgetError
from rgt.jobs.pull import pull
from rgt.models import JobSpec, Machine
from rgt.state.store import Store, utcnow
from tests.backends.fake import FakeBackend
from tests.conftest import TmpfsMount

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _fresh_fake() -> None:
    FakeBackend.jobs.clear()


def fake_job(tmp_path: Path, files: dict[str, bytes], state: str = "succeeded") -> Store:
    store = Store.open()
    machine = Machine("fk", "fake", "local", {}, str(tmp_path / "root"), registered=utcnow())
    store.add_machine(machine)
    store.add_job(JobSpec(job_id="job1", machine="fk", command=("true",), created=utcnow()))
    FakeBackend(machine).set_job("job1", state, files)
    return store


def test_too_little_space_is_refused_before_copying(
    tmp_path: Path, small_tmpfs: TmpfsMount
) -> None:
    disk = small_tmpfs("2m", 1000)
    store = fake_job(tmp_path, {"outputs/big.txt": b"x" * (3 * MIB)})
    with pytest.raises(DiskBudgetError) as refused:
        pull(store, "job1", disk / "dest")
    assert f"on {disk}" in refused.value.message and "3.0 MiB needed" in refused.value.message
    assert refused.value.mount == str(disk) and "--to" in (refused.value.fix or "")
    assert not (disk / "dest" / "outputs").exists()


def test_too_few_inodes_are_refused_before_copying(tmp_path: Path, small_tmpfs: TmpfsMount) -> None:
    disk = small_tmpfs("8m", 20)
    store = fake_job(tmp_path, {f"outputs/{i}.txt": b"%d" % i for i in range(40)})
    with pytest.raises(DiskBudgetError, match="40 files needed"):
        pull(store, "job1", disk / "dest")


def test_a_disk_that_fills_during_the_pull_is_a_clear_error(
    tmp_path: Path, small_tmpfs: TmpfsMount
) -> None:
    disk = small_tmpfs("4m", 1000)
    store = fake_job(tmp_path, {"outputs/a.txt": b"a" * MIB, "outputs/b.txt": b"b" * MIB})

    def someone_else_fills_it(path: str, _done: int, _total: int) -> None:
        if path == "outputs/a.txt":
            with open(disk / "filler", "wb") as handle, pytest.raises(OSError):
                while True:
                    handle.write(b"f" * 65536)
                    handle.flush()

    with pytest.raises(DiskBudgetError, match="disk is full") as full:
        pull(store, "job1", disk / "dest", progress=someone_else_fills_it)
    assert full.value.mount == str(disk)


def test_an_over_long_destination_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_job(tmp_path, {"outputs/m.json": b"{}"})
    with pytest.raises(SystemExit) as exit_:
        main(["pull", "job1", "--to", str(tmp_path / ("d" * 300)), "--json"])
    assert exit_.value.code == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"] == "UsageError" and "too long" in doc["message"]


def test_verification_failed_always_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_job(tmp_path, {"outputs/metrics.json": b'{"loss": 0.5'})
    with pytest.raises(SystemExit) as exit_:
        main(["pull", "job1", "--to", str(tmp_path / "dest")])
    assert exit_.value.code == 1
    out = capsys.readouterr().out
    assert "verification FAILED: outputs/metrics.json: " in out


def test_a_job_with_no_artifacts_pulls_as_no_artifacts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = fake_job(tmp_path, {})
    with pytest.raises(SystemExit) as exit_:
        main(["pull", "job1", "--to", str(tmp_path / "dest")])
    assert exit_.value.code == 0
    assert "no artifacts" in capsys.readouterr().out
    recorded = store.last_pull("job1")
    assert recorded is not None and recorded["verified"] and recorded["files"] == {}

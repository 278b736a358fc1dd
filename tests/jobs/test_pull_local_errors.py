"""Every local failure of a pull is rgt's own error: a destination out of inodes or bytes at
any step is a DiskBudgetError naming the mount and what is still needed, a read-only one a
UsageError naming the path; nothing half-written is left looking complete, and the same pull
works once the disk has room. And a manifest path that is a directory (``.``, ``a/``, an
empty or dot part, another entry's directory) is refused before anything is written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rgt.backends.local import LocalBackend
from rgt.errors import DiskBudgetError, StateWriteError, UsageError, VerifyError
from rgt.jobs.pull import checked_entries, pull
from rgt.lifecycle.machines import register_local
from rgt.state.store import Store
from tests.conftest import TmpfsMount
from tests.hostile_machine import entry, machine_job

FILES = {"outputs/a.txt": b"a" * 5000, "outputs/sub/b.txt": b"b" * 7000, "top.txt": b"t"}


@pytest.fixture
def box(tmp_path: Path) -> tuple[Store, LocalBackend]:
    store = Store.open()
    machine = register_local(store, "box", tmp_path / "machine root").machine
    backend = LocalBackend(machine)
    machine_job(backend, "j1", FILES, store=store)
    return store, backend


def _remount(point: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(point)], check=True)


def _fill(disk: Path) -> None:
    """Another process takes every free byte (unbuffered: nothing left to flush at close)."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"f" * 4096)
    finally:
        os.close(fd)


def _landed(dest: Path) -> list[str]:
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())


@pytest.mark.parametrize("inodes", [2, 3, 5, 7])
def test_out_of_inodes_at_each_step_is_a_disk_budget_error_then_resumes(
    box: tuple[Store, LocalBackend], small_tmpfs: TmpfsMount, inodes: int
) -> None:
    """2: the staging dir cannot be made; 3..7: a directory, a file or the manifest."""
    store, _ = box
    disk = small_tmpfs("8m", inodes)
    dest = disk / "dest"
    with pytest.raises(DiskBudgetError) as full:
        pull(store, "j1", dest)
    error = full.value
    assert error.mount == str(disk) and str(disk) in error.message
    assert "inodes" in error.message and "inodes" in (error.fix or "")
    assert error.need_bytes > 0, "what is still needed is named"
    assert not (dest / "manifest.json").exists(), "no manifest claims a complete pull"
    for rel in _landed(dest):  # whatever landed is whole: staged files are renamed in whole
        if rel in FILES:
            assert (dest / rel).read_bytes() == FILES[rel]
    _remount(disk, "nr_inodes=1000")
    again = pull(store, "j1", dest)
    assert again.ok, again.reasons
    assert _landed(dest) == sorted([*FILES, "manifest.json"])


def test_a_read_only_destination_is_a_usage_error_naming_the_path(
    box: tuple[Store, LocalBackend], small_tmpfs: TmpfsMount
) -> None:
    store, _ = box
    disk = small_tmpfs("8m", 1000)
    (disk / "dest").mkdir()
    _remount(disk, "ro")
    with pytest.raises(UsageError) as refused:
        pull(store, "j1", disk / "dest")
    assert str(disk / "dest") in refused.value.message
    assert "Read-only file system" in refused.value.message and refused.value.fix


def test_a_disk_full_mid_file_leaves_no_staged_part(
    box: tuple[Store, LocalBackend], small_tmpfs: TmpfsMount
) -> None:
    """The free-space check passes; another process then fills the disk, so b.txt's copy is
    cut by ENOSPC: no part of it stays staged or placed, and the pull resumes once freed."""
    store, _ = box
    disk = small_tmpfs("4m", 1000)
    dest = disk / "dest"

    def someone_fills_the_disk(path: str, _done: int, _total: int) -> None:
        if path == "outputs/a.txt":
            _fill(disk)

    with pytest.raises(DiskBudgetError, match="disk is full") as full:
        pull(store, "j1", dest, progress=someone_fills_the_disk)
    assert full.value.mount == str(disk) and "still needed" in full.value.message
    staged = dest / ".rgt-incoming"
    assert [p.name for p in staged.iterdir() if p.is_file()] == [], "a cut copy stayed staged"
    assert not (dest / "outputs" / "sub" / "b.txt").exists()
    assert not (dest / "manifest.json").exists()
    (disk / "filler").unlink()
    assert pull(store, "j1", dest).ok


@pytest.mark.parametrize("bad", [".", "./", "a/./b", "a//b", "a/", "./a", "a/.", ""])
def test_a_manifest_path_with_an_empty_or_dot_part_is_refused(bad: str) -> None:
    with pytest.raises(VerifyError, match=r"unsafe path|no path"):
        checked_entries({"files": [entry("ok.txt", b"1"), entry(bad, b"1")]})


@pytest.mark.parametrize("sibling", ["a-x", "a.txt", "a0", "a b"])
def test_a_file_that_is_another_entrys_directory_is_refused(sibling: str) -> None:
    """Names that sort between ``a`` and ``a/b`` ('-', '.', ' ' sort before '/')."""
    listed = [entry("a", b"1"), entry(sibling, b"2"), entry("a/b", b"3")]
    with pytest.raises(VerifyError, match="'a' as a file and a directory"):
        checked_entries({"files": listed})


def test_a_dot_path_through_pull_is_refused_before_any_copy(
    box: tuple[Store, LocalBackend], tmp_path: Path
) -> None:
    store, backend = box
    listed = [entry("outputs/a.txt", FILES["outputs/a.txt"]), entry(".", b"evil")]
    machine_job(backend, "j2", {"outputs/a.txt": FILES["outputs/a.txt"]}, store=store,
                listed=listed)  # fmt: skip
    with pytest.raises(VerifyError, match=r"unsafe path '\.'"):
        pull(store, "j2", tmp_path / "dest")
    assert not (tmp_path / "dest" / "outputs").exists()


def test_a_full_rgt_home_when_recording_the_verdict_is_a_state_write_error(
    tmp_path: Path, small_tmpfs: TmpfsMount
) -> None:
    disk = small_tmpfs("4m", 1000)
    store = Store.open(disk / "state.db")
    backend = LocalBackend(register_local(store, "box", tmp_path / "machine root").machine)
    machine_job(backend, "j1", FILES, store=store)
    _fill(disk)
    with pytest.raises(StateWriteError) as full:
        pull(store, "j1", tmp_path / "dest")
    assert full.value.reason == "disk_full" and full.value.mount == str(disk)
    assert "rgt pull j1 --to" in (full.value.fix or "")  # the files are there: re-run records
    (disk / "filler").unlink()
    assert pull(store, "j1", tmp_path / "dest").ok

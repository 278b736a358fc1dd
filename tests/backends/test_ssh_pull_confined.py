"""Pull over a real sshd from a machine that swaps files and directories for symbolic links
between listing and copying: nothing outside --to is created or changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.backends.ssh import SshBackend
from rgt.errors import VerifyError
from rgt.jobs.pull import pull
from rgt.state.store import Store
from tests.hostile_machine import entry, machine_job, swap_for_link, tree, write_manifest
from tests.sshd import SshServer, register

HOSTILE_DEST = "to 'q' \"d\" $(touch PWNED); ü"


@pytest.fixture
def box(sshd_server: SshServer, tmp_path: Path) -> tuple[Store, SshBackend]:
    machine = register(sshd_server, "box", tmp_path / "machine 'root'")
    return Store.open(), SshBackend(machine)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "model.txt").write_text("precious")
    return path


def test_a_link_swapped_in_mid_pull_never_becomes_a_way_out(
    box: tuple[Store, SshBackend], outside: Path, tmp_path: Path
) -> None:
    store, backend = box
    files = {"outputs/a.txt": b"aaa", "outputs/ckpt": b"ck"}
    job_dir = machine_job(backend, "j1", files, store=store)
    dest = tmp_path / HOSTILE_DEST
    before = tree(outside)

    def machine(path: str, _done: int, _total: int) -> None:
        if path == "outputs/a.txt":  # listed as a file; a link by the time it is copied
            # Relative: dangling on the machine, but from --to/outputs/ it names `outside`
            # (on a real pair of hosts: a directory of the laptop, say ~/.ssh).
            swap_for_link(job_dir / "outputs" / "ckpt", Path("../../outside"))

    first = pull(store, "j1", dest, progress=machine)
    left_a_link = (dest / "outputs" / "ckpt").is_symlink()
    # The machine now says ckpt is a directory: a link left by the first pull would send
    # this file outside --to.
    (job_dir / "outputs" / "ckpt").unlink()
    (job_dir / "outputs" / "ckpt").mkdir()
    (job_dir / "outputs" / "ckpt" / "model.txt").write_bytes(b"new weights")
    (job_dir / "outputs" / "ckpt.moved").unlink()
    write_manifest(
        job_dir,
        [entry("outputs/a.txt", b"aaa"), entry("outputs/ckpt/model.txt", b"new weights")],
        "succeeded",
    )
    second = pull(store, "j1", dest)
    assert tree(outside) == before, "a file outside --to was created or changed"
    assert not left_a_link
    assert not first.ok
    assert first.refused == ("outputs/ckpt on the machine is a symbolic link; not copied",)
    assert second.ok, second.reasons
    assert (dest / "outputs" / "ckpt" / "model.txt").read_bytes() == b"new weights"


def test_a_manifest_that_uses_a_link_as_a_directory_is_refused(
    box: tuple[Store, SshBackend], outside: Path, tmp_path: Path
) -> None:
    store, backend = box
    listed = [entry("outputs/ckpt", b"x"), entry("outputs/ckpt/model.txt", b"evil")]
    job_dir = machine_job(backend, "j2", {}, store=store, listed=listed)
    (job_dir / "outputs").mkdir()
    (job_dir / "outputs" / "ckpt").symlink_to(outside)
    before = tree(outside)
    with pytest.raises(VerifyError, match="as a file and a directory"):
        pull(store, "j2", tmp_path / "dest")
    assert tree(outside) == before
    assert not (tmp_path / "dest" / "outputs").exists()


def test_a_file_that_grew_past_its_manifest_entry_is_not_copied(
    box: tuple[Store, SshBackend], tmp_path: Path
) -> None:
    store, backend = box
    job_dir = machine_job(backend, "j3", {"outputs/log.txt": b"short"}, store=store)
    (job_dir / "outputs" / "log.txt").write_bytes(b"x" * 100_000)
    result = pull(store, "j3", tmp_path / "dest")
    assert not result.ok
    assert result.refused == (
        "outputs/log.txt on the machine is larger than the 5 bytes its manifest entry declares;"
        " not copied",
    )

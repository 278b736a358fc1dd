"""Pull on the local backend: nothing lands outside --to, no link is followed, whatever the
machine (or a process racing the pull) does to the directories between listing and copying."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.backends.local import LocalBackend
from rgt.errors import VerifyError
from rgt.jobs.pull import pull
from rgt.machines import register_local
from rgt.state.store import Store
from tests.hostile_machine import entry, machine_job, swap_for_link, tree

HOSTILE_DEST = "to 'q' \"d\" $(touch PWNED); ü"


@pytest.fixture
def box(tmp_path: Path) -> tuple[Store, LocalBackend]:
    store = Store.open()
    machine = register_local(store, "box", tmp_path / "machine root").machine
    return store, LocalBackend(machine)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside --to with a file someone cares about."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "b.txt").write_text("precious")
    return path


def test_a_destination_dir_swapped_for_a_link_mid_pull_is_not_followed(
    box: tuple[Store, LocalBackend], outside: Path, tmp_path: Path
) -> None:
    store, backend = box
    machine_job(backend, "j1", {"outputs/a.txt": b"aaa", "outputs/b.txt": b"bbb"}, store=store)
    dest = tmp_path / HOSTILE_DEST
    before = tree(outside)

    def racer(path: str, _done: int, _total: int) -> None:
        if path == "outputs/a.txt":  # between the first copy and the second
            swap_for_link(dest / "outputs", outside)

    result = pull(store, "j1", dest, progress=racer)
    assert tree(outside) == before, "a file outside --to was created or changed"
    assert not result.ok
    assert any(
        "outputs/b.txt: outputs in the destination is a symbolic link" in r for r in result.reasons
    )
    assert any("OUTSIDE the destination" in r for r in result.reasons)
    assert not store.last_pull("j1")["verified"]  # type: ignore[index]


def test_a_link_on_the_machine_is_refused_with_a_note(
    box: tuple[Store, LocalBackend], outside: Path, tmp_path: Path
) -> None:
    store, backend = box
    job_dir = machine_job(backend, "j2", {"outputs/a.txt": b"aaa"}, store=store, listed=[])
    (job_dir / "outputs" / "b.txt").symlink_to(outside / "b.txt")
    listed = [entry("outputs/a.txt", b"aaa"), entry("outputs/b.txt", b"precious")]
    (job_dir / "manifest.json").unlink()
    from tests.hostile_machine import write_manifest

    write_manifest(job_dir, listed, "succeeded")
    result = pull(store, "j2", tmp_path / "dest")
    assert not result.ok
    assert result.refused == ("outputs/b.txt on the machine is a symbolic link; not followed",)
    assert not (tmp_path / "dest" / "outputs" / "b.txt").exists()
    assert (tmp_path / "dest" / "outputs" / "a.txt").read_bytes() == b"aaa"


def test_a_machine_dir_swapped_for_a_link_mid_pull_is_not_followed(
    box: tuple[Store, LocalBackend], tmp_path: Path
) -> None:
    store, backend = box
    files = {"outputs/a.txt": b"aaa", "outputs/sub/b.txt": b"bbb"}
    job_dir = machine_job(backend, "j3", files, store=store)
    elsewhere = tmp_path / "elsewhere on the machine"
    elsewhere.mkdir()
    (elsewhere / "b.txt").write_bytes(b"bbb")  # same bytes: only the link gives it away

    def machine(path: str, _done: int, _total: int) -> None:
        if path == "outputs/a.txt":
            swap_for_link(job_dir / "outputs" / "sub", elsewhere)

    result = pull(store, "j3", tmp_path / "dest", progress=machine)
    assert not result.ok
    assert "outputs/sub on the machine is a symbolic link; not followed" in result.reasons


def test_a_manifest_naming_a_path_as_file_and_directory_is_refused_before_any_copy(
    box: tuple[Store, LocalBackend], tmp_path: Path
) -> None:
    store, backend = box
    listed = [entry("outputs/ckpt", b"x"), entry("outputs/ckpt/model.bin", b"y")]
    machine_job(backend, "j4", {"outputs/ckpt/model.bin": b"y"}, store=store, listed=listed)
    with pytest.raises(VerifyError, match="as a file and a directory"):
        pull(store, "j4", tmp_path / "dest")
    assert not (tmp_path / "dest" / "outputs").exists()


@pytest.mark.parametrize(
    "bad", ["../up.txt", "/abs.txt", "a/../../b", "a//b", "./a", ".rgt-incoming/x", "manifest.json"]
)
def test_unsafe_manifest_paths_are_refused(
    box: tuple[Store, LocalBackend], tmp_path: Path, bad: str
) -> None:
    store, backend = box
    machine_job(backend, "j5", {"ok.txt": b"1"}, store=store, listed=[entry(bad, b"1")])
    with pytest.raises(VerifyError, match="unsafe path"):
        pull(store, "j5", tmp_path / "dest")


def test_concurrent_pulls_into_one_destination_both_verify(
    box: tuple[Store, LocalBackend], tmp_path: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store, backend = box
    files = {f"outputs/{i}.txt": b"%d" % i * 50_000 for i in range(8)}
    machine_job(backend, "j6", files, store=store)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: pull(store, "j6", tmp_path / "dest"), range(2)))
    assert all(r.ok for r in results), [r.reasons for r in results]
    assert not (tmp_path / "dest" / ".rgt-incoming").exists()

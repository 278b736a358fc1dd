"""Where a sharded save leaves its shard: in the page cache by default (buffered writes), so a
restart on the same machine reads memory; not there with ``direct_io=True`` (``O_DIRECT``).
Both write the same bytes, hash and load alike; the load reads an uncached shard ahead of its
pass; rotation keeps removed shards as spares the next save writes over, unless one is open."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rgt.ckpt import ShardedCheckpointer

torch = pytest.importorskip("torch")

from rgt.ckpt._shardfile import ShardFile  # noqa: E402 - imports torch

SESSION = "0123abcd0123abcd"
PAGE = mmap.PAGESIZE


def resident_fraction(path: str) -> float:
    """The share of ``path``'s pages in the page cache (``mincore`` over a private mapping
    that is only read, so every page it reports is the file's own cached page)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        mapping = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        pages = -(-size // PAGE)
        flags = ctypes.create_string_buffer(pages)
        anchor = ctypes.c_char.from_buffer(mapping)
        try:
            if libc.mincore(ctypes.addressof(anchor), size, flags) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            del anchor
        return sum(flag & 1 for flag in flags.raw) / pages
    finally:
        mapping.close()


def takes_direct_io(directory: Path) -> bool:
    try:
        fd = os.open(directory / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    os.close(fd)
    os.unlink(directory / "probe")
    return True


def saved(directory: Path, direct_io: bool) -> tuple[ShardedCheckpointer, str, str]:
    """Save an 8 MB state; (checkpointer, the shard's path, its recorded hash)."""
    ckpt = ShardedCheckpointer(
        directory, rank=0, world_size=1, session=SESSION, direct_io=direct_io
    )
    weights = torch.arange(2 << 20, dtype=torch.float32)
    ckpt.save({"model": {"w": weights}, "step": 7}, 7)
    info = ckpt.latest_info()
    assert info is not None
    (shard,) = info.shards
    return ckpt, shard.path, shard.file_hash


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="O_DIRECT is Linux's")
def test_the_default_keeps_the_shard_cached_and_direct_io_does_not(tmp_path: Path) -> None:
    if not takes_direct_io(tmp_path):
        pytest.skip("this filesystem refuses O_DIRECT (tmpfs?): both ways are buffered here")
    _, cached, cached_hash = saved(tmp_path / "buffered", direct_io=False)
    _, direct, direct_hash = saved(tmp_path / "direct", direct_io=True)
    assert resident_fraction(cached) > 0.9
    assert resident_fraction(direct) < 0.1
    assert cached_hash == direct_hash  # the same bytes either way
    assert ShardedCheckpointer(tmp_path).direct_io is False


@pytest.mark.parametrize("direct_io", [False, True])
def test_either_way_the_shard_loads_back_verified(tmp_path: Path, direct_io: bool) -> None:
    saved(tmp_path, direct_io)
    target = {"model": {"w": torch.zeros(2 << 20, dtype=torch.float32)}, "step": 0}
    info = ShardedCheckpointer(tmp_path, rank=0, world_size=1).load_latest(target)
    assert info is not None and info.step == 7 and target["step"] == 7
    assert torch.equal(target["model"]["w"], torch.arange(2 << 20, dtype=torch.float32))


def test_the_environment_picks_direct_io(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ShardedCheckpointer.from_env().direct_io is False
    monkeypatch.setenv("RGT_CKPT_DIRECT_IO", "1")
    assert ShardedCheckpointer.from_env().direct_io is True
    assert ShardedCheckpointer.from_env(direct_io=False).direct_io is False


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise (macOS)")
def test_the_prefetch_brings_a_whole_uncached_shard_into_the_page_cache(tmp_path: Path) -> None:
    if not takes_direct_io(tmp_path):
        pytest.skip("this filesystem refuses O_DIRECT (tmpfs?): the shard is cached anyway")
    ckpt = ShardedCheckpointer(tmp_path, rank=0, world_size=1, session=SESSION, direct_io=True)
    ckpt.save({"model": {"w": torch.ones(8 << 20, dtype=torch.float32)}}, 1)  # 32 MB
    (shard,) = ckpt.latest_info().shards  # type: ignore[union-attr]
    assert resident_fraction(shard.path) < 0.1
    opened = ShardFile(shard.path, shard.file_hash, shard.bytes)
    try:
        opened.prefetch()  # far more than one readahead window (one WILLNEED call's reach)
        deadline = time.monotonic() + 10
        while resident_fraction(shard.path) < 0.99 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert resident_fraction(shard.path) >= 0.99
    finally:
        opened.close()


def test_closing_a_shard_stops_its_prefetch(tmp_path: Path) -> None:
    _, path, file_hash = saved(tmp_path, direct_io=True)
    opened = ShardFile(path, file_hash, os.path.getsize(path))
    opened.prefetch()
    opened.close()  # joins the prefetch thread before the descriptor goes
    assert not [t for t in threading.enumerate() if t.name == "rgt-ckpt-prefetch"]


def spares(directory: Path) -> list[Path]:
    return sorted(directory.glob(".tmp-spare-*.part"))


@pytest.mark.parametrize("direct_io", [False, True])
def test_rotation_keeps_a_spare_and_the_next_save_writes_over_it(
    tmp_path: Path, direct_io: bool
) -> None:
    ckpt = ShardedCheckpointer(
        tmp_path, rank=0, world_size=1, session=SESSION, keep_last=1, direct_io=direct_io
    )
    ckpt.save({"model": {"w": torch.full((1 << 20,), 1.0)}, "step": 1}, 1)
    ckpt.save({"model": {"w": torch.full((1 << 20,), 2.0)}, "step": 2}, 2)  # rotates step 1
    (spare,) = spares(tmp_path)
    inode = spare.stat().st_ino
    smaller = torch.full((1000,), 3.0)  # a shorter file: nothing of the spare's tail may remain
    ckpt.save({"model": {"w": smaller}, "step": 3}, 3)
    info = ckpt.latest_info()
    assert info is not None
    (shard,) = info.shards
    assert os.stat(shard.path).st_ino == inode and os.path.getsize(shard.path) == shard.bytes
    assert len(spares(tmp_path)) == 1  # step 2's shard, rotated out by step 3's commit
    target = {"model": {"w": torch.zeros(1000)}, "step": 0}
    assert ShardedCheckpointer(tmp_path, rank=0, world_size=1).load_latest(target) is not None
    assert torch.equal(target["model"]["w"], smaller) and target["step"] == 3


def test_a_spare_someone_has_open_keeps_its_bytes_and_is_not_written_over(tmp_path: Path) -> None:
    ckpt = ShardedCheckpointer(tmp_path, rank=0, world_size=1, session=SESSION, keep_last=1)
    ckpt.save({"model": {"w": torch.full((1 << 20,), 1.0)}}, 1)
    ckpt.save({"model": {"w": torch.full((1 << 20,), 2.0)}}, 2)
    (spare,) = spares(tmp_path)
    with open(spare, "rb") as reader:  # a pull still copying the old step
        before = reader.read()
        ckpt.save({"model": {"w": torch.full((1 << 20,), 3.0)}}, 3)
        reader.seek(0)
        assert reader.read() == before
        (shard,) = ckpt.latest_info().shards  # type: ignore[union-attr]
        assert os.stat(shard.path).st_ino != os.fstat(reader.fileno()).st_ino


def test_spares_are_at_most_one_per_rank(tmp_path: Path) -> None:
    ranks = [
        ShardedCheckpointer(tmp_path, rank=r, world_size=2, session=SESSION, keep_last=1)
        for r in (0, 1)
    ]
    for step in range(1, 6):
        for rank in (1, 0):  # rank 0 last: it commits and rotates
            ranks[rank].save({"model": {"w": torch.full((1000,), float(step + rank))}}, step)
    assert len(spares(tmp_path)) == 2


def test_a_file_past_the_spare_limit_is_deleted(tmp_path: Path) -> None:
    from rgt.ckpt import _spares

    for index in range(3):
        data = tmp_path / f"ckpt-{index}.rgt"
        data.write_bytes(b"x" * 10)
        _spares.keep(str(data), str(tmp_path), limit=2)
        assert not data.exists()
    assert len(spares(tmp_path)) == 2


def test_a_short_disk_drops_the_spares_rather_than_refusing_the_save(small_tmpfs: Any) -> None:
    point = small_tmpfs("24m", 256)
    ckpt = ShardedCheckpointer(point / "ckpt", rank=0, world_size=1, session=SESSION, keep_last=1)
    for step in (1, 2):  # step 1 becomes a 6 MB spare
        ckpt.save({"model": {"w": torch.full((3 << 19,), float(step))}}, step)
    assert len(spares(point / "ckpt")) == 1
    free = os.statvfs(point).f_bavail * os.statvfs(point).f_frsize
    (point / "filler").write_bytes(b"\0" * (free - (2 << 20)))  # 2 MB left: less than a shard
    ckpt.save({"model": {"w": torch.full((3 << 19,), 3.0)}}, 3)  # refused if the spare counted
    target = {"model": {"w": torch.zeros(3 << 19)}}
    info = ShardedCheckpointer(point / "ckpt", rank=0, world_size=1).load_latest(target)
    assert info is not None and info.step == 3 and float(target["model"]["w"][0]) == 3.0

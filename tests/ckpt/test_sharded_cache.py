"""Where a sharded save leaves its shard: in the page cache by default (buffered writes), so a
restart on the same machine reads memory; not there with ``direct_io=True`` (``O_DIRECT``).
Both write the same bytes, hash and load alike."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from pathlib import Path

import pytest

from rgt.ckpt import ShardedCheckpointer

torch = pytest.importorskip("torch")

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

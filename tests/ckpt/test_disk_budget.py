"""A full disk and an exhausted inode table, on real small tmpfs mounts (needs root)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from rgt.ckpt import Checkpointer, _persist
from rgt.errors import DiskBudgetError

Mount = Callable[[str, int], Path]


def state_of(megabytes: float, step: int) -> dict[str, object]:
    return {"step": step, "w": torch.full((int(megabytes * 2**18),), float(step))}


def snapshot(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


def test_disk_full_refuses_before_writing(small_tmpfs: Mount) -> None:
    point = small_tmpfs("2m", 64)
    ckpt = Checkpointer(point / "ckpt", keep_last=1)
    ckpt.save(state_of(0.5, 1), 1)
    before = snapshot(point / "ckpt")
    with pytest.raises(DiskBudgetError) as caught:
        ckpt.save(state_of(3, 2), 2)
    error = caught.value
    assert error.mount == str(point) and str(point) in error.message
    assert error.need_bytes > error.free_bytes
    assert error.fix and "bigger disk" in error.fix and "keep_last" in error.fix
    assert snapshot(point / "ckpt") == before  # nothing written, nothing rotated
    assert ckpt.load_latest()["step"] == 1


def test_inodes_exhausted_refuses_before_writing(small_tmpfs: Mount) -> None:
    # Inodes: the mount's root, the ckpt dir, one data file and one record = 4 of 5.
    point = small_tmpfs("16m", 5)
    ckpt = Checkpointer(point / "ckpt", keep_last=1)
    ckpt.save(state_of(0.1, 1), 1)
    before = snapshot(point / "ckpt")
    with pytest.raises(DiskBudgetError, match="inodes") as caught:
        ckpt.save(state_of(0.1, 2), 2)
    assert caught.value.free_inodes == 1 and caught.value.free_bytes > caught.value.need_bytes
    assert snapshot(point / "ckpt") == before
    assert ckpt.load_latest()["step"] == 1


def test_enospc_mid_write_removes_the_partial_file(
    small_tmpfs: Mount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The budget check passed, then another writer filled the disk before the data went out.
    point = small_tmpfs("4m", 64)
    ckpt = Checkpointer(point / "ckpt")
    ckpt.save(state_of(0.5, 1), 1)
    before = snapshot(point / "ckpt")

    def fill_the_disk(stage: str) -> None:
        if stage == "open":
            (point / "filler").write_bytes(b"x" * (3 << 20))

    monkeypatch.setattr(_persist, "hold", fill_the_disk)
    with pytest.raises(DiskBudgetError, match="partial file was removed") as caught:
        ckpt.save(state_of(1, 2), 2)
    assert caught.value.mount == str(point)
    assert snapshot(point / "ckpt") == before
    assert ckpt.load_latest()["step"] == 1

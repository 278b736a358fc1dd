"""Injected write failures: a file size limit (``ulimit -f``) on the real disk with O_DIRECT, a
tmpfs that fills up mid-write, an inode table that runs out at each file a save creates. Every
one ends in a clear error naming the fix, no temp file, and the previous checkpoint as latest."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from rgt.ckpt import Checkpointer, _persist
from rgt.errors import CheckpointError, DiskBudgetError

PROBE = Path(__file__).with_name("_fsize_probe.py")
Mount = Callable[[str, int], Path]


@pytest.fixture
def tmpfs(small_tmpfs: Mount) -> Iterator[Mount]:
    try:
        yield small_tmpfs
    finally:
        _persist.hold = None


@pytest.mark.slow
def test_file_size_limit_mid_write(tmp_path: Path) -> None:
    cases = 10
    proc = subprocess.run(
        [sys.executable, str(PROBE), str(tmp_path / "ckpt"), str(cases), str(random.randrange(99))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == cases and {r["asynchronous"] for r in results} == {True, False}
    for result in results:
        assert result["error"] == "DiskBudgetError", result
        assert (
            "File too large" in result["message"]
            and "previous checkpoint is intact" in (result["message"])
        )
        assert "bigger disk" in result["fix"]
        assert result["temp_files"] == [] and result["loaded_step"] == result["expected_step"]


def filler(point: Path, name: str, nbytes: int) -> None:
    with open(point / name, "wb") as handle:
        handle.write(b"\0" * nbytes)


@pytest.mark.parametrize("case", range(6))
def test_tmpfs_fills_up_mid_write(tmpfs: Mount, case: int) -> None:
    point = tmpfs("6m", 256)
    asynchronous = case % 2 == 1
    ckpt = Checkpointer(point / "ckpt", keep_last=1, asynchronous=asynchronous)
    ckpt.save({"step": 1, "w": torch.zeros(1 << 16)}, 1)
    ckpt.wait()
    free = os.statvfs(point).f_bavail * os.statvfs(point).f_frsize
    # Another writer takes all but 0.2-3 MiB once the budget check has passed.
    leave = random.randrange(200 << 10, 3 << 20)
    _persist.hold = lambda stage: filler(point, "other", free - leave) if stage == "open" else None
    with pytest.raises(DiskBudgetError, match="partial file was removed") as caught:
        ckpt.save({"step": 2, "w": torch.ones(1 << 20)}, 2)  # 4 MiB
        ckpt.wait()
    assert caught.value.mount == str(point) and caught.value.fix
    assert not [n for n in os.listdir(point / "ckpt") if n.startswith(".tmp-")]
    _persist.hold = None
    os.unlink(point / "other")
    assert Checkpointer(point / "ckpt").load_latest()["step"] == 1
    ckpt.save({"step": 3, "w": torch.ones(8)}, 3)  # and saving works again
    ckpt.wait()
    assert Checkpointer(point / "ckpt").load_latest()["step"] == 3


@pytest.mark.parametrize(
    ("stage", "asynchronous"),
    [(s, a) for s in ("open", "written") for a in (False, True)]
    + [("open", True), ("written", False)],
)
def test_inodes_run_out_at_each_file_a_save_creates(
    tmpfs: Mount, stage: str, asynchronous: bool
) -> None:
    point = tmpfs("16m", 64)
    ckpt = Checkpointer(point / "ckpt", keep_last=1, asynchronous=asynchronous)
    ckpt.save({"step": 1, "w": torch.zeros(256)}, 1)
    ckpt.wait()
    (point / "others").mkdir()

    def use_every_inode(at: str) -> None:
        if at == stage:
            index = 0
            while True:
                try:
                    (point / "others" / str(index)).touch()
                except OSError:
                    return
                index += 1

    _persist.hold = use_every_inode
    with pytest.raises(CheckpointError) as caught:
        ckpt.save({"step": 2, "w": torch.ones(256)}, 2)
        ckpt.wait()
    assert isinstance(caught.value, DiskBudgetError) and "No space left" in caught.value.message
    names = os.listdir(point / "ckpt")
    assert not [n for n in names if n.startswith(".tmp-")]
    assert sorted(n.split("-")[1][:12] for n in names) == ["000000000001"] * 2  # data + record
    _persist.hold = None
    assert Checkpointer(point / "ckpt").load_latest()["step"] == 1

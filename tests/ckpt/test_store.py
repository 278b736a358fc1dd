"""Saving, verifying, falling back and rotating checkpoints on a real directory."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy
import pytest
import torch

from rgt.ckpt import (
    FORMAT,
    Checkpointer,
    CheckpointFallbackWarning,
    capture_rng,
    restore_rng,
    state_digest,
)
from rgt.errors import CheckpointError


def state_at(step: int) -> dict[str, object]:
    return {"step": step, "w": torch.full((64, 64), float(step)), "meta": {"lr": 0.1 * step}}


def files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_fresh_start_is_none(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path / "never-created")
    assert ckpt.load_latest() is None
    assert ckpt.latest_info() is None


def test_round_trip_in_hostile_directory(hostile_dir: Path) -> None:
    ckpt = Checkpointer(hostile_dir / "ckpt")
    info = ckpt.save(state_at(7), 7, metric=0.5)
    loaded = Checkpointer(hostile_dir / "ckpt").load_latest()
    assert loaded["step"] == 7 and torch.equal(loaded["w"], torch.full((64, 64), 7.0))
    record = json.loads(Path(info.record).read_text())
    assert record["format"] == FORMAT and record["file"] == os.path.basename(info.path)
    assert {"step", "metric", "time", "file", "bytes", "hash", "state_digest"} <= set(record)
    assert record["bytes"] == os.path.getsize(info.path)
    assert record["state_digest"] == state_digest(loaded)


def test_latest_info_reads_records_without_loading(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, keep_last=None)
    for step in (1, 2, 3):
        ckpt.save(state_at(step), step)
    info = ckpt.latest_info()
    assert info is not None and info.step == 3
    assert info.state_digest == state_digest(state_at(3))


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_damaged_newest_falls_back_with_a_warning(tmp_path: Path, damage: str) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.save(state_at(1), 1)
    newest = ckpt.save(state_at(2), 2)
    data = Path(newest.path).read_bytes()
    if damage == "truncate":
        Path(newest.path).write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 1
        Path(newest.path).write_bytes(bytes(flipped))
    else:
        os.unlink(newest.path)
    with pytest.warns(CheckpointFallbackWarning, match="step 2"):
        loaded = ckpt.load_latest()
    assert loaded["step"] == 1 and ckpt.loaded is not None and ckpt.loaded.step == 1
    with pytest.warns(CheckpointFallbackWarning):
        info = ckpt.latest_info()
    assert info is not None and info.step == 1


def test_all_committed_checkpoints_corrupt_raises_instead_of_restarting(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    info = ckpt.save(state_at(1), 1)
    Path(info.path).write_bytes(b"not a checkpoint")
    with pytest.warns(CheckpointFallbackWarning), pytest.raises(CheckpointError) as caught:
        ckpt.load_latest()
    assert caught.value.fix and "scratch" in caught.value.fix


def test_unreadable_record_is_ignored_with_a_warning(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.save(state_at(1), 1)
    (tmp_path / "ckpt-000000000009.json").write_text("{not json")
    with pytest.warns(CheckpointFallbackWarning, match="unreadable"):
        assert ckpt.load_latest()["step"] == 1


def test_keep_last_rotates_after_commit(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, keep_last=2)
    for step in range(1, 6):
        ckpt.save(state_at(step), step)
    assert [name for name in files(tmp_path) if name.endswith(".json")] == [
        "ckpt-000000000004.json",
        "ckpt-000000000005.json",
    ]
    assert len([name for name in files(tmp_path) if name.endswith(".rgt")]) == 2


@pytest.mark.parametrize(("mode", "best_step"), [("max", 2), ("min", 4)])
def test_best_by_metric_survives_rotation(tmp_path: Path, mode: str, best_step: int) -> None:
    metrics = {1: 0.5, 2: 0.9, 3: 0.7, 4: 0.1, 5: 0.6, 6: 0.65}
    ckpt = Checkpointer(tmp_path, keep_last=1, best_metric="acc", mode=mode)
    for step, metric in metrics.items():
        ckpt.save(state_at(step), step, metric=metric)
    kept = sorted(int(name[5:17]) for name in files(tmp_path) if name.endswith(".json"))
    assert kept == sorted({best_step, 6})


def test_resaving_a_step_swaps_its_record_and_cleans_the_old_data(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    first = ckpt.save(state_at(3), 3)
    second = ckpt.save({**state_at(3), "extra": 1}, 3)
    assert first.path != second.path and not os.path.exists(first.path)
    assert ckpt.load_latest()["extra"] == 1


def test_orphans_of_a_killed_save_are_ignored_then_cleaned(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.save(state_at(1), 1)
    (tmp_path / ".tmp-abc.part").write_bytes(b"half a checkpoint")
    (tmp_path / "ckpt-000000000002-dead.pt").write_bytes(b"data without a record")
    assert ckpt.load_latest()["step"] == 1
    ckpt.save(state_at(3), 3)
    assert ".tmp-abc.part" not in files(tmp_path)
    assert "ckpt-000000000002-dead.pt" not in files(tmp_path)


def test_state_digest_is_about_values_not_pickling() -> None:
    base = {"a": [1, 2.5, "x"], "t": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    same = {"t": torch.arange(6, dtype=torch.float32).reshape(2, 3).clone(), "a": (1, 2.5, "x")}
    assert state_digest(base) == state_digest(same)
    changed_value = {**base, "t": base["t"] + 1e-7}
    changed_dtype = {**base, "t": base["t"].double()}
    changed_shape = {**base, "t": base["t"].reshape(3, 2)}
    digests = {state_digest(s) for s in (base, changed_value, changed_dtype, changed_shape)}
    assert len(digests) == 4
    assert state_digest({"n": numpy.arange(3)}) != state_digest({"n": numpy.arange(3) + 1})


def test_state_digest_rejects_opaque_objects() -> None:
    with pytest.raises(CheckpointError, match="state\\['model'\\]"):
        state_digest({"model": torch.nn.Linear(2, 2)})


def test_rng_round_trip_through_a_checkpoint(tmp_path: Path) -> None:
    random.seed(1)
    numpy.random.seed(1)
    torch.manual_seed(1)
    ckpt = Checkpointer(tmp_path)
    ckpt.save({"rng": capture_rng()}, 1)
    expected = (random.random(), numpy.random.rand(), torch.rand(3))
    torch.rand(100)
    numpy.random.rand(7)
    random.random()
    restore_rng(ckpt.load_latest()["rng"])
    again = (random.random(), numpy.random.rand(), torch.rand(3))
    assert expected[:2] == again[:2] and torch.equal(expected[2], again[2])

"""The asynchronous save: returns after the snapshot, owns the arena until durable, reports
errors at the next call, and feeds the online (Daly) interval."""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from rgt.ckpt import Checkpointer, _persist, daly_interval, state_digest
from rgt.ckpt._digest import ArrayRef
from rgt.ckpt._format import plan
from rgt.errors import CheckpointError


@pytest.fixture
def held() -> Iterator[dict[str, threading.Event]]:
    """Freeze the writer after the data is written, until the test releases it."""
    events = {"reached": threading.Event(), "release": threading.Event()}

    def hook(stage: str) -> None:
        if stage == "written":
            events["reached"].set()
            events["release"].wait()

    _persist.hold = hook
    yield events
    events["release"].set()
    _persist.hold = None


def state(step: int) -> dict[str, object]:
    return {"step": step, "w": torch.full((256, 256), float(step))}


def test_save_returns_before_the_checkpoint_is_durable(tmp_path: Path, held: dict) -> None:
    ckpt = Checkpointer(tmp_path, asynchronous=True)
    live = state(1)
    pending = ckpt.save(live, 1)
    assert pending.file_hash == "" and pending.state_digest == ""
    held["reached"].wait(timeout=60)
    assert ckpt.writing and Checkpointer(tmp_path).latest_info() is None  # not committed yet
    live["w"].fill_(-1.0)  # training moves on; the snapshot is unaffected
    held["release"].set()
    info = ckpt.wait()
    assert info is not None and not ckpt.writing
    assert info.state_digest == state_digest(state(1))
    assert Checkpointer(tmp_path).latest_info() == info


def test_never_two_writes_in_flight(tmp_path: Path, held: dict) -> None:
    ckpt = Checkpointer(tmp_path, asynchronous=True)
    ckpt.save(state(1), 1)
    held["reached"].wait(timeout=60)
    second = threading.Thread(target=ckpt.save, args=(state(2), 2))
    second.start()
    second.join(timeout=0.5)
    # save(2) waits for the writer of save(1): the arena still holds step 1's bytes.
    assert second.is_alive()
    layout = plan(state(1))
    offset = next(
        o for p, o in zip(layout.pieces, layout.offsets, strict=True) if isinstance(p, ArrayRef)
    )
    staged = bytes(ckpt._arena.view[offset : offset + 256 * 256 * 4])
    assert staged == torch.full((256, 256), 1.0).numpy().tobytes()
    held["release"].set()
    second.join(timeout=60)
    info = ckpt.wait()
    assert info is not None and info.step == 2
    assert Checkpointer(tmp_path).load_latest()["step"] == 2


def test_a_background_failure_is_raised_by_the_next_call(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, asynchronous=True)
    ckpt.save(state(1), 1)
    ckpt.wait()

    def broken_disk(stage: str) -> None:
        if stage == "written":
            raise OSError(errno.EIO, "Input/output error")

    _persist.hold = broken_disk
    try:
        ckpt.save(state(2), 2)  # returns: the failure happens in the writer
        with pytest.raises(CheckpointError, match="Input/output error") as caught:
            ckpt.save(state(3), 3)
    finally:
        _persist.hold = None
    assert caught.value.fix and "dmesg" in caught.value.fix
    assert ckpt.wait() is None  # raised once; step 3 was never staged
    assert Checkpointer(tmp_path).load_latest()["step"] == 1
    ckpt.save(state(4), 4)
    assert (ckpt.wait() or pytest.fail("no record")).step == 4


def test_from_env_switches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_CKPT_DIR", str(tmp_path))
    monkeypatch.setenv("RGT_CKPT_ASYNC", "1")
    monkeypatch.setenv("RGT_MTBF_S", "3600")
    ckpt = Checkpointer.from_env()
    assert ckpt.asynchronous and ckpt.planner is not None and ckpt.planner.mtbf_s == 3600.0
    assert not Checkpointer.from_env(asynchronous=False).asynchronous


@pytest.mark.parametrize("asynchronous", [False, True])
def test_due_picks_dalys_interval_from_the_measured_cost(
    tmp_path: Path, asynchronous: bool
) -> None:
    ckpt = Checkpointer(tmp_path, mtbf_s=6 * 3600.0, asynchronous=asynchronous)
    assert ckpt.interval_plan() is None
    assert ckpt.due(1)  # no measurement yet: save now, to measure one
    ckpt.save(state(1), 1)
    for step in range(2, 6):
        ckpt.due(step)
    ckpt.wait()
    ckpt.due(6)
    plan = ckpt.interval_plan()
    assert plan is not None and plan.blocking_s > 0 and plan.interference_s >= 0
    assert plan.delta_s == pytest.approx(plan.blocking_s + plan.interference_s)
    assert plan.interval_s == pytest.approx(daly_interval(plan.delta_s, 6 * 3600.0))
    assert not ckpt.due(7)  # the interval is minutes to hours; a few steps later is not due
    tau, delta = plan.interval_s, plan.delta_s
    assert plan.expected_lost_work_s == pytest.approx((tau + delta) / 2)
    assert plan.expected_overhead == pytest.approx(delta / tau + (tau + delta) / (2 * 6 * 3600))


def test_reserve_allocates_the_arena_the_first_save_then_reuses(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, asynchronous=True)
    ckpt.reserve(state(1))
    ckpt.wait()
    buffer = ckpt._arena.buffer
    assert buffer is not None and ckpt._arena.size >= plan(state(1)).total
    ckpt.save(state(1), 1)
    assert ckpt._arena.buffer is buffer  # the snapshot went into the reserved pages
    info = ckpt.wait()
    assert info is not None and info.state_digest == state_digest(state(1))


def test_an_async_resume_reserves_the_size_of_the_loaded_checkpoint(tmp_path: Path) -> None:
    Checkpointer(tmp_path).save(state(3), 3)
    ckpt = Checkpointer(tmp_path, asynchronous=True)
    assert ckpt.load_latest()["step"] == 3
    ckpt.wait()
    assert ckpt.loaded is not None and ckpt._arena.size >= ckpt.loaded.bytes
    synchronous = Checkpointer(tmp_path)
    synchronous.load_latest()
    assert synchronous._arena.size == 0  # a synchronous run allocates on its first save

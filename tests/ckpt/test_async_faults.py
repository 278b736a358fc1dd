"""Durability of asynchronous saves under faults: 200 SIGKILLs at random moments (a quarter of
them with the writer frozen mid-persist), and injected write failures (a file size limit, a full
tmpfs, an exhausted inode table). A torn write never becomes the latest checkpoint."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from rgt.ckpt import Checkpointer, CheckpointFallbackWarning, _store, state_digest
from rgt.ckpt._store import TEMP_PREFIX

KILLS = 200
STAGES = ("open", "data", "written", "committed")
ZYGOTE = Path(__file__).with_name("_async_zygote.py")


def leftovers(directory: Path) -> bool:
    referenced = {os.path.basename(i.path) for i in _store.list_committed(str(directory))}
    return any(
        name.startswith(TEMP_PREFIX) or (name.endswith(".rgt") and name not in referenced)
        for name in os.listdir(directory)
    )


def kill_one(zygote: subprocess.Popen[str], rng: random.Random, stage: str) -> list[str]:
    """Start a child, kill it (at a random moment, or once its writer is held), return its
    lines."""
    assert zygote.stdin is not None and zygote.stdout is not None
    zygote.stdin.write(f"go {stage}\n")
    zygote.stdin.flush()
    pid, lines = int(zygote.stdout.readline()), []
    if stage == "-":
        time.sleep(rng.uniform(0.0, 0.12))
    else:
        while not (line := zygote.stdout.readline().strip()).startswith("held"):
            assert not line.startswith("reaped"), (
                f"the child died before its writer was held: {lines}"
            )
            lines.append(line)
    os.kill(pid, signal.SIGKILL)
    while not (line := zygote.stdout.readline().strip()).startswith("reaped"):
        lines.append(line)
    assert line == f"reaped {int(signal.SIGKILL)}"
    return lines


def check_latest(directory: Path, called: int, last_step: int) -> int:
    ckpt = Checkpointer(directory)
    with warnings.catch_warnings():
        # Orphans may be left behind, never a committed checkpoint that fails to verify.
        warnings.simplefilter("error", CheckpointFallbackWarning)
        state = ckpt.load_latest()
    assert state is not None and ckpt.loaded is not None
    step = state["step"]
    assert ckpt.loaded.step == step >= last_step
    assert torch.equal(state["w"], torch.full((512, 512), float(step)))
    assert ckpt.loaded.state_digest == state_digest(state)
    # Lost work: at most one interval (one step here: the save of the last step called may not
    # have started) plus the save in flight.
    assert step >= called - 2, (step, called)
    return int(step)


@pytest.mark.slow
def test_two_hundred_sigkills_never_leave_a_torn_latest(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt ü $(x)"
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    zygote = subprocess.Popen(
        [sys.executable, str(ZYGOTE), str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert zygote.stdin is not None and zygote.stdout is not None
    try:
        assert zygote.stdout.readline().strip() == "ready"
        last_step, interrupted, held = 0, 0, 0
        for kill in range(KILLS):
            stage = STAGES[kill // 4 % 4] if kill % 4 == 0 else "-"
            lines = kill_one(zygote, rng, stage)
            held += stage != "-"
            called = max([int(x.split()[1]) for x in lines if x.startswith("step")], default=0)
            interrupted += leftovers(directory)
            last_step = check_latest(directory, called, last_step)
        print(f"{interrupted} of {KILLS} kills left a save half done; last step {last_step}")
        assert held == KILLS // 4 and interrupted >= 30
        assert last_step > KILLS / 4  # children made progress between kills (less under load)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=60)

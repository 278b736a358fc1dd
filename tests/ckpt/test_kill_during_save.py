"""50 kill -9s at random moments during save never leave the directory without a valid
checkpoint."""

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

KILLS = 50
ZYGOTE = Path(__file__).with_name("_saver_zygote.py")


def evidence_of_an_interrupted_save(directory: Path) -> bool:
    """A temp file, or a data file no record points to, is what a kill mid-save leaves."""
    referenced = {os.path.basename(i.path) for i in _store.list_committed(str(directory))}
    return any(
        name.startswith(TEMP_PREFIX) or (name.endswith((".pt", ".rgt")) and name not in referenced)
        for name in os.listdir(directory)
    )


@pytest.mark.slow
def test_fifty_random_kills_during_save(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt dir"
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
        last_step, interrupted = 0, 0
        for _ in range(KILLS):
            zygote.stdin.write("go\n")
            zygote.stdin.flush()
            pid = int(zygote.stdout.readline())
            time.sleep(rng.uniform(0.0, 0.15))
            os.kill(pid, signal.SIGKILL)
            assert zygote.stdout.readline().strip() == f"reaped {int(signal.SIGKILL)}"
            ckpt = Checkpointer(directory, keep_last=2)
            interrupted += evidence_of_an_interrupted_save(directory)
            with warnings.catch_warnings():
                # A kill can leave orphans but never a committed checkpoint that fails to verify.
                warnings.simplefilter("error", CheckpointFallbackWarning)
                state = ckpt.load_latest()
            assert state is not None and ckpt.loaded is not None
            step = state["step"]
            assert ckpt.loaded.step == step >= last_step
            assert torch.equal(state["w"], torch.full((512, 512), float(step)))
            assert torch.equal(state["b"], torch.arange(64) + step)
            assert ckpt.loaded.state_digest == state_digest(state)
            last_step = step
        # The kills really landed inside saves, not only between them.
        print(f"{interrupted} of {KILLS} kills interrupted a save; last step {last_step}")
        assert interrupted >= 5, f"only {interrupted} of {KILLS} kills interrupted a save"
        assert last_step > KILLS / 4  # and the children made progress (less under load)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30)

"""Checkpoints in a multi-process run: only global rank 0 writes, every rank loads.

Two real processes train the same loop into one directory with the environment torchrun (or a
multi-task srun) gives them. Without the rank check both would write a data file and race over
each step's record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.ckpt import Checkpointer
from rgt.ckpt._ranks import rank_from_env

SCRIPT = """
import json, os, sys, time, torch
from rgt.ckpt import Checkpointer
ckpt = Checkpointer(sys.argv[1], keep_last=2, asynchronous=True, every_steps=2)
torch.manual_seed(0)
w = torch.zeros(1000)
saved = []
for step in range(1, 9):
    w += 1
    if ckpt.due(step):
        saved.append(ckpt.save({"w": w, "step": step}, step).bytes)
ckpt.wait()
barrier = sys.argv[1] + ".done"  # what a collective barrier would do in a real DDP run
if ckpt.writes:
    open(barrier, "w").close()
while not os.path.exists(barrier):
    time.sleep(0.05)
state = ckpt.load_latest()
print(json.dumps({"rank": ckpt.rank, "saved": saved, "loaded": state["step"]}))
"""


def run_ranks(directory: Path, env_of: list[dict[str, str]]) -> list[dict[str, object]]:
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(directory)],
            env={**base, **extra},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for extra in env_of
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        reports.append(json.loads(out))
    return reports


@pytest.mark.parametrize(
    "launcher",
    [
        pytest.param([{"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r)} for r in (0, 1)],
                     id="torchrun"),
        pytest.param([{"SLURM_PROCID": str(r), "SLURM_NTASKS": "2"} for r in (0, 1)],
                     id="srun"),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_only_rank_zero_writes_and_every_rank_loads(
    tmp_path: Path, launcher: list[dict[str, str]]
) -> None:
    directory = tmp_path / "ckpt 'q' ü $(touch PWNED)"
    zero, one = run_ranks(directory, launcher)
    assert (zero["rank"], one["rank"]) == (0, 1)
    assert len(zero["saved"]) == 4 and all(zero["saved"])  # type: ignore[arg-type]
    assert one["saved"] == [0, 0, 0, 0]  # no-op saves (nothing staged), same cadence
    assert zero["loaded"] == one["loaded"] == 8
    records = sorted(p.name for p in directory.glob("*.json"))
    data = sorted(directory.glob("ckpt-*.rgt"))
    assert len(records) == len(data) == 2  # keep_last=2, and nothing written twice
    assert not [p for p in directory.iterdir() if p.name.startswith(".tmp-")]
    assert not (directory / "rank-1").exists()  # no RNG or gradients of its own in this state
    assert Checkpointer(directory).latest_info() is not None
    assert not (tmp_path / "PWNED").exists()


def test_rank_comes_from_the_launchers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    assert rank_from_env() == 0
    monkeypatch.setenv("RANK", "3")
    assert rank_from_env() == 0  # RANK without a world size: not a multi-process run
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert rank_from_env() == 0
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert rank_from_env() == 3
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    assert rank_from_env() == 3  # torchrun's RANK wins inside an srun allocation
    monkeypatch.delenv("RANK")
    assert rank_from_env() == 1
    assert Checkpointer("unused", rank=0).writes and not Checkpointer("unused").writes

"""A launched job that hangs: the agent names the rank that holds the others up.

Real torchrun (torch 2.13.0 CPU), two gloo ranks, under the real agent zipapp, with py-spy
from the test extra. Rank 1 stops inside step 3 (a ``time.sleep``, as a stuck data read or a
slow filesystem would); rank 0 goes on to step 4's ``all_reduce`` and waits there for it. With
the hang threshold set to seconds, the agent's ``ranks_hung`` event must say that rank 1 is
outside any collective, at its own line of train.py, and that rank 0 waits in ``all_reduce``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rgt import _fs
from rgt.agent._hang import NO_PY_SPY, diagnose, position, verdict

HANGING_JOB = """
    import os, time
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for step in range(8):
        value = torch.ones(1)
        dist.all_reduce(value)
        print("rank %d step %d" % (rank, step), flush=True)
        if rank == 1 and step == 3:
            time.sleep(600)  # the stuck rank: rank 0 waits for it in the next all_reduce
    dist.destroy_process_group()
"""
STACKS = Path(__file__).parent / "stacks"
PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))


def _hung(job: Any, timeout: float) -> dict[str, Any]:
    """The first ranks_hung event that found a rank waiting for another."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in job.events("ranks_hung"):
            if event["detail"].get("stuck"):
                return dict(event)
        time.sleep(0.2)
    raise AssertionError(f"no ranks_hung naming a rank: {job.events()}\n{job.agent_log()}")


@pytest.mark.slow
@pytest.mark.skipif(not os.access(PY_SPY, os.X_OK), reason="py-spy (test extra) not installed")
def test_a_hang_names_the_rank_outside_the_collective(make_job) -> None:
    job = make_job().write(HANGING_JOB)
    spec = json.loads(Path(job.paths.spec).read_text())
    spec["command"] = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    spec["command"] += ["--nproc_per_node=2", "train.py"]
    _fs.atomic_write_json(job.paths.spec, spec)
    job.start(OMP_NUM_THREADS="1", RGT_WATCH_HANG_S="4")
    try:
        event = _hung(job, timeout=120)
    finally:
        job.agent_cmd("cancel")
        job.finish(timeout=90)

    detail = event["detail"]
    assert (detail["stuck"], detail["in_collective"]) == ([1], [0]), detail
    assert detail["positions"]["0"]["collective"] == "all_reduce", detail
    assert "train.py:12" in detail["positions"]["1"]["code"], detail
    assert "rank 1 at <module> (train.py:12)" in event["next"], event["next"]
    assert "wait in (all_reduce)" in event["next"], event["next"]
    stacks = json.loads((job.dir / detail["stacks"]).read_text())
    assert sorted(stacks) == ["0", "1"]
    assert job.status()["state"] == "cancelled"


def _recorded(name: str) -> dict[int, dict[str, Any]]:
    """py-spy 0.4.3 ``dump --json`` of both ranks, recorded by the agent (stacks.json) from
    torchrun 2.13 gloo jobs; paths shortened to /opt/venv and /data."""
    stacks = json.loads((STACKS / f"torchrun-2.13-gloo-{name}.json").read_text())
    return {int(rank): dict(position(threads), pid=0) for rank, threads in stacks.items()}


def test_the_rank_outside_the_collective_is_the_stuck_one() -> None:
    places = _recorded("hang-stacks")
    assert places[0]["collective"] == "all_reduce" and places[1]["collective"] is None
    assert places[1]["code"] == "<module> (train.py:13)"
    detail, next_step = verdict(places, "py-spy")
    assert (detail["stuck"], detail["in_collective"]) == ([1], [0])
    assert next_step.startswith("rank 1 at <module> (train.py:13): it never reached")


def test_ranks_still_importing_torch_wait_in_no_collective() -> None:
    # Rank 0 was inside a torch.distributed module body (an import), not a collective: a
    # slow start must not name a stuck rank.
    places = _recorded("import-phase-stacks")
    assert [places[r]["collective"] for r in (0, 1)] == [None, None]
    detail, next_step = verdict(places, "py-spy")
    assert detail["stuck"] == [] and next_step.startswith("no rank is inside a torch.distrib")


@pytest.fixture
def a_rank(tmp_path: Path) -> Any:
    """A child of this test process that a launcher would have started: RANK=0 in its env."""
    code = "import time\ndef step():\n    time.sleep(60)\nstep()\n"
    (tmp_path / "rank.py").write_text(code)
    env = dict(os.environ, RANK="0")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "rank.py")], env=env)
    time.sleep(0.5)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.skipif(not os.access(PY_SPY, os.X_OK), reason="py-spy (test extra) not installed")
def test_the_dump_reads_a_live_rank(a_rank: Any, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RGT_PY_SPY", PY_SPY)
    detail, next_step = diagnose(os.getpid(), str(tmp_path / "attempt-1"))
    assert detail["ranks"] == [0] and detail["positions"]["0"]["pid"] == a_rank.pid
    assert detail["positions"]["0"]["code"] == "step (rank.py:3)", detail
    assert (tmp_path / "attempt-1" / "stacks.json").exists()
    assert next_step.startswith("no rank is inside a torch.distributed call"), next_step


def test_without_py_spy_the_event_says_so(a_rank: Any, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RGT_PY_SPY", "")
    detail, next_step = diagnose(os.getpid(), str(tmp_path))
    assert detail == {"ranks": [0], "py_spy": None, "dumped": False}
    assert next_step == NO_PY_SPY and "pip install py-spy" in next_step


def test_with_no_rank_in_a_collective_the_odd_one_out_is_named() -> None:
    # NCCL: all_reduce returns at once and a rank waiting for its peer blocks at loss.item();
    # the rank whose line differs from the majority's is the one to look at.
    synced = {"collective": None, "at": "item (train.py:30)", "code": "<module> (train.py:30)"}
    loading = {"collective": None, "at": "read (data.py:7)", "code": "load (data.py:7)"}
    places = {0: dict(synced), 1: dict(synced), 2: dict(loading), 3: dict(synced)}
    detail, next_step = verdict(places, "py-spy")
    assert (detail["stuck"], detail["odd_ones_out"]) == ([], [2])
    assert "rank 2 at load (data.py:7), not where the others are" in next_step
    two = {0: dict(synced), 1: dict(loading)}  # two ranks: no majority to go by
    assert verdict(two, "py-spy")[0]["odd_ones_out"] == []

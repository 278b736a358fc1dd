"""One rank of a torchrun group killed from outside: the agent names it and resumes the group.

Real torchrun (torch 2.13.0 CPU), two gloo ranks, under the real agent zipapp. Rank 0 commits
a checkpoint; rank 1 is then SIGKILLed, as a spot reclaim or a user's ``kill -9`` would. The
cgroup OOM counter does not move, so the attempt is ``preempted`` (retryable) with the first
failing rank as evidence, never ``host_oom``; the second attempt resumes from the checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from rgt import _fs

DDP_JOB = """
    import os, time
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ckpt = os.path.join(os.environ["RGT_CKPT_DIR"], "step.txt")
    out = os.environ["RGT_OUTPUT_DIR"]
    start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
    if start and rank == 0:
        open(os.path.join(out, "resumed-from"), "w").write(str(start))
    for step in range(start, 40):
        value = torch.ones(1)
        dist.all_reduce(value)  # every step is a collective: a dead peer stops the group
        if rank == 0 and step == 5:
            with open(ckpt + ".tmp", "w") as handle:
                handle.write("5")
            os.replace(ckpt + ".tmp", ckpt)
        if rank == 1 and step == 6 and not start:
            open(os.path.join(out, "rank1-pid"), "w").write(str(os.getpid()))
        time.sleep(0.05 if start else 0.5)
    dist.destroy_process_group()
"""


@pytest.mark.slow
def test_a_rank_killed_from_outside_is_preempted_and_the_group_resumes(make_job) -> None:
    job = make_job().write(DDP_JOB)
    spec = json.loads(Path(job.paths.spec).read_text())
    spec["command"] = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    spec["command"] += ["--nproc_per_node=2", "train.py"]
    _fs.atomic_write_json(job.paths.spec, spec)
    job.start(OMP_NUM_THREADS="1")
    pid = int(job.wait_file("outputs/rank1-pid", timeout=120).read_text())
    os.kill(pid, signal.SIGKILL)
    assert job.finish() == 0, job.agent_log()

    status = job.status()
    assert status["state"] == "succeeded" and status["attempt"] == 2
    assert (job.dir / "outputs" / "resumed-from").read_text() == "5"
    detail = job.events("attempt_ended")[0]["detail"]
    assert (detail["label"], detail["retryable"]) == ("preempted", True), detail
    assert any("first failing rank 1" in line for line in detail["evidence"]), detail

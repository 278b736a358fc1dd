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
import time
from pathlib import Path

import pytest

from rgt import _fs
from tests.agent.conftest import process_gone
from tests.cgroups import memory_cgroup, remove_cgroup
from tests.sshd import free_port

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
        print("rank %d step %d" % (rank, step), flush=True)
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
    # Two torchrun attempts, four torch imports: 30-45 s on CI's two cores, more on a loaded one.
    assert job.finish(timeout=180) == 0, job.agent_log()

    status = job.status()
    assert status["state"] == "succeeded" and status["attempt"] == 2
    assert (job.dir / "outputs" / "resumed-from").read_text() == "5"
    detail = job.events("attempt_ended")[0]["detail"]
    assert (detail["label"], detail["retryable"]) == ("preempted", True), detail
    assert detail["evidence"][0].startswith("torchrun: first failing rank 1, pid "), detail
    assert detail["evidence"][0].endswith("killed by SIGKILL"), detail
    assert detail["evidence"][1].startswith(("cgroup oom_kill unchanged", "no cgroup")), detail
    first = detail["ranks"][0]
    assert (first["rank"], first["pid"], first["signal"], first["first"]) == (
        1,
        pid,
        "SIGKILL",
        True,
    )
    ranks = json.loads((job.dir / "logs" / "attempt-1" / "ranks.json").read_text())
    assert ranks["ranks"][0]["rank"] == 1 and ranks["launcher"] == "torchrun"
    assert "rank 1 step 5" in (job.dir / "logs" / "attempt-1" / "rank-1.log").read_text()


RESUME_FORM_JOB = """
    import os, sys, time
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    start = int(open(sys.argv[2]).read()) if sys.argv[1:2] == ["--resume"] else 0
    open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "start-%d" % rank), "w").write(str(start))
    for step in range(start, 30):
        value = torch.ones(1)
        dist.all_reduce(value)
        print("rank %d step %d" % (rank, step), flush=True)
        if rank == 0 and step == 4:
            os.makedirs("out", exist_ok=True)
            open("out/step.txt.tmp", "w").write("5")
            os.replace("out/step.txt.tmp", "out/step.txt")
        if rank == 1 and step == 6 and not start:
            open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "rank1-pid"), "w").write(
                str(os.getpid())
            )
        time.sleep(0.05 if start else 0.5)
    dist.destroy_process_group()
"""


@pytest.mark.slow
def test_the_whole_group_restarts_with_the_resume_form(make_job) -> None:
    """Item 2: a retryable rank failure reruns the launcher with the same command plus the
    resume form, so every rank starts from the checkpoint."""
    resume = {"with": "--resume {ckpt}", "ckpt": "out/step.txt"}
    job = make_job().write(RESUME_FORM_JOB, resume=resume)
    spec = json.loads(Path(job.paths.spec).read_text())
    spec["command"] = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    spec["command"] += ["--nproc_per_node=2", "train.py"]
    _fs.atomic_write_json(job.paths.spec, spec)
    job.start(OMP_NUM_THREADS="1")
    pid = int(job.wait_file("outputs/rank1-pid", timeout=120).read_text())
    os.kill(pid, signal.SIGKILL)
    # Two torchrun attempts, four torch imports: 30-45 s on CI's two cores, more on a loaded one.
    assert job.finish(timeout=180) == 0, job.agent_log()

    assert job.status()["attempt"] == 2
    resuming = job.events("resuming")[-1]["detail"]
    assert resuming["command"][:-2] == spec["command"], resuming
    assert resuming["command"][-2] == "--resume" and resuming["form"] == "resume_with"
    outputs = job.dir / "outputs"
    assert [(outputs / f"start-{r}").read_text() for r in (0, 1)] == ["5", "5"]
    assert job.events("attempt_started")[-1]["detail"]["launcher"] == "torchrun"


LONG_JOB = """
    import os, time
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = os.environ["RGT_OUTPUT_DIR"]
    attempt = os.environ["RGT_ATTEMPT"]
    open(os.path.join(out, "rank%d-attempt%s-pid" % (rank, attempt)), "w").write(str(os.getpid()))
    for step in range(20 if attempt == "1" else 3):
        value = torch.ones(1)
        dist.all_reduce(value)
        time.sleep(0.5)
    dist.destroy_process_group()
"""


@pytest.mark.slow
def test_ranks_orphaned_by_a_killed_launcher_do_not_run_beside_the_next_attempt(make_job) -> None:
    """torchrun starts each rank in its own session: ``kill -9`` of torchrun itself leaves
    them running (checked by hand: both ranks went on with their all_reduce loop). The agent
    kills every rank it saw before it starts the next attempt."""
    job = make_job().write(LONG_JOB)
    spec = json.loads(Path(job.paths.spec).read_text())
    spec["command"] = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    spec["command"] += ["--nproc_per_node=2", "train.py"]
    _fs.atomic_write_json(job.paths.spec, spec)
    job.start(OMP_NUM_THREADS="1")
    ranks = [int(job.wait_file(f"outputs/rank{r}-attempt1-pid", 120).read_text()) for r in (0, 1)]
    time.sleep(1)  # the agent notes the ranks at its heartbeat
    os.kill(job.trainer_pid(), signal.SIGKILL)
    assert job.finish(timeout=120) == 0, job.agent_log()

    ended = job.events("attempt_ended")[0]["detail"]
    assert ended["label"] == "preempted" and ended["orphaned_ranks_killed"] == sorted(ranks)
    assert all(process_gone(pid) for pid in ranks)
    assert job.status()["attempt"] == 2


@pytest.mark.slow
@pytest.mark.early  # accelerate's import, twice per attempt
def test_accelerate_launch_a_killed_rank_is_named_and_the_group_resumes(make_job) -> None:
    """accelerate 1.16 runs torchrun in-process: the same summary, the same verdict. Its own
    ``--tee`` default hides rgt's ``PET_TEE``, so the command passes ``--tee 3`` for rank logs."""
    accelerate = Path(sys.executable).with_name("accelerate")
    job = make_job().write(DDP_JOB)
    spec = json.loads(Path(job.paths.spec).read_text())
    spec["command"] = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2"]
    spec["command"] += ["--num_machines", "1", "--mixed_precision", "no"]
    spec["command"] += ["--main_process_port", str(free_port())]  # not 29500, which others use
    spec["command"] += ["--dynamo_backend", "no", "--tee", "3", "train.py"]
    _fs.atomic_write_json(job.paths.spec, spec)
    job.start(OMP_NUM_THREADS="1")
    pid = int(job.wait_file("outputs/rank1-pid", timeout=120).read_text())
    os.kill(pid, signal.SIGKILL)
    assert job.finish(timeout=120) == 0, job.agent_log()

    assert job.status()["attempt"] == 2
    assert (job.dir / "outputs" / "resumed-from").read_text() == "5"
    detail = job.events("attempt_ended")[0]["detail"]
    assert (detail["label"], detail["retryable"]) == ("preempted", True), detail
    assert detail["evidence"][0] == f"torchrun: first failing rank 1, pid {pid}, killed by SIGKILL"
    assert job.events("attempt_started")[0]["detail"]["launcher"] == "accelerate"
    assert "rank 1 step 5" in (job.dir / "logs" / "attempt-1" / "rank-1.log").read_text()


OOM_JOB = """
    import os, time
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for step in range(1000):
        value = torch.ones(1)
        dist.all_reduce(value)
        if rank == 1 and step == 3:
            # Rank 1 joins a small memory cgroup of its own and outgrows it: the kernel's
            # OOM killer takes it, as it takes a rank that outgrows a rented box's RAM.
            open(os.environ["OOM_CGROUP_PROCS"], "w").write(str(os.getpid()))
            blocks = []
            while True:
                blocks.append(bytearray(32 << 20))
        time.sleep(0.2)
"""


@pytest.mark.slow
def test_a_rank_the_oom_killer_took_is_host_oom_with_evidence(make_job, tmp_path: Path) -> None:
    cgroup = memory_cgroup(tmp_path, 256 << 20)
    try:
        job = make_job().write(OOM_JOB)
        spec = json.loads(Path(job.paths.spec).read_text())
        spec["command"] = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        spec["command"] += ["--nproc_per_node=2", "train.py"]
        _fs.atomic_write_json(job.paths.spec, spec)
        job.start(OMP_NUM_THREADS="1", OOM_CGROUP_PROCS=str(cgroup / "cgroup.procs"))
        assert job.finish(timeout=180) == 1, job.agent_log()
    finally:
        remove_cgroup(cgroup)
    detail = job.events("attempt_ended")[0]["detail"]
    assert (detail["label"], detail["retryable"]) == ("host_oom", False), detail
    assert job.status()["attempt"] == 1
    evidence = " ".join(detail["evidence"])
    # The rank's own cgroup counted the kill; the agent's (its parent) counts it too on
    # cgroup v2, and the kernel log names the pid where it can be read.
    assert "oom_kill rose" in evidence or "Killed process" in evidence, detail
    assert detail["ranks"][0]["rank"] == 1 and detail["ranks"][0]["signal"] == "SIGKILL"

"""A worker killed on node 1 of a two-node Slurm job: the group restarts and resumes exactly.

`rgt run cluster --nodes 2 -- sh -c 'torchrun …'`: 2 nodes x 2 gloo ranks train a model whose
every step is an all-reduce, in integers (so a step's result is exact, whatever the order of
the reduction). Rank 0 commits the state every ``EVERY`` steps (written aside, then renamed
into ``RGT_CKPT_DIR``: the shared filesystem). At step ``VICTIM_AT`` rank 3, on node 1, writes
its pid and waits; the test SIGKILLs it from outside. torchrun on node 1 fails,
``--kill-on-bad-exit`` makes srun stop node 0, the agent reads each node's own log (node 1: a
rank killed by SIGKILL nobody in the job sent: ``preempted``, retryable) and runs srun again;
every rank resumes from the committed step, and the per-step history and final weights equal
those of an uninterrupted run (computed here). `rgt pull` verifies the artifacts and the
machine's gate counts the job as pulled and verified.

A whole node lost: node 1 loses power mid-run (every process on it SIGKILLed, its slurmd too),
the controller marks it DOWN (``scontrol update State=DOWN``: what it does itself once
``SlurmdTimeout`` passes without an answer), Slurm ends the allocation and requeues the batch
job (``--requeue``), the agent records the interruption as a preemption; the node boots again
(its slurmd registers), and the agent's next run on the new allocation resumes from the
committed step. (Marking a node DOWN while its slurmd and the step's processes live on is not
a lost node: ``ReturnToService=2`` returns it within a second, and the requeued job, started at
once, met the old incarnation's terminate there; see ``SlurmNodes.power_on``.)
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.clirun import ok, rgt
from tests.slurm_multinode.conftest import Cluster, wait_ended

STEPS, EVERY, VICTIM_AT = 30, 5, 12
MOD = 1_000_003
TRAIN = f"""
import json, os, time
import torch, torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
ckpt = os.path.join(os.environ["RGT_CKPT_DIR"], "state.json")
out = os.environ["RGT_OUTPUT_DIR"]
state = json.load(open(ckpt)) if os.path.exists(ckpt) else {{"step": 0, "w": 7, "history": []}}
start = state["step"]
if rank == 0:
    print("attempt", os.environ["RGT_ATTEMPT"], "resumes from step", start, flush=True)
for step in range(start, {STEPS}):
    grad = torch.tensor([(state["w"] % 97) * (rank + 1) + step], dtype=torch.int64)
    dist.all_reduce(grad)
    state["w"] = (state["w"] * 3 + int(grad.item())) % {MOD}
    state["history"].append(state["w"])
    state["step"] = step + 1
    if rank == 0 and state["step"] % {EVERY} == 0:
        with open(ckpt + ".tmp", "w") as handle:
            json.dump(state, handle)
        os.replace(ckpt + ".tmp", ckpt)  # the commit point
    if rank == 3 and step == {VICTIM_AT} and os.environ["RGT_ATTEMPT"] == "1":
        open(os.path.join(out, "victim"), "w").write(json.dumps([os.getpid(), os.uname()[1]]))
        time.sleep(120)  # the test kills it here; the others wait in the next all-reduce
    time.sleep(0.1)
if rank == 0:
    final = dict(state, world=world, resumed_from=start)
    json.dump(final, open(os.path.join(out, "final.json"), "w"))
dist.destroy_process_group()
"""
TORCHRUN = (
    'torchrun --nnodes "$RGT_NNODES" --node_rank "$RGT_NODE_RANK" '
    '--rdzv_endpoint "$RGT_MASTER_ADDR:$RGT_MASTER_PORT" --nproc_per_node 2 train.py'
)


def uninterrupted() -> list[int]:
    """The history of a run that nobody killed: the same integer steps, in this process."""
    w, history = 7, []
    for step in range(STEPS):
        grad = sum((w % 97) * (rank + 1) + step for rank in range(4))
        w = (w * 3 + grad) % MOD
        history.append(w)
    return history


def launch(cluster: Cluster) -> tuple[str, Path, int]:
    """The job started and held at VICTIM_AT: (job id, job dir, the committed step)."""
    (cluster.project / "train.py").write_text(TRAIN)
    launched = ok(rgt("run", "cluster", "--nodes", "2", "--probe-seconds", "1", "--json",
                      "--retries", "3", "--env", "OMP_NUM_THREADS=1",
                      "--", "sh", "-c", TORCHRUN, cwd=cluster.project))  # fmt: skip
    job_id = str(launched["job_id"])
    job_dir = cluster.job_dir(job_id)
    wait_for(job_dir / "outputs" / "victim", 240)
    committed = json.loads((job_dir / "ckpt" / "state.json").read_text())["step"]
    assert committed == 10  # the last multiple of EVERY before VICTIM_AT
    return job_id, job_dir, committed


def resumed_exactly(job_dir: Path, committed: int) -> dict[str, object]:
    final = json.loads((job_dir / "outputs" / "final.json").read_text())
    assert (final["resumed_from"], final["world"], final["step"]) == (committed, 4, STEPS)
    assert final["history"] == uninterrupted()  # every step once, each as if never killed
    return dict(final)


def wait_for(path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.2)
    return path.read_text()


@pytest.mark.slow
@pytest.mark.early  # about two minutes: two attempts of a two-node job
def test_a_worker_killed_on_node_1_restarts_the_group_from_the_committed_step(
    cluster: Cluster, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    job_id, job_dir, committed = launch(cluster)
    pid, host = json.loads((job_dir / "outputs" / "victim").read_text())
    assert host == cluster.nodes.names[1]  # rank 3 runs on node 1
    os.kill(pid, signal.SIGKILL)  # from outside the job: root, in the root pid namespace
    job = wait_ended(job_id, 400)
    assert job["state"] == "succeeded", (job, rgt("logs", job_id).stdout[-4000:])
    final = resumed_exactly(job_dir, committed)
    ended = [e["detail"] for e in cluster.events(job_id) if e["kind"] == "attempt_ended"]
    first = ended[0]
    assert (first["label"], first["retryable"]) == ("preempted", True), first
    assert first["evidence"][0].startswith(f"node 1 ({host}) of 2"), first["evidence"]
    assert any("not visible to the agent on node 0" in line for line in first["evidence"])
    assert len(ended) == 2 and ended[1]["label"] is None
    attempt2 = (job_dir / "logs" / "attempt-2.log").read_text()
    assert "attempt 2 resumes from step 10" in attempt2
    for attempt in (1, 2):  # each attempt kept each node's log
        for rank in (0, 1):
            assert (job_dir / "logs" / f"attempt-{attempt}" / f"node-{rank}.log").exists()

    pulled = rgt("pull", job_id, "--to", str(tmp_path / "pulled"), "--json")
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    report = json.loads(pulled.stdout)
    paths = sorted(f["path"] for f in report["verify"]["files"])
    assert report["ok"] is True and {"ckpt/state.json", "outputs/final.json"} <= set(paths)
    gate = rgt("down", "cluster", "--json", "--check")
    refused = json.loads(gate.stdout)  # only a human's approval is missing
    assert gate.returncode == 3 and refused["error"] == "GateRefused", refused
    assert refused["fix"] == (
        "everything is pulled and verified; a human must run `rgt approve cluster`"
    )
    print(json.dumps(first, indent=1), paths, final["resumed_from"], job.get("attempt"))


@pytest.mark.slow
@pytest.mark.early  # about three minutes: a requeue of a two-node job
def test_a_node_lost_whole_requeues_the_job_and_it_resumes(cluster: Cluster) -> None:
    pytest.importorskip("torch")
    job_id, job_dir, committed = launch(cluster)
    slurm_id = json.loads((job_dir / "slurm.json").read_text())["slurm_job_id"]
    lost = cluster.nodes.names[1]
    try:
        assert cluster.nodes.power_off(1) >= 3  # its slurmd, the step's slurmstepd, torchrun …
        cluster.nodes.run("scontrol", "update", f"NodeName={lost}", "State=DOWN",
                          "Reason=rgt-test-node-lost")  # fmt: skip
        requeued = cluster.nodes.wait(
            slurm_id, lambda j: j.restarts >= 1 and j.state == "PENDING", 180
        )
    finally:
        cluster.nodes.power_on(1)  # it boots and is back in service (ReturnToService=2)
    assert requeued.restarts == 1, requeued
    cluster.nodes.release(slurm_id)
    job = wait_ended(job_id, 400)
    assert job["state"] == "succeeded", (job, rgt("logs", job_id).stdout[-4000:])
    resumed_exactly(job_dir, committed)
    ended = [e["detail"] for e in cluster.events(job_id) if e["kind"] == "attempt_ended"]
    assert ended[0]["label"] == "preempted" and ended[0]["retryable"], ended[0]
    said = (job_dir / "logs" / "slurm.out").read_text()
    assert f"rgt: slurm job {slurm_id} restart 1" in said
    print(json.dumps(ended[0], indent=1), requeued)

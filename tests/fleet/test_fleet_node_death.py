"""A node's death restarts the group: a 2-node x 2-process gloo torchrun through `rgt run a,b`;
every step is an all-reduce, each node's local rank 0 commits the step to its own
RGT_CKPT_DIR, and a worker on node 1 is SIGKILLed from outside. Node 1's agent calls that
``preempted``; node 0's ranks see only their peer vanish (gloo "Connection closed by peer"),
which on a fleet node is the group's restart, not a bug. Both nodes start attempt 2, the
ranks agree (MIN all-reduce) on the newest step every node committed and resume from it, and
the job succeeds on both."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from tests.clirun import rgt
from tests.fleet.conftest import Fleet, wait_ended

TRAIN = """
import os, time
import torch, torch.distributed as dist

dist.init_process_group("gloo")
rank, local = dist.get_rank(), int(os.environ["LOCAL_RANK"])
ckpt = os.path.join(os.environ["RGT_CKPT_DIR"], "step.txt")
out = os.environ["RGT_OUTPUT_DIR"]
mine = torch.tensor([int(open(ckpt).read()) if os.path.exists(ckpt) else 0])
dist.all_reduce(mine, op=dist.ReduceOp.MIN)  # the newest step every node committed
start = int(mine.item())
if start and local == 0:
    open(os.path.join(out, "resumed-from"), "w").write(str(start))
for step in range(start, 30):
    value = torch.ones(1)
    dist.all_reduce(value)
    assert value.item() == 4.0
    if local == 0 and step == 5:
        open(ckpt + ".tmp", "w").write("5")
        os.replace(ckpt + ".tmp", ckpt)
    if rank == 3 and step == 8 and not start:
        open(os.path.join(out, "victim-pid"), "w").write(str(os.getpid()))
    time.sleep(0.05 if start else 0.4)
if local == 0:
    open(os.path.join(out, "finished"), "w").write(str(dist.get_world_size()))
dist.destroy_process_group()
"""
TORCHRUN = (
    'exec "$PY" -m torch.distributed.run --nnodes "$RGT_NNODES" --nproc_per_node 2 '
    '--node_rank "$RGT_NODE_RANK" --master_addr "$RGT_MASTER_ADDR" '
    '--master_port "$RGT_MASTER_PORT" train.py'
)


def events(fleet: Fleet, node: int, job_id: str) -> list[dict[str, object]]:
    raw = (fleet.roots[node] / ".rgt" / "jobs" / job_id / "events.jsonl").read_text()
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.early  # over a minute
def test_a_killed_worker_on_node_1_restarts_the_group_from_the_common_step(fleet: Fleet) -> None:
    pytest.importorskip("torch")
    (fleet.project / "train.py").write_text(TRAIN)
    launched = rgt("run", "a,b", "--probe-seconds", "1", "--json", "--retries", "4",
                   "--env", f"PY={sys.executable}", "--env", "OMP_NUM_THREADS=1",
                   "--", "sh", "-c", TORCHRUN, cwd=fleet.project)  # fmt: skip
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    job_id = json.loads(launched.stdout)["job_id"]
    victim = fleet.roots[1] / ".rgt" / "jobs" / job_id / "outputs" / "victim-pid"
    deadline = time.monotonic() + 180
    while not victim.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(int(victim.read_text()), signal.SIGKILL)  # a worker on node 1, from outside
    job = wait_ended(job_id, timeout=400)
    logs = [rgt("logs", job_id, "--node", str(r)).stdout[-3000:] for r in (0, 1)]
    assert job["state"] == "succeeded", (job, logs)
    ended = [[e["detail"] for e in events(fleet, n, job_id) if e["kind"] == "attempt_ended"]
             for n in (0, 1)]  # fmt: skip
    first = [node[0] for node in ended]
    assert (first[1]["label"], first[1]["retryable"]) == ("preempted", True), first[1]
    assert first[0]["retryable"] is True, first[0]
    assert first[0]["evidence"][0] == "fleet of 2 nodes: a collective error here is a peer's loss"
    for node in (0, 1):
        work = fleet.roots[node] / ".rgt" / "jobs" / job_id / "outputs"
        assert (work / "resumed-from").read_text() == "5"
        assert (work / "finished").read_text() == "4"
    print(json.dumps(first, indent=1)[:3000])
    print([len(node) for node in ended], [n["attempt"] for n in job["nodes"]])


FAILS_ON_NODE_1 = (
    "import os, sys, time\n"
    "if os.environ['RGT_NODE_RANK'] == '1':\n"
    "    sys.exit('node 1 gives up')\n"
    "time.sleep(600)  # node 0 would wait at its rendezvous for ever\n"
)


def test_a_node_that_failed_for_good_stops_the_rest(fleet: Fleet) -> None:
    (fleet.project / "job.py").write_text(FAILS_ON_NODE_1)
    launched = rgt("run", "a,b", "--probe-seconds", "1", "--json", "--", "python3", "job.py",
                   cwd=fleet.project)  # fmt: skip
    job_id = json.loads(launched.stdout)["job_id"]
    job = wait_ended(job_id, timeout=120)
    assert job["state"] == "failed", job
    node0 = fleet.roots[0] / ".rgt" / "jobs" / job_id / "status.json"
    deadline = time.monotonic() + 60
    while json.loads(node0.read_text())["state"] != "cancelled" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert json.loads(node0.read_text())["state"] == "cancelled"  # not left sleeping
    node1 = fleet.roots[1] / ".rgt" / "jobs" / job_id / "status.json"
    assert json.loads(node1.read_text())["state"] == "failed"

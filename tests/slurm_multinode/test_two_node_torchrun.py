"""`rgt run cluster --nodes 2 -- sh -c 'torchrun …'` on a real two-node Slurm, through the CLI:
the one agent on node 0 starts a torchrun per node with srun; the 2 x 2 gloo ranks form one
group of 4 (an all-reduce of rank + 1 gives 10), ranks 0-1 on node 0's host and 2-3 on node
1's; each node's log is kept and `rgt logs JOB --node R` prints it."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest

from tests.clirun import ok, rgt
from tests.infra import allreduce
from tests.slurm_multinode.conftest import Cluster, wait_ended

# The command of the issue, unchanged: every variable comes from rgt.
TORCHRUN = (
    'torchrun --nnodes "$RGT_NNODES" --node_rank "$RGT_NODE_RANK" '
    '--rdzv_endpoint "$RGT_MASTER_ADDR:$RGT_MASTER_PORT" --nproc_per_node 2 allreduce.py'
)

PREFIX = re.compile(r"^\[rank\d+\]:", re.MULTILINE)  # torchrun's --tee prefix, asked by the agent


def ranks(text: str) -> list[dict[str, Any]]:
    return allreduce.ranks(PREFIX.sub("", text))


@pytest.mark.slow
@pytest.mark.early  # about a minute: two slurmd, srun, two torchruns
def test_two_nodes_two_processes_each_form_one_gloo_group(cluster: Cluster) -> None:
    pytest.importorskip("torch")
    shutil.copy(allreduce.__file__, cluster.project / "allreduce.py")
    launched = ok(rgt("run", "cluster", "--nodes", "2", "--probe-seconds", "1", "--json",
                      "--env", "OMP_NUM_THREADS=1", "--", "sh", "-c", TORCHRUN,
                      cwd=cluster.project))  # fmt: skip
    job_id = str(launched["job_id"])
    job = wait_ended(job_id, 300)
    merged = rgt("logs", job_id).stdout
    assert job["state"] == "succeeded", (job, merged[-3000:], cluster.nodes.logs())
    lines = ranks(merged)  # every node's lines reach the merged log
    assert [line["rank"] for line in lines] == [0, 1, 2, 3], merged[-3000:]
    assert {line["world_size"] for line in lines} == {4}
    assert {line["sum"] for line in lines} == {1.0 + 2 + 3 + 4}
    names = cluster.nodes.names
    assert [line["host"] for line in lines] == [names[0], names[0], names[1], names[1]]
    assert {line["master"] for line in lines} == {names[0]}  # RGT_MASTER_ADDR: node 0
    attempt = cluster.job_dir(job_id) / "logs" / "attempt-1"
    for rank in (0, 1):
        own = ranks((attempt / f"node-{rank}.log").read_text())
        assert [line["rank"] for line in own] == [2 * rank, 2 * rank + 1]
        assert (attempt / f"node-{rank}.exit").read_text().split() == ["0", names[rank]]
        said = rgt("logs", job_id, "--node", str(rank))
        assert said.returncode == 0 and ranks(said.stdout) == own, said.stderr
    bad = rgt("logs", job_id, "--node", "2")
    assert bad.returncode != 0 and "no node 2" in bad.stderr, bad.stderr
    (started,) = [e["detail"] for e in cluster.events(job_id) if e["kind"] == "nodes_started"]
    assert (started["RGT_NNODES"], started["RGT_MASTER_ADDR"]) == ("2", names[0])
    script = (cluster.job_dir(job_id) / "slurm.sbatch").read_text()
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in script
    print(json.dumps(lines), json.dumps(started))

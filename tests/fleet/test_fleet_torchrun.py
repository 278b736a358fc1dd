"""A 2-node x 2-process gloo torchrun through `rgt run a,b` (two real sshd, one node each):
the command uses rgt's rendezvous variables unchanged, all 4 ranks form one group of world
size 4 and all-reduce across the nodes; status, `logs --node` and `pull` cover both nodes."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import rgt
from tests.fleet.conftest import Fleet, wait_ended
from tests.infra import allreduce

TORCHRUN = (
    'exec "$PY" -m torch.distributed.run --nnodes "$RGT_NNODES" --nproc_per_node 2 '
    '--node_rank "$RGT_NODE_RANK" --master_addr "$RGT_MASTER_ADDR" '
    '--master_port "$RGT_MASTER_PORT" worker.py'
)


def ranks(log: str) -> list[dict[str, Any]]:
    """The workers' lines; torchrun under the agent prefixes each with ``[rankN]:``."""
    return allreduce.ranks("\n".join(line.partition("]:")[2] if line.startswith("[rank") else line
                                      for line in log.splitlines()))  # fmt: skip


def all_reduce_on_a_b(project: Path) -> tuple[str, list[str], list[dict[str, Any]]]:
    """`rgt run a,b` of a 2-node x 2-process gloo all-reduce from ``project``: the job id,
    each node's log and the workers' lines, once the job succeeded with 4 ranks summing 10."""
    shutil.copy(allreduce.__file__, project / "worker.py")
    launched = rgt("run", "a,b", "--probe-seconds", "1", "--json", "--env", f"PY={sys.executable}",
                   "--env", "OMP_NUM_THREADS=1", "--", "sh", "-c", TORCHRUN,
                   cwd=project)  # fmt: skip
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    job_id = json.loads(launched.stdout)["job_id"]
    job = wait_ended(job_id, timeout=300)
    logs = [rgt("logs", job_id, "--node", str(rank)).stdout for rank in (0, 1)]
    assert job["state"] == "succeeded", (job, logs)
    lines = ranks("".join(logs))
    assert [line["rank"] for line in lines] == [0, 1, 2, 3], logs
    assert {line["world_size"] for line in lines} == {4}
    assert {line["sum"] for line in lines} == {1.0 + 2 + 3 + 4}
    return job_id, logs, lines


@pytest.mark.slow
@pytest.mark.early  # about a minute
def test_two_nodes_two_processes_all_reduce_through_rgt(fleet: Fleet) -> None:
    pytest.importorskip("torch")
    job_id, logs, lines = all_reduce_on_a_b(fleet.project)
    by_node = [sorted(x["rank"] for x in lines if x["node_rank"] == n) for n in (0, 1)]
    assert by_node == [[0, 1], [2, 3]]  # node 0's log holds ranks 0-1, node 1's 2-3
    for rank, log in enumerate(logs):
        assert {x["node_rank"] for x in ranks(log)} == {rank}
    assert {line["master"] for line in lines} == {"127.0.0.1"}
    pulled = rgt("pull", job_id, "--to", str(fleet.project.parent / "pulled"), "--json")
    assert pulled.returncode == 0, pulled.stdout[-2000:] + pulled.stderr[-2000:]
    print("\n".join(json.dumps(line) for line in lines))
    print(json.loads(pulled.stdout)["verify"].get("nodes"), Path(fleet.project).name)

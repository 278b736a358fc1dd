"""A real two-node Slurm (two slurmd, each in its own network namespace with its own address,
see tests/slurm_nodes.py): a 2-node batch job runs one task on each node, and a 2-node x
2-process gloo torchrun launched by srun forms one group of 4 with node 0 as the rendezvous."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.infra import allreduce
from tests.slurm import free_port
from tests.slurm_nodes import SlurmNodes

ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")

WHERE = """\
#!/bin/sh
srun hostname
srun sh -c 'echo "$SLURM_NODEID $SLURM_JOB_NODELIST $SLURM_NNODES"'
"""

# The rendezvous host is the first host of the job's node list, as a launcher would compute it.
TORCHRUN = """\
#!/bin/sh
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun sh -c 'exec "$0" -m torch.distributed.run --nnodes 2 --nproc_per_node 2 \
  --node_rank "$SLURM_NODEID" --rdzv_endpoint "$1:$2" "$3"' {python} "$first" {port} {worker}
"""


def batch(cluster: SlurmNodes, script: str, tmp_path: Path) -> str:
    """Run ``script`` as `sbatch --nodes 2 --ntasks-per-node 1`; its stdout once it ended (srun's
    own notes, e.g. "step creation temporarily disabled" while a step ends, go to stderr)."""
    (tmp_path / "job.sh").write_text(script)
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    submitted = cluster.run(
        "sbatch", "--parsable", "--nodes", "2", "--ntasks-per-node", "1", "--chdir",
        str(tmp_path), "--output", str(out), "--error", str(err), str(tmp_path / "job.sh"),
    )  # fmt: skip
    job = cluster.wait(submitted.strip().split(";")[0], lambda j: j.state in ENDED, 300)
    text = out.read_text() if out.exists() else ""
    notes = err.read_text() if err.exists() else ""
    assert job.state == "COMPLETED", f"{job}\n{text}\n{notes}\n{cluster.logs()}"
    return text


def test_a_two_node_job_runs_one_task_on_each_node(
    slurm_two_nodes: SlurmNodes, tmp_path: Path
) -> None:
    text = batch(slurm_two_nodes, WHERE, tmp_path).splitlines()
    names = slurm_two_nodes.names
    assert sorted(text[:2]) == names, text  # `srun hostname`: each node's own hostname
    ids = sorted(line.split()[0] for line in text[2:])
    assert ids == ["0", "1"] and {line.split()[2] for line in text[2:]} == {"2"}, text
    nodelist = text[2].split()[1]
    expanded = slurm_two_nodes.run("scontrol", "show", "hostnames", nodelist).split()
    assert expanded == names, (nodelist, expanded)
    print(f"slurm_two_nodes started in {slurm_two_nodes.started_s:.1f} s; job said {text}")


@pytest.mark.slow
def test_gloo_all_reduce_across_two_slurm_nodes(
    slurm_two_nodes: SlurmNodes, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    script = TORCHRUN.format(
        python=shlex.quote(sys.executable),
        port=free_port(),
        worker=shlex.quote(str(Path(allreduce.__file__))),
    )
    text = batch(slurm_two_nodes, script, tmp_path)
    lines = allreduce.ranks(text)
    assert [line["rank"] for line in lines] == [0, 1, 2, 3], text
    assert {line["world_size"] for line in lines} == {4}
    assert {line["sum"] for line in lines} == {1.0 + 2 + 3 + 4}
    hosts = [{x["host"] for x in lines if x["node_rank"] == n} for n in (0, 1)]
    assert hosts == [{name} for name in slurm_two_nodes.names], lines  # 2 ranks per node
    assert {line["master"] for line in lines} == {slurm_two_nodes.names[0]}
    print("\n".join(str(line) for line in lines))

"""A sweep whose cells ask for two nodes: one Slurm job array, each task an allocation of two
nodes (``--nodes=2 --ntasks-per-node=1`` on the array's script), and each cell's command runs
on both nodes with its own ``RGT_NODE_RANK``, writing into the cell's one output dir on the
shared filesystem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgt.backends._render.sbatch import SbatchJob, render_script
from rgt.resources import Resources
from tests.slurm_multinode.conftest import Cluster
from tests.sweep.helpers import rgt_json

WHERE = 'echo "$RGT_NODE_RANK $RGT_NNODES $(hostname)" > "$RGT_OUTPUT_DIR/node-$RGT_NODE_RANK"'
SWEEP = f"""\
name = "two-nodes"
command = ["sh", "-c", {json.dumps(WHERE + " # {lr}")}]
seeds = [0, 1]
machines = ["cluster"]
per_machine = 1
[grid]
lr = [0.1]
[resources]
nodes = 2
"""


def test_an_array_of_two_node_tasks_renders_one_task_per_node() -> None:
    dirs = ("/r/.rgt/jobs/a", "/r/.rgt/jobs/b")
    script = render_script(SbatchJob("rgt-array-a", "python3", "/a.pyz", dirs, Resources(nodes=2)))
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --array=0-1\n" in script


@pytest.mark.slow
@pytest.mark.early  # two array tasks of a two-node allocation each, one after the other
def test_a_sweep_of_two_node_cells_runs_as_one_array(cluster: Cluster, tmp_path: Path) -> None:
    project = tmp_path / "sweep project"
    project.mkdir()
    (project / "sweep.toml").write_text(SWEEP)
    doc = rgt_json("sweep", "run", str(project / "sweep.toml"), "--poll", "0.5")
    assert doc["counts"]["succeeded"] == 2, doc
    launched = doc["run"]["launched"]
    assert len({x["slurm_array"] for x in launched}) == 1 and len(launched) == 2
    names = cluster.nodes.names
    for entry in launched:
        outputs = cluster.job_dir(entry["job_id"]) / "outputs"
        said = [(outputs / f"node-{rank}").read_text().split() for rank in (0, 1)]
        assert said == [["0", "2", names[0]], ["1", "2", names[1]]], said
    script = next((cluster.root / ".rgt" / "slurm").glob("array-*.sbatch")).read_text()
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in script

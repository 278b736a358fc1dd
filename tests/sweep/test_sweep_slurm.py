"""The same sweep as one Slurm job array on the real single-node test cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgt.backends.slurm import register_slurm
from rgt.state.store import Store
from rgt.sweep.sweep import load_sweep
from tests.slurm import SlurmCluster
from tests.sweep.helpers import ledger_counts, rgt_json, sweep_toml, write_project


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    monkeypatch.setenv("RGT_AGENT_HEARTBEAT_S", "0.5")  # jobs inherit the submitter's env
    return slurm_cluster


def test_sweep_is_one_throttled_array(cluster: SlurmCluster, tmp_path: Path) -> None:
    root = tmp_path / "slurm root ü"
    register_slurm(Store.open(), "cluster", root=str(root))
    ledger = tmp_path / "ledger"
    args = ["--sleep", "1", "--ledger", str(ledger)]
    body = sweep_toml(
        "arr",
        ["cluster"],
        lrs=[0.1, 0.2],
        seeds=[0, 1],
        per_machine=2,
        extra_args=args,
        extra="[resources]\ncpus = 1\ntimeout_min = 10",
    )
    path = write_project(tmp_path / "proj 'q'", body)
    cells = {c.cell_id for c in load_sweep(path).cells}

    doc = rgt_json("sweep", "run", str(path), "--poll", "0.5")
    assert doc["counts"]["succeeded"] == 4
    launched = doc["run"]["launched"]
    arrays = {x["slurm_array"] for x in launched}
    assert len(arrays) == 1 and {x["cell_id"] for x in launched} == cells
    array_id = arrays.pop()
    tasks = set()
    for entry in launched:
        record = json.loads((root / ".rgt/jobs" / entry["job_id"] / "slurm.json").read_text())
        tasks.add(record["slurm_job_id"])
        assert record["resources"] == {"cpus": 1, "timeout_min": 10}
    assert tasks == {f"{array_id}_{i}" for i in range(4)}
    script = (root / ".rgt/slurm" / f"array-{launched[0]['job_id']}.sbatch").read_text()
    assert "#SBATCH --array=0-3%2" in script  # per_machine is the array's throttle
    assert cluster.job(f"{array_id}_0").state == "COMPLETED"

    again = rgt_json("sweep", "run", str(path), "--poll", "0.5")
    assert again["run"]["launched"] == []
    assert ledger_counts(ledger) == dict.fromkeys(cells, 1)
    pulled = rgt_json("sweep", "pull", str(path), "--to", str(tmp_path / "pulled"))
    assert pulled["ok"] and [r["action"] for r in pulled["cells"]] == ["pulled"] * 4
    assert rgt_json("sweep", "status", str(path))["counts"]["done"] == 4

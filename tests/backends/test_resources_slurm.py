"""Resources on every run, on the real single-node Slurm of ``tests/slurm.py``, through the CLI.

``rgt up slurm --partition … --mem …`` stores the machine's defaults; ``rgt run cluster --cpus
--time …`` adds the run's own; what Slurm holds (``scontrol show job``) and the rendered
script are read back. What the cluster cannot give (a GPU: this cluster has no GRES; a second
node: its partition has one, and sbatch would queue the job for ever) is refused before anything
is pushed, recorded or submitted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clirun import ok, rgt
from tests.slurm import SlurmCluster

pytestmark = pytest.mark.slow


def scontrol_fields(cluster: SlurmCluster, slurm_id: str) -> dict[str, str]:
    """``scontrol show job -o``'s KEY=VALUE words (the command, last, may hold spaces)."""
    line = cluster.run("scontrol", "show", "job", "-o", slurm_id).split(" Command=")[0]
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    code = tmp_path / "project"
    code.mkdir()
    (code / "job.py").write_text("print('hello from slurm')\n")
    return code


@pytest.fixture
def registered(slurm_cluster: SlurmCluster, tmp_path: Path) -> SlurmCluster:
    root = str(tmp_path / "root")
    defaults = ("--partition", "debug", "--mem", "1", "--time", "9")
    ok(rgt("up", "slurm", "--name", "cluster", "--root", root, *defaults, "--json"))
    return slurm_cluster


def launched(project: Path, *flags: str) -> dict[str, object]:
    argv = ("run", "cluster", *flags, "--probe-seconds", "3", "--json", "--", "python3", "job.py")
    return ok(rgt(*argv, cwd=project))


def test_run_flags_over_machine_defaults_reach_slurm(
    registered: SlurmCluster, project: Path, tmp_path: Path
) -> None:
    doc = launched(project, "--cpus", "2", "--time", "3", "--nodes", "1")
    job_dir = tmp_path / "root" / ".rgt" / "jobs" / str(doc["job_id"])
    record = json.loads((job_dir / "slurm.json").read_text())
    assert record["resources"] == {
        "cpus": 2,
        "mem_gb": 1.0,
        "nodes": 1,
        "partition": "debug",
        "timeout_min": 3,
    }
    script = (job_dir / "slurm.sbatch").read_text()
    for line in ("--cpus-per-task=2", "--mem=1G", "--time=3", "--partition=debug", "--nodes=1"):
        assert f"#SBATCH {line}\n" in script
    fields = scontrol_fields(registered, str(record["slurm_job_id"]))
    assert fields["TimeLimit"] == "00:03:00"  # the run's --time beat the machine's 9
    assert fields["Partition"] == "debug"
    assert fields["NumNodes"] == "1"
    assert fields["CPUs/Task"] == "2"
    assert fields["MinMemoryNode"] == "1G"


def test_account_and_qos_pass_through(
    registered: SlurmCluster, project: Path, tmp_path: Path
) -> None:
    doc = launched(project, "--account", "proj-42", "--qos", "normal")
    job_dir = tmp_path / "root" / ".rgt" / "jobs" / str(doc["job_id"])
    slurm_id = str(json.loads((job_dir / "slurm.json").read_text())["slurm_job_id"])
    assert scontrol_fields(registered, slurm_id)["Account"] == "proj-42"
    # This cluster has no accounting database, so its controller keeps no QOS (it shows
    # "(null)"); the request is in the script Slurm was given.
    assert "#SBATCH --qos=normal\n" in (job_dir / "slurm.sbatch").read_text()


def test_the_machine_defaults_alone_reach_slurm(
    registered: SlurmCluster, project: Path, tmp_path: Path
) -> None:
    doc = launched(project)
    job_dir = tmp_path / "root" / ".rgt" / "jobs" / str(doc["job_id"])
    slurm_id = str(json.loads((job_dir / "slurm.json").read_text())["slurm_job_id"])
    assert scontrol_fields(registered, slurm_id)["TimeLimit"] == "00:09:00"


def test_rgt_toml_resources_apply_and_flags_win(
    registered: SlurmCluster, project: Path, tmp_path: Path
) -> None:
    (project / "rgt.toml").write_text("[resources]\ncpus = 2\ntimeout_min = 4\n")
    doc = launched(project, "--time", "5")
    job_dir = tmp_path / "root" / ".rgt" / "jobs" / str(doc["job_id"])
    fields = scontrol_fields(
        registered, str(json.loads((job_dir / "slurm.json").read_text())["slurm_job_id"])
    )
    assert (fields["CPUs/Task"], fields["TimeLimit"]) == ("2", "00:05:00")


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--gpus", "1"), "this Slurm cluster has no GPU"),
        (("--gpus", "A100:1"), "this Slurm cluster has no GPU"),
        (("--nodes", "2"), "--nodes 2: Slurm partition debug has 1 node(s)"),
        (("--nodes", "0"), "resource nodes=0 (--nodes) is not valid"),
        (("--gpus", "A100:x"), "resource gpus='A100:x' (--gpus) is not valid"),
        (("--mem", "0"), "resource mem_gb=0.0 (--mem) is not valid"),
    ],
)
def test_what_the_cluster_cannot_give_is_refused_before_anything_starts(
    registered: SlurmCluster, project: Path, flags: tuple[str, ...], said: str
) -> None:
    before = registered.run("squeue", "-h", "-o", "%i")
    proc = rgt("run", "cluster", *flags, "--json", "--", "python3", "job.py", cwd=project)
    assert proc.returncode == 2, proc.stderr
    error = json.loads(proc.stdout or proc.stderr)
    assert said in error["message"] and error["fix"]
    assert ok(rgt("status", "--json"))["jobs"] == []  # nothing recorded
    assert registered.run("squeue", "-h", "-o", "%i") == before  # nothing submitted


def test_up_slurm_refuses_zero_nodes_and_shows_the_options(slurm_cluster: SlurmCluster) -> None:
    proc = rgt("up", "slurm", "--name", "c2", "--nodes", "0")
    assert proc.returncode == 2 and "nodes must be a whole number >= 1" in proc.stderr
    assert ok(rgt("status", "--json"))["machines"] == []
    helped = rgt("up", "slurm", "--help").stdout
    for option in ("--gpus", "--cpus", "--mem", "--time", "--partition", "--account", "--qos"):
        assert option in helped

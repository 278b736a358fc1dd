"""Rendering sbatch scripts (golden files), the resource vocabulary, and the status merge
against ``scontrol`` lines recorded on the test cluster (Slurm 22.05.8)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rgt.backends._render.sbatch import SbatchJob, render_script, sbatch_argv, slurm_flags
from rgt.backends._slurm_nodes import check_nodes, partition_nodes
from rgt.backends._slurm_state import merge, parse_scontrol
from rgt.errors import SpecError, UsageError
from rgt.resources import Resources
from tests.conftest import HOSTILE_NAMES

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "slurm"
UPDATE = os.environ.get("RGT_UPDATE_GOLDEN") == "1"

FULL = Resources(
    gpus="A100:2",
    cpus=8,
    mem_gb=32,
    timeout_min=240,
    partition="gpu",
    account="proj-42",
    qos="high",
)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; rerun with RGT_UPDATE_GOLDEN=1 if meant"


def test_single_job_script_matches_golden() -> None:
    job = SbatchJob(
        name="rgt-train-1",
        python="python3",
        agent="/home/me/.rgt/agent/agent-1.pyz",
        job_dirs=("/home/me/.rgt/jobs/train-1",),
        resources=FULL,
        grace_s=120,
    )
    check_golden("single.sbatch", render_script(job))


def test_array_script_matches_golden() -> None:
    dirs = tuple(f"/scratch/my runs/.rgt/jobs/cell-{i}" for i in range(3))
    job = SbatchJob(
        name="rgt-array-cell-0",
        python="/opt/py/bin/python3",
        agent="/scratch/my runs/.rgt/agent/agent-1.pyz",
        job_dirs=dirs,
        resources=Resources(gpus="1", timeout_min=30),
        grace_s=90,
        max_parallel=2,
    )
    check_golden("array.sbatch", render_script(job))


def test_minimal_resources_leave_everything_to_the_cluster_defaults() -> None:
    assert slurm_flags(Resources(), 60) == ["--requeue", "--open-mode=append", "--signal=B:USR1@60"]


@pytest.mark.parametrize(
    ("resources", "flag"),
    [
        (Resources(gpus="2"), "--gres=gpu:2"),
        (Resources(gpus="A100:1"), "--gres=gpu:A100:1"),  # GRES types are case-sensitive
        (Resources(mem_gb=1.5), "--mem=1536M"),
        (Resources(mem_gb=0.001), "--mem=2M"),  # rounded up, never below the request
        (Resources(mem_gb=64), "--mem=64G"),
        (Resources(timeout_min=90), "--time=90"),
        (Resources(partition="gpu,gpu-long"), "--partition=gpu,gpu-long"),
    ],
)
def test_each_generic_resource_becomes_its_slurm_flag(resources: Resources, flag: str) -> None:
    assert flag in slurm_flags(resources, 120)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_job_dirs_reach_bash_as_one_word(tmp_path: Path, name: str) -> None:
    """The rendered assignments, run by bash, give back exactly the paths we put in."""
    dirs = (f"/d/{name}/a", f"/d/{name}/b")
    job = SbatchJob(name="x", python=f"/p/{name}", agent="/a", job_dirs=dirs, resources=Resources())
    script = render_script(job).split('echo "rgt: slurm job')[0]
    probe = script + 'printf "%s\\n" "$python" "${job_dirs[@]}" "$job_dir"\n'
    out = subprocess.run(
        ["bash", "-c", probe],
        env={"SLURM_ARRAY_TASK_ID": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == [f"/p/{name}", *dirs, dirs[1]]
    assert not (tmp_path / "PWNED").exists()


def test_percent_in_output_path_is_escaped_for_slurm() -> None:
    argv = sbatch_argv("/r/a b/slurm.sbatch", "/r/100%/logs/slurm.out", "/r/100%")
    assert argv[2] == "--output=/r/100%%/logs/slurm.out"
    assert argv[-1] == "/r/a b/slurm.sbatch"


def test_unknown_resource_key_names_the_valid_ones() -> None:
    with pytest.raises(SpecError) as info:
        Resources.from_mapping({"gpu": "A100:1"})
    assert info.value.field == "gpu"
    assert info.value.fix and "gpus" in info.value.fix and "timeout_min" in info.value.fix


@pytest.mark.parametrize(
    "text",
    [
        "gpus=A100",
        "gpus=A100:x",
        "cpus=0",
        "cpus=2.5",
        "mem_gb=-1",
        "timeout_min=abc",
        "partition=gpu\n#SBATCH --uid=0",
        "qos=a b",
        "cpus",
    ],
)
def test_bad_resource_values_fail_naming_the_key(text: str) -> None:
    with pytest.raises(SpecError) as info:
        Resources.parse(text)
    assert info.value.field == text.split("=")[0]


def test_parse_and_merge() -> None:
    base = Resources(partition="gpu", cpus=4, timeout_min=60)
    merged = base.merged(Resources.parse("cpus=8, mem_gb=16"))
    assert merged == Resources(partition="gpu", cpus=8, mem_gb=16.0, timeout_min=60)
    assert merged.to_json() == {"cpus": 8, "mem_gb": 16.0, "timeout_min": 60, "partition": "gpu"}


# `scontrol show job -o` lines recorded on the test cluster (paths shortened).
CANCELLED = (
    "JobId=1 JobName=j.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 "
    "Nice=0 Account=(null) QOS=(null) JobState=CANCELLED Reason=None Dependency=(null) Requeue=1 "
    "Restarts=1 BatchFlag=1 Reboot=0 ExitCode=143:0 RunTime=00:00:05 TimeLimit=00:01:00 "
    "NodeList=vm BatchHost=vm Command=/tmp/x JobState=RUNNING Restarts=9 WorkDir=/tmp/x"
)
REQUEUED = (
    "JobId=7 JobName=rgt-train UserId=root(0) JobState=PENDING Reason=BeginTime "
    "Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 "
    "RunTime=00:00:00 TimeLimit=00:01:00 NodeList=(null) Command=/r/slurm.sbatch"
)
ARRAY_TASK = (
    "JobId=12 ArrayJobId=10 ArrayTaskId=2 JobName=rgt-array UserId=root(0) JobState=RUNNING "
    "Reason=None Restarts=0 ExitCode=0:0 RunTime=00:00:03 TimeLimit=UNLIMITED NodeList=vm "
    "Command=/r/array.sbatch"
)


def test_scontrol_parse_ignores_user_text_after_command() -> None:
    job = parse_scontrol(CANCELLED)
    assert job and (job.state, job.restarts, job.exit_code) == ("CANCELLED", 1, "143:0")
    array = parse_scontrol(ARRAY_TASK)
    assert array and array.job_id == "10_2"
    assert parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None


@pytest.mark.parametrize(
    ("agent", "line", "state"),
    [
        ({"state": "retrying", "attempt": 1}, REQUEUED, "retrying"),
        (
            {"state": "queued", "exists": False},
            REQUEUED.replace("Restarts=1", "Restarts=0"),
            "queued",
        ),
        ({"state": "retrying", "attempt": 1, "agent_alive": False}, CANCELLED, "cancelled"),
        ({"state": "succeeded", "attempt": 2}, CANCELLED, "succeeded"),  # the agent's end wins
        ({"state": "running", "attempt": 1}, REQUEUED.replace("PENDING", "TIMEOUT"), "failed"),
    ],
)
def test_merge_states(agent: dict[str, object], line: str, state: str) -> None:
    merged = merge(agent, parse_scontrol(line), "7")
    assert merged["state"] == state
    assert merged["slurm"]["state"] == line.split("JobState=")[1].split()[0]


def test_merge_counts_allocations_as_attempts_and_labels_timeouts() -> None:
    merged = merge(
        {"state": "running", "attempt": 1},
        parse_scontrol(REQUEUED.replace("PENDING", "TIMEOUT")),
        "7",
    )
    assert merged["attempts"] == 2 and merged["label"] == "preempted"
    gone = merge({"state": "running", "attempt": 1, "agent_alive": False}, None, "7")
    assert gone["state"] == "running" and "no longer knows" in gone["reason"]


# ``sinfo -h -N -o "%N %P"`` on a cluster of three nodes, two partitions (``cpu`` the default).
SINFO_NODES = "n1 cpu*\nn2 cpu*\nn2 gpu\nn3 gpu\n"


@pytest.mark.parametrize(
    ("partition", "nodes", "refused"),
    [
        (None, 2, None),  # the default partition, cpu: n1 and n2
        (None, 3, "Slurm partition cpu has 2 node(s)"),
        ("gpu", 2, None),
        ("gpu", 3, "Slurm partition gpu has 2 node(s)"),
        ("cpu,gpu", 3, None),  # a job may name several partitions
        ("nosuch", 2, "Slurm partition nosuch has 0 node(s)"),
    ],
)
def test_a_partition_without_enough_nodes_is_refused(
    partition: str | None, nodes: int, refused: str | None
) -> None:
    if refused is None:
        check_nodes(SINFO_NODES, partition, nodes)
        return
    with pytest.raises(UsageError) as caught:
        check_nodes(SINFO_NODES, partition, nodes)
    assert refused in caught.value.message and "sinfo -s" in str(caught.value.fix)


def test_without_a_default_partition_every_node_counts() -> None:
    assert partition_nodes("a p\nb q\nb p\n", None) == ("(all partitions)", 2)
    check_nodes("", None, 8)  # sinfo said nothing: sbatch will say it, not a guess here


def test_two_nodes_render_one_task_per_node_and_one_node_stays_as_it_was() -> None:
    two = slurm_flags(Resources(nodes=2, gpus="A100:4"), 60)
    assert two[3:] == ["--nodes=2", "--ntasks-per-node=1", "--gres=gpu:A100:4"]
    one = slurm_flags(Resources(nodes=1, gpus="4"), 60)
    assert "--ntasks-per-node=1" not in one and "--nodes=1" in one
    script = render_script(
        SbatchJob("rgt-x", "python3", "/a.pyz", ("/jobs/x",), Resources(nodes=3), 60)
    )
    assert "#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\n" in script
    assert script.count('"$python" "$agent" run "$job_dir" &') == 1  # one agent, on node 0


def test_nodes_zero_is_refused_by_the_vocabulary() -> None:
    with pytest.raises(UsageError) as caught:
        Resources.from_mapping({"nodes": 0})
    assert "nodes must be a whole number >= 1" in str(caught.value.fix) + caught.value.message

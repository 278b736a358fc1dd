"""The agent's side of a multi-node Slurm job without a cluster: which jobs get ``srun``, the
rendezvous variables, what every node runs (``NODE_SCRIPT``, run here with ``sh``), and the
verdict on a group whose nodes ended differently (``settle``), read from real torchrun output."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from rgt.agent._classify import AttemptFacts, Decision
from rgt.agent._slurm_nodes import NODE_SCRIPT, NodeGroup, group_for, nodes_of, settle

LAUNCHERS = Path(__file__).resolve().parents[1] / "triage" / "launchers"
SIGKILLED = (LAUNCHERS / "torchrun-2.13-gloo-rank1-sigkill.log").read_text()
VALUE_ERROR = (LAUNCHERS / "torchrun-2.13-gloo-tee-rank1-valueerror.log").read_text()
PEER_GONE = (
    "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
    "closed by peer [10.77.1.3]:29500\n"
)
IN_JOB = {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "n[1-2]"}


@pytest.mark.parametrize(
    ("env", "nodes"),
    [
        ({}, 1),  # not in Slurm
        ({"SLURM_JOB_NUM_NODES": "2"}, 1),  # no job id: not an allocation of ours
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "1"}, 1),
        ({"SLURM_JOB_ID": "7", "SLURM_NNODES": "3"}, 3),
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "two"}, 1),
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "0"}, 1),
    ],
)
def test_the_node_count_comes_from_the_allocation(env: dict[str, str], nodes: int) -> None:
    assert nodes_of(env) == nodes


def test_one_node_and_a_fleet_node_are_left_unchanged(tmp_path: Path) -> None:
    one = {**IN_JOB, "SLURM_JOB_NUM_NODES": "1"}
    assert group_for(one, str(tmp_path / "a"), first="n1") is None
    fleet = {**IN_JOB, "RGT_NNODES": "2"}  # rgt set the fleet's own variables
    assert group_for(fleet, str(tmp_path / "b"), first="n1") is None
    assert not (tmp_path / "a").exists()


def test_two_nodes_wrap_the_command_in_srun_with_the_rendezvous_env(tmp_path: Path) -> None:
    attempt = tmp_path / "logs" / "attempt-1"
    group = group_for({**IN_JOB, "SLURM_CPUS_PER_TASK": "4"}, str(attempt), first="n1")
    assert group is not None and attempt.is_dir()
    command = ["sh", "-c", "torchrun --nnodes $RGT_NNODES train.py"]
    argv = group.argv(command, "torchrun")
    assert argv[:6] == [
        "srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
        "--cpus-per-task=4",
    ]  # fmt: skip
    assert argv[6:8] == ["sh", "-c"] and argv[9:11] == ["rgt-node", str(attempt)]
    assert argv[11:] == command  # the user's command, word for word
    env = group.env()
    assert (env["RGT_NNODES"], env["RGT_MASTER_ADDR"]) == ("2", "n1")
    assert 0 < int(env["RGT_MASTER_PORT"]) < 65536 and "RGT_NODE_RANK" not in env
    assert group.argv(["srun", "python", "x.py"], "srun") == ["srun", "python", "x.py"]
    assert group.to_json()["node_logs"] == ["node-0.log", "node-1.log"]


def node(tmp_path: Path, rank: int, *command: str) -> subprocess.CompletedProcess[str]:
    """``NODE_SCRIPT`` as srun runs it on node ``rank``."""
    env = {**os.environ, "SLURM_NODEID": str(rank)}
    argv = ["sh", "-c", NODE_SCRIPT, "rgt-node", str(tmp_path), *command]
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=30, start_new_session=True
    )  # a task of its own, as under slurmstepd: `kill 0` reaches only it


def test_each_node_tees_its_log_and_records_its_status(tmp_path: Path) -> None:
    script = 'echo "rank=$RGT_NODE_RANK it\'s $1"; exit 3'
    said = node(tmp_path, 1, "sh", "-c", script, "train", "x y")
    assert said.returncode == 3
    assert said.stdout == "rank=1 it's x y\n"  # srun's copy: the merged log
    assert (tmp_path / "node-1.log").read_text() == said.stdout
    code, host = (tmp_path / "node-1.exit").read_text().split()
    assert code == "3" and host


def test_a_node_whose_command_is_killed_says_so_and_a_checkpoint_signal_kills_no_shell(
    tmp_path: Path,
) -> None:
    killed = node(tmp_path, 0, "sh", "-c", "echo before; kill -9 $$")
    assert killed.returncode == 128 + signal.SIGKILL and killed.stdout.startswith("before\n")
    assert (tmp_path / "node-0.exit").read_text().split()[0] == "137"
    # USR1 to the whole task (srun forwards it so): the command's handler runs, the shells live.
    script = "trap 'echo saved' USR1; kill -USR1 0; echo after"
    warned = node(tmp_path, 1, "sh", "-c", script)
    assert (warned.returncode, warned.stdout) == (0, "saved\nafter\n")


def ended(tmp_path: Path, nodes: dict[int, tuple[int, str]]) -> NodeGroup:
    group = NodeGroup(2, "n1", 29500, str(tmp_path))
    for rank, (code, log) in nodes.items():
        (tmp_path / f"node-{rank}.exit").write_text(f"{code} n{rank + 1}\n")
        (tmp_path / f"node-{rank}.log").write_text(log)
    return group


def merged(text: str) -> AttemptFacts:
    return AttemptFacts(1, None, text, oom_before=0, oom_after=0)


def test_a_rank_killed_on_node_1_is_the_cause_whatever_the_merged_log_says_last(
    tmp_path: Path,
) -> None:
    group = ended(tmp_path, {0: (1, PEER_GONE), 1: (1, SIGKILLED)})
    said = Decision("nccl", False, "collective failed", "", [])
    decision = settle(group, said, merged(SIGKILLED + PEER_GONE))
    assert decision is not None and (decision.label, decision.retryable) == ("preempted", True)
    assert decision.evidence[0].startswith("node 1 (n2) of 2: exit status 1")
    assert "not visible to the agent on node 0" in decision.evidence[-1]
    oom = merged("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=9.0 cgroup.\n")
    stepd = settle(group, said, oom)
    assert stepd is not None and (stepd.label, stepd.retryable) == ("host_oom", False)


def test_a_traceback_on_node_1_fails_the_job_and_a_lost_peer_alone_restarts_it(
    tmp_path: Path,
) -> None:
    said = Decision("nccl", False, "collective failed", "", [])
    bug = settle(ended(tmp_path, {0: (143, ""), 1: (1, VALUE_ERROR)}), said, merged(""))
    assert bug is not None and (bug.label, bug.retryable) == ("code_error", False), bug.to_json()
    assert bug.evidence[0].startswith("node 1 (n2)")
    peer = settle(ended(tmp_path, {0: (1, PEER_GONE), 1: (0, "")}), said, merged(PEER_GONE))
    assert peer is not None and peer.retryable and "srun starts the group again" in peer.cause


def test_nothing_changes_without_a_group_a_failure_or_with_a_cancel(tmp_path: Path) -> None:
    said = Decision("unknown", False, "x", "", [])
    assert settle(None, said, merged("")) is said
    assert settle(ended(tmp_path, {}), None, merged("")) is None
    cancel = Decision("cancelled", False, "", "", cancelled=True)
    assert settle(ended(tmp_path, {1: (1, SIGKILLED)}), cancel, merged("")) is cancel

"""The fleet's rules without machines: which agent verdicts restart the group, and the group's
one state from its nodes' (the end-to-end tests run them on real sshd nodes)."""

from __future__ import annotations

from typing import Any

import pytest

from rgt.agent._classify import Decision
from rgt.agent._fleet import group_restart
from rgt.backends.statusdoc import JobStatus
from rgt.models import JobRecord, JobSpec, JobState
from rgt.status.fleet import combine

FLEET = {"env": {"RGT_NNODES": "2", "RGT_NODE_RANK": "0"}}
LOST = "gloo: Connection closed by peer [127.0.0.1]:4242"


def test_a_collective_error_on_a_fleet_node_restarts_the_group() -> None:
    decided = group_restart(FLEET, Decision("nccl", False, LOST, "find the first rank", ["x"]))
    assert decided is not None and decided.retryable and decided.label == "nccl"
    assert decided.evidence == ["fleet of 2 nodes: a collective error here is a peer's loss", "x"]
    assert decided.cause.startswith("a peer on another node of this fleet vanished")


@pytest.mark.parametrize(
    ("spec", "decision"),
    [
        ({"env": {}}, Decision("nccl", False, LOST, "")),  # one machine: the rank is there
        ({"env": {"RGT_NNODES": "1"}}, Decision("nccl", False, LOST, "")),
        (FLEET, Decision("code_error", False, "Traceback", "")),  # its own bug
        (FLEET, Decision("cancelled", False, "CANCEL", "", cancelled=True)),
        (FLEET, None),  # succeeded
    ],
)
def test_everything_else_is_decided_as_on_one_machine(
    spec: dict[str, Any], decision: Decision | None
) -> None:
    assert group_restart(spec, decision) is decision


def record() -> JobRecord:
    spec = JobSpec("j1", "a", ("true",), nodes=("a", "b"))
    return JobRecord("j1", "a", spec, JobState.RUNNING)


def node(state: JobState | None, **doc: Any) -> JobStatus:
    return JobStatus.from_doc({"state": state.value if state else "unknown", **doc}, "j1")


@pytest.mark.parametrize(
    ("states", "group"),
    [
        ((JobState.SUCCEEDED, JobState.SUCCEEDED), JobState.SUCCEEDED),
        ((JobState.SUCCEEDED, JobState.RUNNING), JobState.RUNNING),
        ((JobState.RUNNING, JobState.FAILED), JobState.FAILED),
        ((JobState.CANCELLED, JobState.RUNNING), JobState.CANCELLED),
        ((JobState.RETRYING, JobState.RUNNING), JobState.RETRYING),
        ((JobState.QUEUED, JobState.RUNNING), JobState.RUNNING),
        ((None, JobState.RUNNING), None),
        ((None, JobState.FAILED), JobState.FAILED),
    ],
)
def test_the_group_state(states: tuple[JobState | None, ...], group: JobState | None) -> None:
    assert combine(record(), [node(s) for s in states]).state is group


def test_the_worst_node_speaks_and_the_oldest_heartbeat_is_the_groups() -> None:
    nodes = [
        node(JobState.RUNNING, agent_alive=True, heartbeat="2026-12-06T10:00:05Z"),
        node(JobState.RUNNING, agent_alive=False, heartbeat="2026-12-06T09:00:00Z", reason="x"),
    ]
    group = combine(record(), nodes)
    assert group.agent_alive is False and group.heartbeat == "2026-12-06T09:00:00Z"
    assert group.reason == "node 1 (b): x"
    assert [n["machine"] for n in group.to_doc()["nodes"]] == ["a", "b"]


# What a rank on node 0 prints when its peer on node 1 is SIGKILLed: gloo's pair.cc says
# "closed" when the peer's socket was shut, "reset" when it was torn down (both were seen in the
# two-node fleet test, the second only under load, when it failed the job as `code_error`).
GLOO_LOST = [
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] "
    "Connection closed by peer [127.0.0.1]:23947",
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read "
    "error [127.0.0.1]:23947: Connection reset by peer. This is typically caused by a remote "
    "worker hanging or bugs in the application.",
]


@pytest.mark.parametrize("line", GLOO_LOST)
def test_a_lost_gloo_peer_is_a_collective_failure_in_either_phrasing(line: str) -> None:
    from rgt.triage import classify

    log = 'Traceback (most recent call last):\n  File "train.py", line 16, in <module>\n'
    log += f"    dist.all_reduce(value)\n{line}\n"
    verdict = classify(log, exit_code=1)
    assert (verdict.label, verdict.retryable) == ("nccl", False), verdict  # one machine
    decision = Decision(verdict.label, verdict.retryable, verdict.cause, verdict.remedy, ["x"])
    restart = group_restart(FLEET, decision)
    assert restart is not None and restart.retryable  # a fleet node: the group restarts

"""A node of a fleet (`rgt run A,B -- CMD`): a peer's loss restarts the group.

Every node of a fleet runs its own agent under the same job id; rgt gave each the rendezvous
variables (``RGT_NNODES`` > 1, ``RGT_NODE_RANK``, ``RGT_MASTER_ADDR``, ``RGT_MASTER_PORT``).
When a worker on node 1 is killed, node 1's agent sees it (``preempted``, retryable), but the
ranks on node 0 see only their peer vanish: gloo's "Connection closed by peer", NCCL's remote
error, a store that stopped answering. On one machine that collective error is never a cause
(the first failing rank is there to be read, ``_classify``); on a fleet node the first failing
rank may be on another machine, whose log this agent cannot read. So a collective failure
with no error of this node's own is the group's restart: retryable, counted against the
node's retry budget (which bounds a peer that fails for good), and every node starts its
next attempt with the same command, whose launcher meets the others at the same rendezvous.
Which checkpoint the group resumes from is the job's to agree on (its ranks' collective, or
rgt.ckpt's commit point); the agent starts every node again, it does not pick the step.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from rgt.agent._classify import Decision

# The labels of "a collective failed": on a fleet node, what a peer's loss looks like here.
PEER_LOST = ("nccl",)
GROUP_RESTART = (
    "a peer on another node of this fleet vanished mid-collective (%s); the group restarts "
    "on every node"
)
REMEDY = (
    "nothing to fix if a node was killed from outside (its own events say so); if a node's "
    "program fails, read that node's log (`rgt logs JOB --node R`)"
)


def nodes(spec: Dict[str, Any]) -> int:
    """How many nodes the job runs on (1 unless rgt launched it as a fleet)."""
    try:
        return int((spec.get("env") or {}).get("RGT_NNODES") or 1)
    except (TypeError, ValueError):
        return 1


def group_restart(spec: Dict[str, Any], decision: Optional[Decision]) -> Optional[Decision]:
    """``decision`` unchanged, except a lost peer on a fleet node: retryable, and said so."""
    if decision is None or decision.retryable or decision.cancelled or nodes(spec) < 2:
        return decision
    if decision.label not in PEER_LOST:
        return decision
    cause = GROUP_RESTART % decision.cause
    evidence = ["fleet of %d nodes: a collective error here is a peer's loss" % nodes(spec)]
    return Decision(decision.label, True, cause, REMEDY, evidence + decision.evidence)

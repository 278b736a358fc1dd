"""A Slurm job on several nodes: one launcher per node, started with ``srun`` by the one agent.

``sbatch --nodes N --ntasks-per-node 1`` runs the batch script, and so the agent, on the
allocation's first node only. When the allocation has more than one node
(``SLURM_JOB_NUM_NODES`` > 1), the agent runs the job's command on every node at once::

    srun --nodes N --ntasks N --ntasks-per-node 1 --kill-on-bad-exit=1 \\
        sh -c NODE_SCRIPT rgt-node logs/attempt-K COMMAND...

and every node gets the rendezvous variables of the distributed-jobs contract: ``RGT_NNODES``
(N), ``RGT_MASTER_ADDR`` (the first host of ``scontrol show hostnames $SLURM_JOB_NODELIST``,
the node the agent runs on), ``RGT_MASTER_PORT`` (a port free on that node, chosen again for
every attempt) and ``RGT_NODE_RANK`` (``SLURM_NODEID`` on that node, set by ``NODE_SCRIPT``),
so ``torchrun --nnodes "$RGT_NNODES" --node_rank "$RGT_NODE_RANK" --rdzv_endpoint
"$RGT_MASTER_ADDR:$RGT_MASTER_PORT" …`` works unchanged. ``NODE_SCRIPT`` tees each node's output
into ``logs/attempt-K/node-R.log`` while srun gathers every node's lines into the attempt's
merged log (triage, rank logs and hang detection read that one), and writes the command's exit
status and the node's hostname to ``node-R.exit``. A command that is itself ``srun`` is left
alone (it has its own idea of the nodes) and gets the variables but no ``RGT_NODE_RANK``.

The job dir is on the filesystem every node mounts (the Slurm backend's rule), so every node's
checkpoints and artifacts land in the one ``RGT_CKPT_DIR`` and ``RGT_OUTPUT_DIR``, and the one
manifest, ``pull`` and the gate cover them.

When a worker dies on node 1, its torchrun fails, ``--kill-on-bad-exit`` makes srun end the
other nodes' launchers, and srun exits non-zero. The merged log then holds every node's story,
in no reliable order, so ``settle`` reads each node's own log and exit status: a rank killed by
SIGKILL that nobody in the job sent is the cause (retryable; the OOM counters the agent reads
are those of its own node, so on another node an OOM kill reads the same, and the evidence
says so); else a node's own error (a traceback) is; a collective error ("Connection closed by
peer") is a peer's loss, and the group restarts. The next attempt runs srun again on every
node (a group restart); the script resumes from its newest checkpoint in ``RGT_CKPT_DIR``.
A node that is lost whole (NODE_FAIL) ends the allocation: Slurm requeues the batch job
(``--requeue``) and the agent's next run resumes the same way.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Tuple

from rgt.agent import _ranklogs
from rgt.agent._classify import AttemptFacts, Decision, _host_oom, decide
from rgt.agent._fleet import PEER_LOST, REMEDY

# Runs on every node as srun's task: $1 is the attempt's log dir, the rest the job's command.
# The shells keep a handler (not SIG_IGN) for the signals srun forwards, so they outlive the
# command and record its status, while the command itself starts with default dispositions;
# tee ignores them and ends when the command's output does, so no line is lost.
NODE_SCRIPT = """\
export RGT_NODE_RANK="$SLURM_NODEID"
log="$1/node-$SLURM_NODEID.log"
status="$1/node-$SLURM_NODEID.exit"
shift
trap : USR1 USR2 TERM INT HUP
{ trap : USR1 USR2 TERM INT HUP; "$@"; echo "$? $(hostname)" > "$status"; } 2>&1 |
  { trap '' USR1 USR2 TERM INT HUP; tee -a "$log"; }
code=1
read -r code host 2>/dev/null < "$status"
exit "$code"
"""


def nodes_of(environ: Mapping[str, str]) -> int:
    """How many nodes this Slurm allocation has (1 outside Slurm or when unreadable)."""
    if not environ.get("SLURM_JOB_ID"):
        return 1
    raw = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or "1"
    try:
        return max(1, int(raw))
    except ValueError:
        return 1


class NodeGroup(object):
    """One attempt's launchers, one per node of the allocation."""

    def __init__(
        self, nnodes: int, master_addr: str, master_port: int, attempt_dir: str, cpus: str = ""
    ) -> None:
        self.nnodes = nnodes
        self.master_addr = master_addr
        self.master_port = master_port
        self.attempt_dir = attempt_dir
        self.cpus = cpus  # SLURM_CPUS_PER_TASK: srun (>= 22.05) no longer inherits it

    def srun(self) -> List[str]:
        argv = ["srun", "--nodes=%d" % self.nnodes, "--ntasks=%d" % self.nnodes]
        argv += ["--ntasks-per-node=1", "--kill-on-bad-exit=1"]
        return argv + (["--cpus-per-task=" + self.cpus] if self.cpus else [])

    def argv(self, command: List[str], launcher: Optional[str]) -> List[str]:
        """``command`` as every node runs it (an ``srun`` command of the user's: unchanged)."""
        if launcher == "srun":
            return list(command)
        return [*self.srun(), "sh", "-c", NODE_SCRIPT, "rgt-node", self.attempt_dir, *command]

    def env(self) -> Dict[str, str]:
        return {
            "RGT_NNODES": str(self.nnodes),
            "RGT_MASTER_ADDR": self.master_addr,
            "RGT_MASTER_PORT": str(self.master_port),
        }

    def node_log(self, rank: int) -> str:
        return os.path.join(self.attempt_dir, "node-%d.log" % rank)

    def node_exit(self, rank: int) -> Tuple[Optional[int], str]:
        """(exit status of node ``rank``'s command, its hostname); None: not recorded (the
        node's shell was killed with it, or never started)."""
        try:
            with open(os.path.join(self.attempt_dir, "node-%d.exit" % rank)) as handle:
                words = handle.read().split()
            return int(words[0]), (words[1] if len(words) > 1 else "")
        except (OSError, ValueError, IndexError):
            return None, ""

    def to_json(self) -> Dict[str, Any]:
        logs = [os.path.basename(self.node_log(r)) for r in range(self.nnodes)]
        return dict(self.env(), srun=self.srun(), node_logs=logs)


def group_for(
    env: Mapping[str, str], attempt_dir: str, first: Optional[str] = None
) -> Optional[NodeGroup]:
    """The attempt's node group, or None on one node (or a fleet node: rgt set RGT_NNODES)."""
    nnodes = nodes_of(env)
    if nnodes < 2 or env.get("RGT_NNODES"):
        return None
    os.makedirs(attempt_dir, exist_ok=True)
    master = first or first_host(env)
    return NodeGroup(nnodes, master, free_port(), attempt_dir, env.get("SLURM_CPUS_PER_TASK", ""))


def first_host(env: Mapping[str, str]) -> str:
    """The allocation's first host (node 0, where the batch script and this agent run)."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            timeout=30,
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        out = ""
    hosts = out.split()
    return hosts[0] if hosts else env.get("SLURMD_NODENAME") or socket.gethostname()


def free_port() -> int:
    """A port nobody holds on this node now (the kernel's choice): the rendezvous port."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


GROUP_LOST = (
    "a peer on another node of this Slurm job vanished mid-collective (%s); srun starts the "
    "group again on every node"
)
# The agent reads the OOM evidence (kernel log, counters) of its own node only.
NOT_VISIBLE = (
    "node %d (%s)'s OOM counters and kernel log are not visible to the agent on node 0: an OOM "
    "kill there reads the same as a kill -9 from here (`dmesg` on %s tells them apart)"
)
QUIET = ("unknown", "preempted")  # what a node that was only stopped by srun reads as


class NodeEnd(object):
    """How one node's command ended, and the verdict on its own log."""

    def __init__(self, rank: int, code: int, host: str, decision: Decision, killed: bool):
        self.rank, self.code, self.host = rank, code, host
        self.decision, self.killed = decision, killed

    def said(self, group: NodeGroup) -> str:
        where = os.path.relpath(group.node_log(self.rank), os.path.dirname(group.attempt_dir))
        return "node %d (%s) of %d: exit status %d; its own log: logs/%s" % (
            self.rank, self.host or "?", group.nnodes, self.code, where
        )  # fmt: skip


def settle(
    group: Optional[NodeGroup], decision: Optional[Decision], facts: AttemptFacts
) -> Optional[Decision]:
    """``decision`` (read from the merged log) again, from each node's own log and status."""
    from rgt.triage.launchers import STEPD_OOM

    if group is None or decision is None or decision.cancelled:
        return decision
    ends = node_ends(group, facts)
    chosen = next((e for e in ends if e.killed), None)
    stepd = STEPD_OOM.search(facts.log_tail)
    if chosen is not None and stepd is not None:  # a step's cgroup OOM, said by any node
        return _host_oom([chosen.said(group), "slurmstepd: " + stepd.group(0)])
    if chosen is None:
        chosen = next((e for e in ends if e.decision.label not in PEER_LOST + QUIET), None)
    if chosen is not None:
        return _from_node(group, chosen)
    lost = [e for e in ends if e.decision.label in PEER_LOST]
    if lost or decision.label in PEER_LOST:
        cause = GROUP_LOST % (lost[0].decision.cause if lost else decision.cause)
        said = [e.said(group) for e in ends]
        return Decision(decision.label, True, cause, REMEDY, said + decision.evidence)
    return decision


def _from_node(group: NodeGroup, end: NodeEnd) -> Decision:
    found = end.decision
    evidence = [end.said(group), *found.evidence]
    if end.rank != 0 and found.label == "preempted":
        evidence.append(NOT_VISIBLE % (end.rank, end.host or "?", end.host or "that node"))
    return Decision(found.label, found.retryable, found.cause, found.remedy, evidence)


def node_ends(group: NodeGroup, facts: AttemptFacts) -> List[NodeEnd]:
    """Every node whose command failed, with the verdict on its own log (node 0's with the
    agent's OOM evidence, the others' without: none is readable from here)."""
    from rgt.triage.launchers import first_failure

    ends = []  # type: List[NodeEnd]
    for rank in range(group.nnodes):
        code, host = group.node_exit(rank)
        if not code:
            continue  # succeeded, or its shell was stopped with it by srun: not a cause
        tail = _ranklogs.tail(group.node_log(rank))
        sig = code - 128 if code > 128 else None
        own = AttemptFacts(None if sig else code, sig, tail, pid=None)
        own.rank_tails = facts.rank_tails
        if rank == 0:
            own.oom_before, own.oom_after = facts.oom_before, facts.oom_after
            own.kernel_oom, own.host_oom_delta = facts.kernel_oom, facts.host_oom_delta
        first = first_failure(tail)
        killed = sig == signal.SIGKILL or (first is not None and first.signal == signal.SIGKILL)
        ends.append(NodeEnd(rank, code, host, decide(own), killed))
    return ends

"""What Slurm says about a job, and how that merges with what the agent recorded.

Accounting (``sacct``) is often disabled on small clusters and always lags; ``scontrol show
job`` knows every job the controller still holds (``MinJobAge``, 300 s by default, after it
ended). So the controller is asked first, and the agent's ``status.json`` in the job directory
stays the durable truth: a terminal state the agent recorded always wins. Slurm fills the gaps
the agent cannot see: a job still waiting for an allocation, a requeued job waiting to restart,
a ``scancel`` (which kills the agent too), a node failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rgt.agent import jobfiles

# Keys read from `scontrol show job -o`. Only the part before `Command=` is parsed: that is
# where user-controlled text (command, work dir, output paths) starts.
FIELD_RE = re.compile(r"(?:^|\s)(JobId|ArrayJobId|ArrayTaskId|JobState|Reason|Restarts|ExitCode"
                      r"|RunTime|TimeLimit|NodeList|StartTime|EligibleTime)=(\S*)")  # fmt: skip

WAITING = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                     "RESV_DEL_HOLD", "SUSPENDED", "STOPPED", "RESIZING"})  # fmt: skip
ACTIVE = frozenset({"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"})
# Slurm end states the agent cannot record itself (it was killed with the allocation), with
# the triage label each one means.
SLURM_FAILURES = {
    "TIMEOUT": "preempted",
    "PREEMPTED": "preempted",
    "NODE_FAIL": "preempted",
    "BOOT_FAIL": "preempted",
    "DEADLINE": "preempted",
    "OUT_OF_MEMORY": "host_oom",
    "FAILED": "unknown",
}
AGENT_TERMINAL = frozenset(jobfiles.TERMINAL)


@dataclass(frozen=True)
class SlurmJob:
    """One job as ``scontrol show job`` reports it."""

    job_id: str
    state: str
    reason: str
    restarts: int
    exit_code: str
    node: str
    time_limit: str

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "state": self.state,
            "reason": self.reason,
            "restart_count": self.restarts,
            "exit_code": self.exit_code,
            "node": self.node,
            "time_limit": self.time_limit,
        }


def parse_scontrol(text: str) -> SlurmJob | None:
    """The first job of ``scontrol show job -o ID`` output; None when there is none."""
    line = next((ln for ln in text.splitlines() if ln.startswith("JobId=")), None)
    if line is None:
        return None
    fields = dict(FIELD_RE.findall(line.split(" Command=", 1)[0]))
    job_id = fields["JobId"]
    if fields.get("ArrayTaskId") not in (None, "", "N/A"):
        job_id = f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
    return SlurmJob(
        job_id=job_id,
        state=fields.get("JobState", "UNKNOWN").split("+")[0],
        reason=fields.get("Reason", "None"),
        restarts=int(fields.get("Restarts", "0") or 0),
        exit_code=fields.get("ExitCode", ""),
        node=fields.get("NodeList", ""),
        time_limit=fields.get("TimeLimit", ""),
    )


def merge(agent: dict[str, Any], slurm: SlurmJob | None, slurm_id: str) -> dict[str, Any]:
    """The agent's status with Slurm's view under ``slurm`` and the state both imply.
    ``attempts`` is Slurm's allocation count (``SLURM_RESTART_COUNT`` + 1)."""
    out = dict(agent)
    out["slurm"] = slurm.to_json() if slurm else {"job_id": slurm_id, "state": "UNKNOWN"}
    out["attempts"] = slurm.restarts + 1 if slurm else max(1, int(agent.get("attempt") or 1))
    state = str(agent.get("state") or "queued")
    if state in AGENT_TERMINAL:
        return out
    if slurm is None:
        if not agent.get("agent_alive"):
            out["reason"] = (f"Slurm no longer knows job {slurm_id} and no agent is running: "
                             "it ended without recording how (see logs/slurm.out)")  # fmt: skip
        return out
    out.update(_from_slurm(slurm, state, int(agent.get("attempt") or 0)))
    out.update(liveness(slurm))
    return out


def liveness(slurm: SlurmJob) -> dict[str, Any]:
    """Slurm decides whether the job is supervised, not a pid check on the host that answers
    (on a multi-node cluster the agent runs on a compute node the login node cannot see): an
    active allocation runs its agent; a queued one will start it (``waiting``: no heartbeat
    is due, and nobody may start a second agent)."""
    return {
        "liveness": "slurm",
        "agent_alive": slurm.state in ACTIVE,
        "waiting": slurm.state in WAITING,
    }


def _from_slurm(slurm: SlurmJob, agent_state: str, attempt: int) -> dict[str, Any]:
    if slurm.state in WAITING:
        waiting = "retrying" if slurm.restarts or attempt else "queued"
        return {"state": waiting, "reason": f"waiting in the Slurm queue ({slurm.reason})"}
    if slurm.state in ACTIVE:
        return {"state": agent_state if attempt else "queued"}
    if slurm.state == "CANCELLED":
        return {"state": "cancelled", "label": None, "reason": "cancelled in Slurm (scancel)"}
    if slurm.state == "COMPLETED":
        return {"state": "failed", "label": "unknown",
                "reason": "the batch script exited 0 but the agent recorded no end"}  # fmt: skip
    label = SLURM_FAILURES.get(slurm.state, "unknown")
    return {"state": "failed", "label": label,
            "reason": f"Slurm ended the job: {slurm.state} ({slurm.reason}), "
                      f"exit {slurm.exit_code}; the agent recorded no end"}  # fmt: skip

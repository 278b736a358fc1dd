"""A Slurm step that never starts: bounded, and the allocation handed back to the queue.

An attempt whose command is an ``srun`` (the agent's one launcher per node of a multi-node job,
or the user's own bare ``srun``) creates its step within seconds. When the allocation cannot
run it, srun waits for ever: "step creation temporarily disabled, retrying (Requested nodes are
busy)" — a previous step that never ended on a node, or (seen with Slurm 22.05 on a requeued
job whose node had just come back from a power loss) a node on which the controller no longer
lets this job run anything. srun prints that line only when it exits, so the log is silent and
nothing else says the job stopped training while its allocation bills.

``StepStart`` notes the job's steps when the attempt starts (``squeue -s``), then looks every
few seconds for a new one; once it appears it looks no more. If none has appeared after
``RGT_AGENT_STEP_START_S`` seconds (600 by default) the attempt's step is declared blocked:
the agent records ``step_blocked`` and runs ``scontrol requeue`` on its own job, as the batch
script does before a time limit. The requeue ends this allocation (Slurm sends SIGTERM to the
agent, which records a retryable end and stops the step) and the job restarts on a new one,
resuming from its newest checkpoint; each such requeue spends one retry. When Slurm refuses the
requeue, the attempt is stopped and the job fails with the reason, so the allocation stops
billing for a step that cannot run.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any, Dict, Mapping, Optional, Set

from rgt.agent._classify import REMEDY_PREEMPTED, Decision

LOOK_EVERY_S = 5.0


def steps(job_id: str, env: Mapping[str, str]) -> Optional[Set[str]]:
    """The ids of job ``job_id``'s running numbered steps (``"0"``, ``"1"``, …; not
    ``batch``/``extern``); None when squeue cannot say."""
    try:
        proc = subprocess.run(
            ["squeue", "-s", "-h", "-j", job_id, "-o", "%i"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    found = set()
    for word in proc.stdout.decode("utf-8", "replace").split():
        step = word.rpartition(".")[2]
        if step.isdigit():
            found.add(step)
    return found


def requeue(job_id: str, env: Mapping[str, str]) -> str:
    """``scontrol requeue`` of this job: "" once Slurm took it, else what it said."""
    try:
        proc = subprocess.run(
            ["scontrol", "requeue", job_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env),
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return "scontrol requeue: %s" % exc
    said = proc.stdout.decode("utf-8", "replace").strip()[-300:]
    return "" if proc.returncode == 0 else (said or "scontrol requeue exited %d" % proc.returncode)


class StepStart(object):
    """Whether the attempt's srun got its step, looked at from the agent's wait loop."""

    def __init__(self, job_id: str, env: Mapping[str, str], limit_s: float) -> None:
        self.job_id, self.env, self.limit_s = job_id, dict(env), limit_s
        self.begun = time.monotonic()
        self.before = steps(job_id, self.env) or set()  # a step left over is not ours
        self.next_look = self.begun + 1.0
        self.started = False
        self.blocked = None  # type: Optional[Dict[str, Any]]

    def look(self, now: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """The ``step_blocked`` detail, once, when the bound has passed with no new step."""
        now = time.monotonic() if now is None else now
        if self.started or self.blocked is not None or now < self.next_look:
            return None
        self.next_look = now + LOOK_EVERY_S
        found = steps(self.job_id, self.env)
        if found is None:
            return None  # squeue did not answer: no verdict on that
        if found - self.before:
            self.started = True
            return None
        waited = now - self.begun
        if waited < self.limit_s:
            return None
        self.blocked = {
            "slurm_job_id": self.job_id,
            "waited_s": round(waited, 1),
            "steps_running": sorted(found, key=int),
        }
        return self.blocked

    def check(self, rec: Any) -> bool:
        """Look (from the attempt's wait loop); a blocked step is requeued and recorded
        (``step_blocked``). True when the attempt must be stopped: Slurm refused the requeue."""
        if self.look() is None:
            return False
        requeued = self.hand_back()
        next_step = NEXT_REQUEUED if requeued else REMEDY_REFUSED % self.job_id
        rec.event("step_blocked", self.blocked, next_step, "warning")
        return not requeued

    def hand_back(self) -> bool:
        """Requeue the job (its allocation cannot run the step); True when Slurm took it.
        The outcome goes into ``blocked`` (``requeued``, and what Slurm said if it refused)."""
        assert self.blocked is not None
        refused = requeue(self.job_id, self.env)
        self.blocked["requeued"] = not refused
        if refused:
            self.blocked["requeue_refused"] = refused
        return not refused

    def decision(self) -> Decision:
        """The verdict on the attempt whose step never started."""
        assert self.blocked is not None
        cause = CAUSE % self.blocked["waited_s"]
        evidence = ["no new step of Slurm job %s in %.0f s (squeue -s)" % (
            self.job_id, self.blocked["waited_s"])]  # fmt: skip
        if self.blocked.get("requeued"):
            evidence.append("the agent requeued Slurm job %s for a new allocation" % self.job_id)
            return Decision("preempted", True, cause, REMEDY_PREEMPTED, evidence)
        refused = str(self.blocked.get("requeue_refused", ""))
        evidence.append("scontrol requeue refused: " + refused)
        cause += "; Slurm refused to requeue the job (%s)" % refused
        return Decision("unknown", False, cause, REMEDY_REFUSED % self.job_id, evidence)


def watch_for(env: Mapping[str, str], limit_s: float) -> Optional[StepStart]:
    """A ``StepStart`` for an attempt that runs inside a Slurm job, else None."""
    job_id = env.get("SLURM_JOB_ID", "")
    if not job_id or limit_s <= 0:
        return None
    return StepStart(job_id, env, limit_s)


NEXT_REQUEUED = (
    "nothing to do: the job is back in the queue and resumes from its newest checkpoint on a "
    "new allocation; if it happens again, `scontrol show node` on the cluster names the node "
    "that cannot run steps (ask the admins to drain it)"
)
CAUSE = (
    "srun's step never started: after %.0f s the allocation still had no new step (srun waits "
    "for ever on 'step creation temporarily disabled' when the nodes cannot take the step)"
)
REMEDY_REFUSED = (
    "`squeue -s -j %s` and `scontrol show node` on the cluster show what holds the nodes; "
    "`rgt run` again (it resumes from the newest checkpoint), or ask the admins to drain the node"
)

"""The sbatch script that runs the rgt agent inside a Slurm allocation.

How a time limit becomes a resume, step by step:

1. ``--signal=B:USR1@<grace>`` makes Slurm send SIGUSR1 to the batch shell (``B:`` = only the
   shell, not every step) about ``grace`` seconds before the time limit; Slurm's event loop
   may send it up to a minute early, never late.
2. The shell forwards USR1 to the agent (a checkpoint request it passes to the job's process
   group; ``rgt.ckpt``'s hook saves between two steps) and runs ``scontrol requeue`` on its own
   job. A time limit alone never requeues; a job that reaches it ends as TIMEOUT for good.
3. The requeue ends the allocation: Slurm sends SIGTERM to the shell and the agent, the agent
   stops the job within its grace and records a retryable ``preempted`` end.
4. The requeued job waits (Slurm delays a requeued job's start by about two minutes) and then
   runs this script again from the top (``SLURM_RESTART_COUNT`` counts the restarts); the agent
   finds the job's status.json, starts the next attempt, and the training script resumes from
   its newest checkpoint in ``RGT_CKPT_DIR``.

An administrator's ``scontrol requeue`` or a preemption with ``PreemptMode=REQUEUE`` enters at
step 3. A bug (a traceback the agent classifies as not retryable) ends the agent with exit 1 and
the job as FAILED: nothing requeues it (``--requeue`` only allows requeues, it does not ask for
them on a non-zero exit).

A multi-node job (``--nodes N``, N > 1, one task per node) runs this script on the allocation's
first node only: the one agent starts there, and it starts one launcher per node with ``srun``
(``rgt.agent._slurm_nodes``). A node that dies (NODE_FAIL) makes Slurm requeue the whole batch
job (it may: ``--requeue``), and the script's next run resumes as above.

The agent runs in the background and the shell waits in a loop, because bash runs a trap only
between commands: a shell blocked in a foreground ``python`` would hold USR1 until the agent
ended. ``wait`` returns early (status > 128) whenever a trap ran, so the loop waits again until
the agent is really gone and exits with the agent's status.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from rgt.resources import Resources

# Slurm substitutes %j, %A, %a, … in --output; a literal '%' in a path is written '%%'.
OUTPUT_ESCAPE = str.maketrans({"%": "%%"})


@dataclass(frozen=True)
class SbatchJob:
    """One job (one job dir) or an array (one job dir per task, in task-id order)."""

    name: str
    python: str
    agent: str
    job_dirs: tuple[str, ...]
    resources: Resources
    grace_s: int = 120
    max_parallel: int | None = None

    @property
    def is_array(self) -> bool:
        return len(self.job_dirs) > 1


def slurm_flags(resources: Resources, grace_s: int) -> list[str]:
    """The generic vocabulary in Slurm's words; partition/account/qos pass through. ``gpus``
    is per node, as ``--gres`` counts it. More than one node: one task per node, the launcher
    that the agent starts there with ``srun`` (``rgt.agent._slurm_nodes``)."""
    flags = ["--requeue", "--open-mode=append", f"--signal=B:USR1@{int(grace_s)}"]
    if resources.nodes is not None:
        flags.append(f"--nodes={resources.nodes}")
        if resources.nodes > 1:
            flags.append("--ntasks-per-node=1")
    gpu_type, gpu_count = resources.gpu_request()
    if gpu_count:
        flags.append(
            f"--gres=gpu:{gpu_type}:{gpu_count}" if gpu_type else f"--gres=gpu:{gpu_count}"
        )
    if resources.cpus:
        flags.append(f"--cpus-per-task={resources.cpus}")
    if resources.mem_gb:
        flags.append(f"--mem={_slurm_memory(resources.mem_gb)}")
    if resources.timeout_min:
        flags.append(f"--time={resources.timeout_min}")
    for native in ("partition", "account", "qos"):
        value = getattr(resources, native)
        if value:
            flags.append(f"--{native}={value}")
    return flags


def _slurm_memory(mem_gb: float) -> str:
    """Whole GiB as ``32G``; anything else in MiB, rounded up (never ask for less)."""
    if float(mem_gb).is_integer():
        return f"{int(mem_gb)}G"
    return f"{math.ceil(mem_gb * 1024)}M"


def render_script(job: SbatchJob) -> str:
    """The batch script. Paths are shell-quoted: they may hold spaces, quotes or ``$(…)``."""
    lines = [
        "#!/bin/bash",
        f"# rgt: {'job array' if job.is_array else 'job'} {job.name}. Rendered by rgt; Slurm",
        "# reruns it from the top after every requeue, and the agent turns that into a resume.",
        f"#SBATCH --job-name={job.name}",
        *(f"#SBATCH {flag}" for flag in slurm_flags(job.resources, job.grace_s)),
    ]
    if job.is_array:
        limit = f"%{job.max_parallel}" if job.max_parallel else ""
        lines.append(f"#SBATCH --array=0-{len(job.job_dirs) - 1}{limit}")
    lines += ["", "set -u", *_job_dir_lines(job.job_dirs)]
    lines += [f"python={shlex.quote(job.python)}", f"agent={shlex.quote(job.agent)}", ""]
    lines += _SUPERVISE.splitlines()
    return "\n".join(lines) + "\n"


def _job_dir_lines(job_dirs: Sequence[str]) -> list[str]:
    if len(job_dirs) == 1:
        return [f"job_dir={shlex.quote(job_dirs[0])}"]
    listing = [f"  {shlex.quote(path)}" for path in job_dirs]
    return ["job_dirs=(", *listing, ")", 'job_dir="${job_dirs[$SLURM_ARRAY_TASK_ID]}"']


_SUPERVISE = """\
echo "rgt: slurm job ${SLURM_JOB_ID} restart ${SLURM_RESTART_COUNT:-0} on $(hostname)"
"$python" "$agent" run "$job_dir" &
agent_pid=$!

# USR1 = the time limit is near: checkpoint request to the job, then back into the queue.
on_usr1() {
  echo "rgt: time limit near: checkpoint request, requeue (at $(date -Is))"
  kill -USR1 "$agent_pid" 2>/dev/null
  scontrol requeue "$SLURM_JOB_ID"
}
trap on_usr1 USR1
# SIGTERM (requeue, preemption, scancel) reaches the agent too; the shell waits for its end.
trap 'kill -TERM "$agent_pid" 2>/dev/null' TERM

while :; do
  wait "$agent_pid"
  rc=$?
  kill -0 "$agent_pid" 2>/dev/null || exit "$rc"
done"""


def sbatch_argv(script: str, output: str, workdir: str) -> list[str]:
    """The sbatch command line. Paths go here as argv (not into ``#SBATCH`` lines, whose
    quoting rules are Slurm's own) so a hostile path stays one argument."""
    return [
        "sbatch",
        "--parsable",
        f"--output={output.translate(OUTPUT_ESCAPE)}",
        f"--chdir={workdir}",
        script,
    ]

"""Step 1: the agent's GPU picker (rgt.agent._gpus) on this machine's nvidia-smi.

Real agents run real ``hold.py`` jobs, as tests/agent/test_gpus.py drives them, but against the
real ``nvidia-smi`` (the dry run replays a recorded answer instead). With G GPUs, F of them free:

a. ``--gpus G+1``: refused before the job starts, with the free count;
b. ``--gpus 1``: job A gets the lowest free GPU in ``CUDA_VISIBLE_DEVICES`` (and, on the GPU,
   CUDA inside the job sees exactly that card: count 1, the same UUID);
c. ``--gpus F`` while A holds one: refused, naming job A and its GPU;
d. ``kill -9`` of A's agent: A's job still runs, so its GPU stays held (refused again);
e. ``kill -9`` of A's job too: A's hold is stale and ``--gpus F`` gets every free GPU; when that
   job ends its GPUs are released (the lock file holds no one).

The raw query output is saved as ``$OUT/nvidia-smi-query.csv``: a real recording the test suite
can replay (tests/golden/nvidia-smi/).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from _agentjob import AgentJob, process_gone
from _core import Context, Step

from rgt.agent import _gpus

QUERY_ARGV = ["nvidia-smi", "--query-gpu=" + _gpus.QUERY, "--format=csv,noheader,nounits"]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def record_smi(ctx: Context, step: Step) -> str:
    """nvidia-smi's answer to the agent's own query, saved under $OUT (and, on the GPU, the
    plain ``nvidia-smi`` table beside it)."""
    done = subprocess.run(QUERY_ARGV, env=ctx.env, capture_output=True, text=True, timeout=60)
    (ctx.out / "nvidia-smi-query.csv").write_text(done.stdout)
    step.check(done.returncode == 0, "nvidia-smi answers the agent's query", " ".join(QUERY_ARGV))
    step.note("nvidia-smi said:\n" + done.stdout.rstrip() + (done.stderr and "\n" + done.stderr))
    if not ctx.cpu:
        table = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60)
        (ctx.out / "nvidia-smi.txt").write_text(table.stdout + table.stderr)
    return done.stdout


def run(ctx: Context, step: Step) -> None:
    gpus = _gpus.parse_smi(record_smi(ctx, step))
    free = sorted((g for g in gpus if g.used_mib <= _gpus.BUSY_MIB), key=lambda g: g.index)
    step.numbers.update(gpus=len(gpus), free=len(free), names=sorted({g.name for g in gpus}))
    if not step.check(bool(free), "nvidia-smi lists a free GPU", f"{len(free)} of {len(gpus)}"):
        return
    env = dict(ctx.env, RGT_GPU_LOCK_DIR=str(ctx.work / "locks-assign"))
    count, first = len(gpus), free[0]
    said = refused(ctx, step, "gc-too-many", str(count + 1), env)
    expect = f"--gpus {count + 1}: {len(free)} of this machine's {count} GPU(s) free"
    step.check(expect in said, f"a) --gpus {count + 1} refused with the free count", said)
    holder = one_gpu(ctx, step, env, first)
    said = refused(ctx, step, "gc-all-b", str(len(free)), env)
    expect = f"{len(free) - 1} of this machine's {count} GPU(s) free"
    holds = f"job gc-hold-a holds GPU {first.index}"
    step.check(
        expect in said and holds in said, f"c) --gpus {len(free)} refused, holder named", said
    )
    stale_lock(ctx, step, env, holder, free)


def one_gpu(ctx: Context, step: Step, env: dict[str, str], first: _gpus.Gpu) -> AgentJob:
    job = hold(ctx, "gc-hold-a", "1", env, probe=not ctx.cpu)
    given = job.wait_file("outputs/cuda.txt", step.deadline).read_text()
    want = f"{first.index}|PCI_BUS_ID"
    step.check(given == want, "b) --gpus 1: CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER", given)
    assigned = [e["detail"] for e in job.events("gpus_assigned")]
    uuids = assigned[0].get("uuids") if assigned else None
    step.check(uuids == [first.uuid], "b) the agent's gpus_assigned event names that card", uuids)
    if not ctx.cpu:
        seen = json.loads(job.wait_file("outputs/torch.json", step.deadline).read_text())
        step.check(seen["device_count"] == 1, "b) CUDA in the job sees one device", seen)
        match = [UUID.search(u.lower()) for u in seen["uuids"]]
        theirs = [m.group(0) for m in match if m]
        same = theirs == [first.uuid.lower().removeprefix("gpu-")]
        step.check(same or not theirs, "b) it is the assigned card (UUID)", theirs or "no UUID")
    return job


def stale_lock(
    ctx: Context, step: Step, env: dict[str, str], holder: AgentJob, free: list[_gpus.Gpu]
) -> None:
    trainer = int(
        holder.wait_for("a pid", lambda s: s.get("pid") is not None, step.deadline)["pid"]
    )
    holder.kill_agent()
    step.check(not process_gone(trainer), "d) kill -9 of A's agent leaves A's job running")
    said = refused(ctx, step, "gc-all-c", str(len(free)), env)
    step.check("job gc-hold-a holds GPU" in said, "d) so its GPU stays held", said)
    os.killpg(trainer, signal.SIGKILL)
    while not process_gone(trainer) and time.monotonic() < step.deadline:
        time.sleep(0.02)
    step.note(f"lock file with A gone: {_holders(env)}")
    job = hold(ctx, "gc-all-d", str(len(free)), env, probe=False)
    given = job.wait_file("outputs/cuda.txt", step.deadline).read_text()
    want = ",".join(str(g.index) for g in free) + "|PCI_BUS_ID"
    step.check(given == want, f"e) A's stale hold reclaimed: --gpus {len(free)} gets", given)
    state = job.stop_hold(step.deadline).get("state")
    left = _holders(env)
    step.check(state == "succeeded" and left == [], "e) released when the job ended", left)


def hold(ctx: Context, job_id: str, gpus: str, env: dict[str, str], probe: bool) -> AgentJob:
    job = AgentJob(ctx.pyz, ctx.work / "assign" / job_id, job_id)
    ctx.jobs.append(job)
    spec_env = {"GC_TORCH_PROBE": "1"} if probe else {}
    return job.write(["hold.py"], [sys.executable, "hold.py"], gpus=gpus, env=spec_env).start(env)


def refused(ctx: Context, step: Step, job_id: str, gpus: str, env: dict[str, str]) -> str:
    """The reason a job that asked for ``gpus`` was refused (or why it was not)."""
    job = hold(ctx, job_id, gpus, env, probe=False)
    status = job.ended(step.deadline)
    started = (job.dir / "outputs" / "cuda.txt").exists()
    if status.get("state") != "failed" or started:
        return f"NOT refused: state {status.get('state')}, job started: {started}"
    return str(status.get("reason"))


def _holders(env: dict[str, str]) -> list[str]:
    path = Path(env["RGT_GPU_LOCK_DIR"]) / _gpus.LOCK_FILE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [f"{h.get('job_id')}: GPU {h.get('indices')}" for h in doc.get("holders", [])]

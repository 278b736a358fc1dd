"""Steps 2 and 3: FSDP2 training with rgt's sharded saves, then a rank's ``kill -9`` and resume.

Step 2 runs ``train.py`` under plain ``torchrun`` (NCCL on the GPU; gloo in the dry run): a
save every ``SAVE_EVERY`` steps, the newest three committed steps kept, and at the end the newest
step loaded into a model built from another seed must equal the trained one exactly. That run
is also the uninterrupted reference of step 3.

Step 3 runs the same training as a job of the real agent (``python3 agent.pyz run JOBDIR``,
``--gpus W`` in its spec), ``kill -9``s rank W-1 right after step ``KILL_AT`` is committed, and
checks the agent's verdict (``preempted``, retryable, the rank named, no OOM evidence), that
attempt 2 resumed from ``KILL_AT``, and that every rank's per-step losses and the final weights
equal step 2's, bit for bit (otherwise the largest absolute difference is reported).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _agentjob import AgentJob
from _core import Context, Step, gpu_list, torchrun

from rgt.ckpt import _shards
from rgt.models import RetryPolicy

STEPS, SAVE_EVERY, KILL_AT = 12, 2, 6
FILES = ["train.py", "_model.py"]


def train_env(ctx: Context) -> dict[str, str]:
    return dict(ctx.env, GC_STEPS=str(STEPS), GC_SAVE_EVERY=str(SAVE_EVERY))


def direct(ctx: Context, step: Step) -> None:
    base = ctx.work / "step2"
    env = dict(train_env(ctx), GC_VERIFY="1", RGT_ATTEMPT="1")
    env.update(RGT_OUTPUT_DIR=str(base / "outputs"), RGT_CKPT_DIR=str(base / "ckpt"))
    if not ctx.cpu:
        env["CUDA_VISIBLE_DEVICES"] = gpu_list(ctx.world)
    (base / "outputs").mkdir(parents=True, exist_ok=True)
    code, log = torchrun(step, "train.py", ctx.world, env, base)
    if not step.check(code == 0, f"torchrun of {ctx.world} rank(s) exits 0", code or None):
        ctx.keep_failure(step, "torchrun", log)
        return
    run = read_run(base / "outputs")
    info = json.loads((base / "outputs" / "info.json").read_text())
    step.numbers.update({k: info[k] for k in ("device", "world", "backend", "torch", "cuda")})
    step.numbers["state_mb"] = round(info["state_bytes"] / 1e6, 1)
    step.numbers["params"] = info["params"]
    step.note(f"{info['params']} parameters, {step.numbers['state_mb']} MB with Adam's moments")
    for rank in range(ctx.world):
        got = sorted(run["losses"].get(rank, {}))
        step.check(got == list(range(1, STEPS + 1)), f"rank {rank} logged every step", got)
    committed(step, base / "ckpt", ctx.world)
    saves(step, base / "outputs")
    verify = info.get("verify") or {}
    step.numbers["load_seconds"] = verify.get("load_seconds")
    exact = verify.get("loaded_step") == STEPS and verify.get("max_abs_diff") == 0.0
    step.check(exact and not verify.get("missing"), "the newest step loads back exactly", verify)
    ctx.shared["reference"] = run


def committed(step: Step, ckpt: Path, world: int) -> None:
    infos = _shards.list_committed(str(ckpt))
    steps = [info.step for info in infos]
    want = list(range(STEPS, 0, -SAVE_EVERY))[:3]
    step.check(steps == want, "committed steps (newest three kept)", steps)
    for info in infos:
        ranks = sorted(s.rank for s in info.shards)
        ok = ranks == list(range(world)) and all(os.path.exists(s.path) for s in info.shards)
        sizes = [round(s.bytes / 1e6, 1) for s in info.shards]
        step.check(ok, f"step {info.step}: one shard per rank", f"MB {sizes}")


def saves(step: Step, out: Path) -> None:
    rows = [line.split() for line in (out / "saves-rank0.txt").read_text().splitlines()]
    blocking = [float(row[2]) for row in rows]
    step.numbers["save_blocking_s"] = blocking
    step.note(
        f"rank 0's {len(blocking)} asynchronous saves blocked the loop "
        f"median {statistics.median(blocking):.4f} s, max {max(blocking):.4f} s"
    )


def read_run(out: Path) -> dict[str, Any]:
    """Per-rank ``{step: [(attempt, loss-hex), ...]}``, the resumes, the final digest."""
    losses: dict[int, dict[int, list[tuple[int, str]]]] = {}
    for path in sorted(out.glob("losses-rank*.txt")):
        rank = int(path.stem.removeprefix("losses-rank"))
        for attempt, at, loss in (line.split() for line in path.read_text().splitlines()):
            losses.setdefault(rank, {}).setdefault(int(at), []).append((int(attempt), loss))
    resumes = out / "resumes.txt"
    rows = resumes.read_text().split("\n") if resumes.exists() else []
    final = out / "final.txt"
    return {
        "losses": losses,
        "resumes": [tuple(int(x) for x in row.split()) for row in rows if row.strip()],
        "final": final.read_text().strip() if final.exists() else "",
        "weights": out / "final-weights.pt",
    }


def killed(ctx: Context, step: Step) -> None:
    reference: dict[str, Any] | None = ctx.shared.get("reference")
    if reference is None:  # the kill, the verdict and the resume are still checked
        step.check(False, "step 2's uninterrupted run is the reference (step 2 failed)")
    job = AgentJob(ctx.pyz, ctx.work / "step3", "gc-fsdp-kill")
    ctx.jobs.append(job)
    try:
        judge(ctx, step, job, reference)
    finally:
        keep_evidence(ctx, step, job)


def judge(ctx: Context, step: Step, job: AgentJob, reference: dict[str, Any] | None) -> None:
    pid, killed_at = launch(ctx, step, job)
    status = job.ended(step.deadline)
    step.numbers["kill_to_end_s"] = round(time.monotonic() - killed_at, 2)
    step.check(
        (status.get("state"), status.get("attempt")) == ("succeeded", 2),
        "the job succeeded in attempt 2",
        f"{status.get('state')} in attempt {status.get('attempt')}: {status.get('reason')}",
    )
    verdict(step, job, pid, ctx.world - 1)
    run = read_run(job.dir / "outputs")
    step.check(
        run["resumes"] == [(2, KILL_AT, KILL_AT)],
        "attempt 2 loaded the killed step",
        run["resumes"],
    )
    if reference is not None:
        same(step, run, reference, ctx.world)


def launch(ctx: Context, step: Step, job: AgentJob) -> tuple[int, float]:
    victim = ctx.world - 1
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += [f"--nproc_per_node={ctx.world}", "train.py"]
    spec_env = {"GC_STEPS": str(STEPS), "GC_SAVE_EVERY": str(SAVE_EVERY)}
    spec_env["GC_KILL"] = f"1:{KILL_AT}:{victim}"
    retry = RetryPolicy(max_retries=2, backoff_s=0.5)
    job.write(FILES, command, gpus=str(ctx.world), env=spec_env, retry=retry)
    job.start(dict(ctx.env, RGT_GPU_LOCK_DIR=str(ctx.work / "locks-train")))
    pid = int(job.wait_file("outputs/victim-1.pid", step.deadline).read_text())
    newest = [info.step for info in _shards.list_committed(str(job.dir / "ckpt"))][:1]
    step.check(newest == [KILL_AT], f"step {KILL_AT} committed before the kill", newest)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    step.note(f"kill -9 of rank {victim} (pid {pid}) after committed step {KILL_AT}")
    assigned = [e["detail"].get("indices") for e in job.events("gpus_assigned")]
    step.check(assigned[:1] == [list(range(ctx.world))], "the agent assigned the GPUs", assigned)
    return pid, killed_at


def verdict(step: Step, job: AgentJob, pid: int, victim: int) -> None:
    ended = job.events("attempt_ended")
    detail = ended[0]["detail"] if ended else {}
    label = (detail.get("label"), detail.get("retryable"))
    step.check(label == ("preempted", True), "attempt 1: preempted, retryable", label)
    evidence = detail.get("evidence") or [""]
    named = evidence[0] == f"torchrun: first failing rank {victim}, pid {pid}, killed by SIGKILL"
    step.check(named, "the evidence names the killed rank", evidence)
    oom = " ".join(evidence).lower()
    no_oom = "oom_kill rose" not in oom and "killed process" not in oom
    step.check(no_oom and label[0] != "host_oom", "no OOM evidence, not host_oom")
    first = (detail.get("ranks") or [{}])[0]
    ranks = (first.get("rank"), first.get("signal"), first.get("first"))
    step.check(ranks == (victim, "SIGKILL", True), "ranks[0] is the first failing rank", ranks)
    resuming = [e["detail"] for e in job.events("resuming")]
    at = resuming[0].get("step") if resuming else None
    said = resuming[0].get("said") if resuming else None
    step.check(at == KILL_AT, "the agent's resuming event names the step", said)
    logs = job.dir / "logs" / "attempt-1"
    found = sorted(p.name for p in logs.glob("rank-*.log"))
    want = [f"rank-{rank}.log" for rank in range(victim + 1)]
    step.check(found == want, "attempt 1 kept one log per rank", found)


def same(step: Step, run: dict[str, Any], reference: dict[str, Any], world: int) -> None:
    for rank in range(world):
        got, want = run["losses"].get(rank, {}), reference["losses"].get(rank, {})
        attempts = {s: sorted({a for a, _ in rows}) for s, rows in got.items()}
        expect = {s: [1] if s <= KILL_AT else [2] for s in range(1, STEPS + 1)}
        what = f"rank {rank}: steps 1-{KILL_AT} in attempt 1, the rest in 2"
        step.check(attempts == expect, what, None if attempts == expect else attempts)
        diffs = [
            abs(float.fromhex(loss) - float.fromhex(want[s][0][1]))
            for s, rows in got.items()
            for _, loss in rows
            if s in want
        ]
        worst = max(diffs, default=float("nan"))
        step.numbers[f"loss_max_abs_diff_rank{rank}"] = worst
        what = f"rank {rank}: per-step losses equal the reference's"
        step.check(worst == 0.0, what, f"max |diff| {worst}")
    equal = bool(run["final"]) and run["final"] == reference["final"]
    detail = "SHA-256 equal" if equal else weight_diff(run["weights"], reference["weights"])
    step.check(equal, "final weights and optimizer state equal the reference's", detail)


def weight_diff(ours: Path, theirs: Path) -> str:
    if not (ours.exists() and theirs.exists()):
        return f"missing: {[str(p) for p in (ours, theirs) if not p.exists()]}"
    import torch

    a, b = torch.load(ours), torch.load(theirs)
    diffs = [float((a[k].double() - b[k].double()).abs().max()) for k in b if k in a]
    missing = sorted(set(b) - set(a))
    return f"max |diff| {max(diffs, default=0.0)} over {len(b)} tensors (missing {missing})"


def keep_evidence(ctx: Context, step: Step, job: AgentJob) -> None:
    """The job's events, rank record and agent log to $OUT; its attempts' logs too when the
    step failed (or raised: ``ok`` is still True then, so an unfinished job counts too)."""
    ctx.copy_out(Path(job.paths.events), "step3-events.jsonl")
    ctx.copy_out(job.dir / "logs" / "attempt-1" / "ranks.json", "step3-ranks.json")
    ctx.copy_out(job.dir / "agent.log", "step3-agent.log", limit=256 << 10)
    finished = job.status().get("state") == "succeeded"
    if not (step.ok and finished):
        for log in sorted((job.dir / "logs").glob("attempt-*.log")):
            ctx.keep_failure(step, f"the job's {log.stem}", log)

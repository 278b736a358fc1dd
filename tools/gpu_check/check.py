"""The device check of issue 35, run by ``tools/gpu_check/run.sh`` (read its header first).

Steps, each timed, each with its own time budget and a PASS/FAIL line with the evidence:

1. GPU assignment by the agent on this machine's nvidia-smi (``step_assign``);
2. FSDP2 training with rgt's sharded saves under torchrun (``step_train.direct``);
3. ``kill -9`` of a rank under the real agent, the verdict and an exact resume
   (``step_train.killed``);
4. for information: the save's blocking time, rgt vs ``dcp.async_save`` (``step_bench``).

``--cpu``: the dry run that keeps this script from rotting (gloo, CPU tensors, FSDP2 on the
CPU, two ranks, a tiny model, a recorded nvidia-smi answer on PATH). The human log is this
process's output (run.sh copies it to ``$OUT/gpu_check.log``); ``$OUT/summary.json`` holds the
same verdicts and numbers. Exit code 0 only if every step passed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from _core import ROOT, Context, Step, say

sys.path.insert(0, str(ROOT / "src"))

import step_assign
import step_bench
import step_train
from _agentjob import fake_nvidia_smi

from rgt.agent import _gpus
from rgt.agent.build import build_agent

SMI_DIRS = ("/usr/local/nvidia/bin", "/usr/bin", "/usr/local/bin", "/opt/nvidia/bin")
GOLDEN = ROOT / "tests" / "golden" / "nvidia-smi"
RECORDINGS = ("2xrtx4090", "1xh100")  # the dry run's nvidia-smi: two cards, or the device's one
Body = Callable[[Context, Step], None]
STEPS: list[tuple[str, float, Body]] = [
    ("GPU assignment by the agent on nvidia-smi", 75, step_assign.run),
    ("FSDP2 training with sharded saves under torchrun", 120, step_train.direct),
    ("kill -9 of a rank under the agent, verdict and exact resume", 180, step_train.killed),
    ("for information: save blocking time, rgt vs dcp.async_save", 100, step_bench.run),
]
SIZES = {False: {"GC_DIM": "512", "GC_BLOCKS": "4", "GC_BATCH": "64"},
         True: {"GC_DIM": "64", "GC_BLOCKS": "2", "GC_BATCH": "16"}}  # fmt: skip


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="the dry run: gloo, CPU, fake smi")
    parser.add_argument(
        "--smi", choices=RECORDINGS, default=RECORDINGS[0], help="the dry run's recorded GPUs"
    )
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu_check_out")
    parser.add_argument(
        "--work",
        default=os.environ.get("GC_WORK"),
        help="scratch directory (kept); default: "
        "a new one under $TMPDIR, removed when every step passed",
    )
    parser.add_argument("--steps", default="1,2,3,4", help="which steps, e.g. 1,2")
    return parser.parse_args(argv)


def context(args: argparse.Namespace) -> Context:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu_check-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = environment(args.cpu, work)
    if args.cpu:
        fake_nvidia_smi(work / "bin")
        env["PATH"] = f"{work / 'bin'}{os.pathsep}{env['PATH']}"
        env["FAKE_NVIDIA_SMI_OUTPUT"] = str(recording(args.smi, work / "bin"))
    os.environ["RGT_HOME"] = env["RGT_HOME"]  # build_agent reads the user's learned rules
    pyz = build_agent(work / "agent")
    return Context(args.cpu, out, work, env, pyz, world=gpu_world(env))


def recording(name: str, where: Path) -> Path:
    """A recorded answer to the agent's query: the two RTX 4090s of query-2xrtx4090.csv, or the
    one H100 of h100-idle.csv (a real capture with units and more columns) in the query's form."""
    if name == "2xrtx4090":
        return GOLDEN / "query-2xrtx4090.csv"
    header, *rows = (GOLDEN / "h100-idle.csv").read_text().splitlines()
    names = [cell.strip().split(" [")[0] for cell in header.split(",")]
    wanted = _gpus.QUERY.split(",")
    lines = []
    for row in rows:
        cells = dict(
            zip(names, (c.strip().removesuffix(" MiB") for c in row.split(",")), strict=True)
        )
        lines.append(", ".join(cells[key] for key in wanted))
    path = where / "query-1xh100.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def environment(cpu: bool, work: Path) -> dict[str, str]:
    """What every process of the check gets: src/ on the path, cuBLAS's deterministic
    workspace, the model's size, an RGT_HOME of its own, and nvidia-smi (or the recording)."""
    src = str(ROOT / "src")
    env = dict(os.environ, PYTHONUNBUFFERED="1", CUBLAS_WORKSPACE_CONFIG=":4096:8")
    env.update(SIZES[cpu], OMP_NUM_THREADS="1", RGT_HOME=str(work / "home"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    env["GC_DEVICE"] = "cpu" if cpu else "cuda"
    if not cpu:  # nvidia-smi's numbering, as the agent gives its jobs: steps 2 and 4 use it too
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if not cpu and shutil.which("nvidia-smi", path=env["PATH"]) is None:
        found = [d for d in SMI_DIRS if os.access(os.path.join(d, "nvidia-smi"), os.X_OK)]
        env["PATH"] = os.pathsep.join([*found[:1], env["PATH"]])  # the agent looks on PATH
    return env


def gpu_world(env: dict[str, str]) -> int:
    """Two ranks where the machine has two free GPUs (NCCL takes one GPU per rank), else one;
    in the dry run, where the recording shows two."""
    argv = ["nvidia-smi", "--query-gpu=" + _gpus.QUERY, "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return 1  # step 1 says what is wrong with nvidia-smi
    gpus = _gpus.parse_smi(done.stdout) if done.returncode == 0 else []
    return 2 if sum(g.used_mib <= _gpus.BUSY_MIB for g in gpus) >= 2 else 1


def header(ctx: Context) -> dict[str, object]:
    facts: dict[str, object] = {
        "mode": "cpu dry run (gloo, CPU tensors, a recorded nvidia-smi)" if ctx.cpu else "gpu",
        "world": ctx.world,
        "smi": ctx.env.get("FAKE_NVIDIA_SMI_OUTPUT")
        or shutil.which("nvidia-smi", path=ctx.env["PATH"]),
        "python": f"{sys.executable} {platform.python_version()}",
        "torch": _version("torch"),
        "xxhash": _version("xxhash"),
        "host": f"{platform.node()} {platform.release()}",
        "agent": ctx.pyz.name,
        "work": str(ctx.work),
        "out": str(ctx.out),
    }
    say("=== rgt GPU check (issue 35) " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    for key, value in facts.items():
        say(f"    {key:7} {value}")
    return facts


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


class Stopped(BaseException):
    """SIGTERM (run.sh's overall time limit): the running step's finally still cleans up."""


def _stop(signum: int, frame: object) -> None:
    raise Stopped(f"signal {signum}: the overall time limit (GC_TOTAL_S) ran out")


def run_step(ctx: Context, steps: list[Step], number: int, title: str, budget: float) -> None:
    body = STEPS[number - 1][2]
    step = Step(number, title, budget)
    steps.append(step)
    say(f"\n[{number}/{len(STEPS)}] {title} (budget {budget:.0f} s)")
    try:
        body(ctx, step)
    except Exception:  # a step's crash is its FAIL, with the traceback as evidence
        step.check(False, "the step raised", traceback.format_exc(limit=6).rstrip())
        for job in ctx.jobs:
            ctx.keep_failure(step, f"the agent of {job.job_id}", job.dir / "agent.log")
    finally:
        for job in ctx.jobs:
            job.cleanup()
        ctx.jobs.clear()
    verdict = "PASS" if step.ok else "FAIL"
    say(f"[{number}/{len(STEPS)}] {verdict}  {title}  ({step.seconds():.1f} s)")


def main(argv: list[str]) -> int:
    args = parse(argv)
    started = time.monotonic()
    signal.signal(signal.SIGTERM, _stop)
    ctx = context(args)
    facts = header(ctx)
    chosen = {int(n) for n in args.steps.split(",")}
    steps: list[Step] = []
    try:
        for number, (title, budget, _) in enumerate(STEPS, start=1):
            if number in chosen:
                run_step(ctx, steps, number, title, budget)
    except Stopped as stop:
        steps[-1].check(False, "STOPPED", str(stop))
    ok = bool(steps) and all(step.ok for step in steps)
    summarize(ctx, dict(facts, ok=ok, seconds=round(time.monotonic() - started, 1)), steps)
    if ok and not args.work:
        shutil.rmtree(ctx.work, ignore_errors=True)
    else:
        say(f"    scratch kept: {ctx.work}")
    return 0 if ok else 1


def summarize(ctx: Context, summary: dict[str, object], steps: list[Step]) -> None:
    summary["steps"] = [step.to_json() for step in steps]
    (ctx.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    verdict = "PASS" if summary["ok"] else "FAIL"
    passed = sum(s.ok for s in steps)
    say(f"\n=== RESULT: {verdict}  ({passed}/{len(steps)} steps, {summary['seconds']} s)")
    for step in steps:
        say(f"    step {step.number}: {'PASS' if step.ok else 'FAIL'}  {step.title}")
    say(f"    files in {ctx.out}: {', '.join(sorted(p.name for p in ctx.out.iterdir()))}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

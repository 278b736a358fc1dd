"""`rgt smoke`: the cheap check before the expensive compute (invariant 3).

The command runs here on the CPU, in a temporary copy of the files `rgt run` would ship (the
user's working tree is never written), with ``RGT_SMOKE=1`` and private ``RGT_CKPT_DIR`` /
``RGT_OUTPUT_DIR``. Two kinds of scripts:

* **rgt.ckpt scripts** honour ``RGT_SMOKE`` (two batches, a checkpoint every step) and end by
  themselves. Then a second run is killed with SIGKILL right after its first committed
  checkpoint and started once more; if it ends in the same training state (the digest over
  every tensor and RNG state) as the uninterrupted run, resume is *exact*.
* **any other script** is watched (``_smoke_watch``): it is killed with SIGKILL once its first
  complete checkpoint appears (``--ckpt GLOB``, or anything in ``RGT_CKPT_DIR``), or after
  ``--kill-after-seconds`` / ``--kill-after-lines`` of progress when it ignores ``RGT_SMOKE``.
  Then its resume form (``--resume-with``, as the agent would run it) starts in the same copy,
  and smoke reports whether it *continued* from the checkpoint's step (read from the checkpoint
  where the format allows, ``_smoke_step``) or started over.

"resume: not checked" only when there was nothing to check (no checkpoint appeared, or no step
could be read), and the verdict says how to enable the check.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rgt.errors import JobError
from rgt.smoke._diff import explain
from rgt.smoke._input import input_reading
from rgt.smoke._step import StepReading, checkpoint_step, log_steps
from rgt.smoke._verdict import (
    ResumeVerdict,
    SmokeOptions,
    SmokeResult,
    SmokeRun,
    continuation,
    not_checked,
    nothing_to_check,
    result,
)
from rgt.smoke._watch import Limits, Watch, Watched

__all__ = ["Limits", "SmokeOptions", "SmokeResult", "SmokeRun", "run_once", "smoke"]

SMOKE_ENV = {
    "RGT_SMOKE": "1",
    "CUDA_VISIBLE_DEVICES": "",  # the smoke run is a CPU run, even on a GPU box
    "WANDB_MODE": "disabled",
    "WANDB_DISABLED": "true",
    "HF_HUB_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}


def run_once(
    command: Sequence[str],
    cwd: Path,
    ckpt_dir: Path,
    *,
    kill_after_save: int | None,
    timeout: float,
    extra_env: dict[str, str] | None = None,
) -> SmokeRun:
    from rgt.ckpt import Checkpointer

    env = {
        **os.environ,
        **SMOKE_ENV,
        "RGT_CKPT_DIR": str(ckpt_dir),
        "RGT_OUTPUT_DIR": str(ckpt_dir.parent / "outputs"),
        **(extra_env or {}),
    }
    env.pop("RGT_SMOKE_KILL_AFTER_SAVE", None)
    if kill_after_save is not None:
        env["RGT_SMOKE_KILL_AFTER_SAVE"] = str(kill_after_save)
    try:
        proc = subprocess.run(
            list(command), cwd=cwd, env=env, capture_output=True, timeout=timeout, check=False
        )
    except FileNotFoundError as exc:
        raise JobError(
            f"cannot start {command[0]!r}: {exc.strerror}",
            job_id="smoke",
            label="import_error",
            fix="check the command and its path",
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise JobError(
            f"the smoke run did not finish within {timeout:g}s",
            job_id="smoke",
            fix="in smoke mode (RGT_SMOKE=1) the script should stop after 2 batches",
        ) from exc
    tail = (proc.stdout + proc.stderr).decode("utf-8", "replace")[-4000:]
    info = Checkpointer(str(ckpt_dir)).latest_info()
    return SmokeRun(
        returncode=proc.returncode,
        log_tail=tail,
        step=info.step if info else None,
        state_digest=info.state_digest if info else None,
    )


def smoke(
    command: Sequence[str],
    cwd: Path | None = None,
    *,
    timeout: float = 600,
    options: SmokeOptions | None = None,
) -> SmokeResult:
    options = options or SmokeOptions()
    limits = replace(options.limits, timeout=timeout)
    source = (cwd or Path.cwd()).resolve()
    with tempfile.TemporaryDirectory(prefix="rgt-smoke-") as tmp:
        base = Path(tmp)
        work, copied = copy_tree(source, base / "a" / "work")
        watch = Watch(work, base / "a" / "ckpt", options.ckpt)
        env = smoke_env(base / "a" / "ckpt")
        started = time.time()
        first = watch.run(command, env, base / "a.log", limits, stop_at_checkpoint=True)
        first_run = _as_run(first, base / "a" / "ckpt")
        waits = input_reading(first.log, base / "a" / "outputs")

        def finish(done: SmokeResult) -> SmokeResult:
            return replace(done, input_wait=waits)

        if first.stopped_by == "exit" and first.returncode != 0:
            reason = f"the command failed (exit {first.returncode}) {_label(first_run)}"
            reason += _left_out(first.log, source, work)
            return finish(result(False, reason, copied, first=first_run))
        if first.stopped_by == "exit" and first_run.state_digest and first.ckpt is None:
            return finish(_exact(command, source, base, first_run, timeout, copied))
        found = first.ckpt or _newest(options.ckpt, work, base / "a" / "ckpt", started)
        if found is None:
            return finish(nothing_to_check(first_run, options.ckpt, limits, copied))
        ckpt = _ckpt_step(found, first.log)
        resume_cmd = resume_command(list(command), options.resume_with, found)
        env = {**env, "RGT_RESUME_FROM": found}
        unit = ckpt.unit if ckpt else "step"
        second = watch.run(
            resume_cmd, env, base / "b.log", limits, stop_at_checkpoint=False, stop_at_step=unit
        )
        second_run = _as_run(second, base / "a" / "ckpt")
        done = continuation(first_run, second_run, second, ckpt, found, work, copied, resume_cmd)
        if first.stopped_by == "exit":  # no checkpoint was seen while it ran
            done = replace(done, reason=done.reason + ENDED_FIRST)
        return finish(done)


def copy_tree(source: Path, dest: Path) -> tuple[Path, int]:
    """A writable copy of what `rgt run` would ship from ``source`` (its code snapshot)."""
    from rgt.transport.snapshot import take_snapshot

    snapshot = take_snapshot(source)
    dest.mkdir(parents=True)
    for item in snapshot.files:
        target = dest / item.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / item.rel, target)
    return dest, len(snapshot.files)


def smoke_env(ckpt_dir: Path) -> dict[str, str]:
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    (ckpt_dir.parent / "outputs").mkdir(exist_ok=True)
    env = {**os.environ, **SMOKE_ENV}
    env.update(RGT_CKPT_DIR=str(ckpt_dir), RGT_OUTPUT_DIR=str(ckpt_dir.parent / "outputs"))
    for name in ("RGT_SMOKE_KILL_AFTER_SAVE", "RGT_RESUME_FROM"):
        env.pop(name, None)
    return env


def resume_command(command: list[str], form: str | None, ckpt: str) -> list[str]:
    """The agent's own rule (``rgt.agent._resume``), so smoke checks what a restart runs."""
    from rgt.agent._resume import resume_command as agent_form

    return agent_form(command, form, ckpt) if form else command


def _newest(glob: str | None, work: Path, ckpt_dir: Path, since: float) -> str | None:
    from rgt.agent._ckpt_find import framework_newest, newest

    dirs = [("work", str(work)), ("ckpt_dir", str(ckpt_dir))]
    found = newest(glob, dirs if glob else dirs[1:], since).path
    return found or (None if glob else framework_newest(str(work), since)[0].path)


def _ckpt_step(found: str, first_log: str) -> StepReading | None:
    reading = checkpoint_step(found)
    if reading is None:
        steps = log_steps(first_log)
        reading = StepReading(steps[-1], "log: last step before the kill") if steps else None
    return reading


def _exact(
    command: Sequence[str],
    source: Path,
    base: Path,
    first: SmokeRun,
    timeout: float,
    copied: int,
) -> SmokeResult:
    work, _ = copy_tree(source, base / "b" / "work")
    ckpt_b = base / "b" / "ckpt"
    killed = run_once(command, work, ckpt_b, kill_after_save=1, timeout=timeout)
    if killed.returncode != -signal.SIGKILL:
        reason = (
            "the run ended before its first checkpoint was committed, so it could not be "
            "killed after one"
        )
        verdict = not_checked(reason, "save a checkpoint before the run ends (rgt.ckpt)")
        return result(True, reason, copied, verdict, first=first, killed=killed)
    resumed = run_once(command, work, ckpt_b, kill_after_save=None, timeout=timeout)
    if resumed.returncode != 0:
        reason = f"the resumed run failed (exit {resumed.returncode}) {_label(resumed)}"
        verdict = ResumeVerdict(True, False, False, resumed_step=resumed.step)
        return result(False, reason, copied, verdict, first, killed, resumed)
    exact = resumed.state_digest == first.state_digest and resumed.step == first.step
    reason = (
        "the resumed run reached the same training state as the uninterrupted one"
        if exact
        else "the resumed run's final state differs from the uninterrupted "
        "run's: something (RNG, data order, optimizer or scheduler state) is not restored"
    )
    differs = None if exact else explain(base / "a" / "ckpt", ckpt_b, command, source)
    if differs is not None:
        reason += "; " + differs.sentence()
    verdict = ResumeVerdict(
        True,
        exact,
        exact,
        ckpt_step=killed.step,
        step_source="rgt.ckpt record",
        resumed_step=resumed.step,
        first_difference=differs.first if differs else None,
        likely_causes=list(differs.causes) if differs else None,
    )
    return result(exact, reason, copied, verdict, first, killed, resumed)


def _as_run(watched: Watched, ckpt_dir: Path) -> SmokeRun:
    from rgt.ckpt import Checkpointer

    info = Checkpointer(str(ckpt_dir)).latest_info()
    return SmokeRun(
        returncode=watched.returncode,
        log_tail=watched.log[-4000:],
        step=info.step if info else None,
        state_digest=info.state_digest if info else None,
        stopped_by=watched.stopped_by,
    )


ENDED_FIRST = (
    " (note: the first run ended by itself before smoke saw a checkpoint mid-run; if the script "
    "saves only when it ends, a kill loses everything: save periodically)"
)
MISSING_RE = re.compile(r"No such file or directory: '([^']+)'")


def _left_out(log: str, source: Path, work: Path) -> str:
    """A file the script could not open that is in the user's tree but not in the copy: the
    ignore rules left it out of what `rgt run` ships, so the machine would miss it too."""
    for name in MISSING_RE.findall(log):
        rel = Path(name)
        rel = rel.relative_to(work) if rel.is_absolute() and rel.is_relative_to(work) else rel
        if not rel.is_absolute() and (source / rel).exists():
            return (
                f"; {rel} is in your tree but not in what `rgt run` ships (.gitignore or "
                ".rgtignore leaves it out): push it as data, or stop ignoring it"
            )
    return ""


def _label(run: SmokeRun) -> str:
    from rgt.triage import classify

    verdict = classify(run.log_tail, exit_code=run.returncode, signal=None, context=None)
    return f"[{verdict.label}: {verdict.remedy}]"

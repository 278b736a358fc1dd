"""`rgt smoke`: the cheap check before the expensive compute (invariant 3).

The training command runs here on the CPU with ``RGT_SMOKE=1`` (the script trains two batches,
loggers off, and rgt.ckpt checkpoints every step). Then it runs again, is killed with SIGKILL
right after its first committed checkpoint, and is started once more with the same command and
checkpoint directory. If the resumed run ends in the same training state (the SHA-256 over every
tensor and RNG state) as the uninterrupted one, resume works. Import errors, config typos, shape
bugs and a broken resume all show up here, before a GPU hour is billed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rgt.errors import JobError

SMOKE_ENV = {
    "RGT_SMOKE": "1",
    "CUDA_VISIBLE_DEVICES": "",  # the smoke run is a CPU run, even on a GPU box
    "WANDB_MODE": "disabled",
    "WANDB_DISABLED": "true",
    "HF_HUB_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True)
class SmokeRun:
    returncode: int
    log_tail: str
    step: int | None
    state_digest: str | None


@dataclass(frozen=True)
class SmokeResult:
    ok: bool
    exact_resume: bool | None  # None: the resume could not be exercised (see reason)
    reason: str
    uninterrupted: SmokeRun
    killed: SmokeRun | None
    resumed: SmokeRun | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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


def smoke(command: Sequence[str], cwd: Path | None = None, *, timeout: float = 600) -> SmokeResult:
    cwd = cwd or Path.cwd()
    with tempfile.TemporaryDirectory(prefix="rgt-smoke-") as tmp:
        base = Path(tmp)
        first = run_once(command, cwd, base / "a" / "ckpt", kill_after_save=None, timeout=timeout)
        if first.returncode != 0:
            return _failed(first, f"the command failed (exit {first.returncode}) {_label(first)}")
        if first.state_digest is None:
            return SmokeResult(
                True,
                None,
                "the command wrote no checkpoint through rgt.ckpt, so resume could not be checked",
                first,
                None,
                None,
            )
        ckpt_b = base / "b" / "ckpt"
        killed = run_once(command, cwd, ckpt_b, kill_after_save=1, timeout=timeout)
        if killed.returncode != -signal.SIGKILL:
            return SmokeResult(
                True,
                None,
                "the run ended before its first checkpoint was "
                "committed, so it could not be killed after one",
                first,
                killed,
                None,
            )
        resumed = run_once(command, cwd, ckpt_b, kill_after_save=None, timeout=timeout)
    if resumed.returncode != 0:
        return SmokeResult(
            False,
            False,
            f"the resumed run failed (exit {resumed.returncode}) {_label(resumed)}",
            first,
            killed,
            resumed,
        )
    exact = resumed.state_digest == first.state_digest and resumed.step == first.step
    reason = (
        "the resumed run reached the same training state as the uninterrupted one"
        if exact
        else "the resumed run's final state differs from the uninterrupted "
        "run's: something (RNG, data order, optimizer or scheduler state) is not restored"
    )
    return SmokeResult(exact, exact, reason, first, killed, resumed)


def _failed(run: SmokeRun, reason: str) -> SmokeResult:
    return SmokeResult(False, None, reason, run, None, None)


def _label(run: SmokeRun) -> str:
    from rgt.triage import classify

    verdict = classify(run.log_tail, exit_code=run.returncode, signal=None, context=None)
    return f"[{verdict.label}: {verdict.remedy}]"

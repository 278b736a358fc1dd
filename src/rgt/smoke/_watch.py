"""One smoke run of a script that may not cooperate: watch it, and stop it when enough is seen.

The script runs in its own session with its output in a file (never a pipe it could block on).
It is killed with SIGKILL, like a preemption, at the first of:

* ``checkpoint``: its first complete checkpoint appeared (``--ckpt`` in the copy's directory,
  or anything in ``RGT_CKPT_DIR`` that is not an rgt.ckpt commit: rgt.ckpt scripts honour
  ``RGT_SMOKE`` and are checked for exact resume instead);
* ``step_seen``: (a resumed run) it logged its first step;
* ``seconds`` / ``lines``: it ran this long, or printed this many lines, without either: a
  script that ignores ``RGT_SMOKE`` is stopped after this much progress.

A run that outlives ``timeout`` is killed and reported as a smoke failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rgt.agent import _ckpt_find
from rgt.errors import JobError
from rgt.smoke import _step as _smoke_step

POLL_S = 0.1
SETTLE_S = 0.3  # a checkpoint's size must hold still this long before it counts
SEEN_S = 1.0


@dataclass(frozen=True)
class Limits:
    seconds: float = 120.0
    lines: int = 2000
    timeout: float = 600.0


@dataclass(frozen=True)
class Watched:
    returncode: int
    stopped_by: str  # exit · checkpoint · step_seen · seconds · lines
    log: str
    ckpt: str | None  # the checkpoint that stopped it


class Watch:
    def __init__(self, cwd: Path, ckpt_dir: Path, ckpt_glob: str | None) -> None:
        self.cwd, self.ckpt_dir, self.ckpt_glob = cwd, ckpt_dir, ckpt_glob

    def run(
        self,
        command: Sequence[str],
        env: dict[str, str],
        log_path: Path,
        limits: Limits,
        *,
        stop_at_checkpoint: bool,
        stop_at_step: str | None = None,
    ) -> Watched:
        """``stop_at_step``: the unit (``step``/``epoch``) whose first log line stops the run."""
        started = time.time()
        with open(log_path, "wb") as log_file:
            proc = _start(command, self.cwd, env, log_file)
        settle = _Settle()
        try:
            while proc.poll() is None:
                time.sleep(POLL_S)
                text = _read(log_path)
                reason, ckpt = _reason(text, started, limits, stop_at_step), None
                if reason is None and stop_at_checkpoint:
                    ckpt = settle.check(self.newest(started))
                    reason = "checkpoint" if ckpt else None
                if reason is not None:
                    _kill(proc)
                    return Watched(proc.returncode, reason, _read(log_path), ckpt)
        finally:
            if proc.poll() is None:
                _kill(proc)
        return Watched(proc.returncode, "exit", _read(log_path), None)

    def newest(self, since: float | None) -> str | None:
        """The newest complete checkpoint the run wrote (rgt.ckpt commits excluded when no
        glob is given: those are checked for exact resume); without a glob, what it put in
        RGT_CKPT_DIR, else where its framework writes by default (Lightning, HF Trainer,
        accelerate: ``_ckpt_find.FRAMEWORK_GLOBS``)."""
        dirs = [("work", str(self.cwd)), ("ckpt_dir", str(self.ckpt_dir))]
        if self.ckpt_glob is not None:
            return _ckpt_find.newest(self.ckpt_glob, dirs, since).path
        if _ckpt_find.rgt_ckpt_newest(str(self.ckpt_dir)):
            return None
        found = _ckpt_find.newest(None, dirs[1:], since).path
        return found or _ckpt_find.framework_newest(str(self.cwd), since)[0].path


def _reason(text: str, started: float, limits: Limits, stop_at_step: str | None) -> str | None:
    elapsed = time.time() - started
    if elapsed > limits.timeout:
        raise JobError(
            f"the smoke run did not end or checkpoint within {limits.timeout:g}s",
            job_id="smoke",
            fix="raise --timeout, or give --ckpt GLOB so smoke can stop it at its first "
            "checkpoint; in smoke mode (RGT_SMOKE=1) a script should stop after 2 batches",
        )
    if stop_at_step and _smoke_step.log_steps(text, stop_at_step):
        return "step_seen"
    if elapsed > limits.seconds:
        return "seconds"
    if text.count("\n") >= limits.lines:
        return "lines"
    return None


class _Settle:
    """When a checkpoint counts: at once when its completeness can be verified (a zip with its
    end record, as torch.save writes; JSON that parses), else once its size and time held still
    SETTLE_S, or after SEEN_S of sightings for a file the script keeps rewriting in place."""

    def __init__(self) -> None:
        self.last: tuple[str, float, float] | None = None  # path, size + mtime, when marked
        self.first_seen: dict[str, float] = {}

    def check(self, found: str | None) -> str | None:
        if found is None:
            return None
        now = time.monotonic()
        first = self.first_seen.setdefault(found, now)
        if _verified(found) or now - first >= SEEN_S:
            return found
        mark = _ckpt_find.newest_mtime(found) + _size(found)
        if self.last is None or self.last[:2] != (found, mark):
            self.last = (found, mark, now)
            return None
        return found if now - self.last[2] >= SETTLE_S else None


def _verified(path: str) -> bool:
    if not os.path.isfile(path):
        return False
    if path.endswith(".json"):
        try:
            with open(path, "rb") as handle:
                json.loads(handle.read())
            return True
        except (OSError, ValueError):
            return False
    with open(path, "rb") as handle:
        return handle.read(2) == b"PK" and _ckpt_find.incomplete(path) is None


def _start(
    command: Sequence[str], cwd: Path, env: dict[str, str], log_file: BinaryIO
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise JobError(
            f"cannot start {command[0]!r}: {exc.strerror}",
            job_id="smoke",
            label="import_error",
            fix="check the command and its path",
        ) from exc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _size(path: str) -> float:
    try:
        return float(os.path.getsize(path))
    except OSError:
        return 0.0


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")

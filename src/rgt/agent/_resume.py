"""Which command a (re)started attempt runs: the job's own, or its resume form.

A script that was not written for rgt resumes only when told to (nanoGPT's
``--init_from=resume``, the Hugging Face examples' ``--resume_from_checkpoint DIR``). The spec's
``resume`` field (``{"with": ARGS or COMMAND, "ckpt": GLOB}``, see ``rgt.jobs.resume_form``)
says how. At a restart the agent looks for the newest complete checkpoint and, when one exists,
runs the resume form with ``{ckpt}`` replaced by its path and ``RGT_RESUME_FROM`` set; when
none exists it runs the original command and says, as a warning, that the job restarts from
zero. A first attempt resumes only from checkpoints seeded into ``RGT_CKPT_DIR`` (an earlier
job's), never from files that came with the code snapshot.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Dict, List, Optional, Tuple

from rgt.agent import _ckpt_find

PLACEHOLDER = "{ckpt}"
FROM_ZERO = "restarting from zero: no checkpoint found"


class Choice(object):
    """The command of one attempt and what to tell the user about it (kind None: nothing)."""

    def __init__(
        self,
        command: List[str],
        ckpt: Optional[str] = None,
        kind: Optional[str] = None,
        detail: Optional[Dict[str, Any]] = None,
        next_step: Optional[str] = None,
        severity: str = "info",
    ) -> None:
        self.command = command
        self.ckpt = ckpt
        self.kind = kind
        self.detail = detail or {}
        self.next_step = next_step
        self.severity = severity

    @property
    def env(self) -> Dict[str, str]:
        return {"RGT_RESUME_FROM": self.ckpt} if self.ckpt else {}


def choose(
    spec: Dict[str, Any], attempt: int, cwd: str, ckpt_dir: str, started: Optional[str]
) -> Choice:
    """The command of attempt ``attempt`` run in ``cwd``; ``started`` is when the job's first
    attempt started (files in ``cwd`` older than that came with the code, not from the job)."""
    resume = spec.get("resume") or {}
    command = [str(word) for word in spec["command"]]
    pattern = resume.get("ckpt")
    restart = attempt > 1
    dirs = [("work", cwd), ("ckpt_dir", ckpt_dir)] if restart else [("ckpt_dir", ckpt_dir)]
    found = _ckpt_find.newest(pattern, dirs, _ckpt_find.epoch(started) if restart else None)
    if found.path is None:
        if not restart:
            return Choice(command)
        return _from_zero(command, resume, found, dirs, _ckpt_find.epoch(started))
    form = resume.get("with")
    detail = {
        "ckpt": found.path,
        "found_in": found.where,
        "glob": pattern,
        "form": "resume_with" if form else "same_command",
    }  # type: Dict[str, Any]
    if form:
        command = resume_command(command, str(form), found.path)
        detail["resume_with"] = form
    else:
        detail["why"] = (
            "no --resume-with given: the command runs unchanged and must load the "
            "checkpoint itself (rgt.ckpt does)"
        )
    detail["command"] = command
    said = resumed_from(found.path)
    detail["step"], detail["said"] = said[0], said[1]
    return Choice(command, found.path, "resuming", detail)


def resumed_from(ckpt: str) -> Tuple[Optional[int], str]:
    """The step and the sentence a resumed attempt logs: ``resumed from step 60 (checkpoint
    …/step_60)``; a checkpoint that names no step says so rather than guess one."""
    reading = _ckpt_find.step_of(ckpt)
    if reading is None:
        return None, "resumed from checkpoint %s (its step is not in its name or records)" % ckpt
    unit, number = reading
    return number, "resumed from %s %d (checkpoint %s)" % (unit, number, ckpt)


def resume_command(command: List[str], form: str, ckpt: str) -> List[str]:
    """``form`` starting with ``-`` is ARGS appended to ``command``; else a whole command."""
    words = [word.replace(PLACEHOLDER, ckpt) for word in shlex.split(form)]
    return command + words if form.lstrip().startswith("-") else words


def _from_zero(
    command: List[str],
    resume: Dict[str, Any],
    found: _ckpt_find.Found,
    dirs: List[Any],
    since: Optional[float],
) -> Choice:
    pattern = resume.get("ckpt")
    looked = [path for _, path in dirs]
    detail = {
        "glob": pattern,
        "looked_in": looked,
        "skipped": found.skipped,
        "resume_with": resume.get("with"),
        "command": command,
    }  # type: Dict[str, Any]
    if pattern:
        hint = "--ckpt %s matched no complete checkpoint the job wrote in %s; check the glob" % (
            shlex.quote(str(pattern)),
            " or ".join(looked),
        )
    else:
        hint = (
            "no --ckpt given and RGT_CKPT_DIR is empty: if the script saves elsewhere, "
            "give --ckpt GLOB (and --resume-with) so a restart resumes"
        ) + _framework_hint(dirs, since)
    return Choice(command, None, "restart_from_zero", detail, FROM_ZERO + "; " + hint, "warning")


# The --ckpt that matches a framework's default place (``_ckpt_find.FRAMEWORK_GLOBS``).
FRAMEWORK_CKPT = {
    "lightning": "lightning_logs/version_*/checkpoints/*.ckpt",
    "hf_trainer": "OUTPUT_DIR/checkpoint-*",
    "accelerate": "OUTPUT_DIR/step_*",
}


def _framework_hint(dirs: List[Any], since: Optional[float]) -> str:
    """A checkpoint the job's framework wrote in its default place names the --ckpt to give
    (the agent never resumes from it unasked: only the script knows how to load it)."""
    work = [path for where, path in dirs if where == "work"]
    found, kind = _ckpt_find.framework_newest(work[0], since) if work else (None, None)
    if found is None or found.path is None or kind is None:
        return ""
    return "; the job wrote %s (%s's default place): --ckpt '%s'" % (
        os.path.relpath(found.path, work[0]),
        kind,
        FRAMEWORK_CKPT[kind],
    )


def announce(rec: Any, choice: Choice) -> None:
    if choice.kind is not None:
        rec.event(choice.kind, choice.detail, choice.next_step, severity=choice.severity)


def retry_next_step(choice: Choice) -> str:
    """The ``next`` text of a ``retrying`` event: what the next attempt will really do."""
    if choice.kind == "resuming":
        how = "its resume form" if choice.detail.get("form") == "resume_with" else "its command"
        return "nothing to do: the agent restarts the job with %s from %s" % (how, choice.ckpt)
    return "the agent restarts the job from zero (no checkpoint found); " + str(
        choice.next_step or ""
    ).replace(FROM_ZERO + "; ", "")

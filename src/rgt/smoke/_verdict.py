"""What `rgt smoke` reports: its runs and the resume verdict (the ``--json`` document).

``SmokeResult.to_json()``:

    ok              the command runs, and its resume (when checked) works
    exact_resume    true/false for rgt.ckpt scripts (same final state as an uninterrupted run);
                    null otherwise
    reason          one sentence
    resume          the verdict: ``checked`` (false only when there was nothing to check),
                    ``continued`` (the resumed run started at or after the checkpoint's step),
                    ``exact``, ``ckpt`` (path inside the smoke copy), ``ckpt_step`` and
                    ``step_source`` (``rgt.ckpt record``, ``trainer_state.json``,
                    ``torch:iter_num``…, ``log: last step before the kill``), ``resumed_step``
                    (the first step the resumed run logged), ``command`` (what resumed),
                    ``how_to_enable`` (when not checked: what would make it checkable);
                    when not exact, ``first_difference`` (the first tensor or key of the
                    final states that differs) and ``likely_causes`` (cause, where, fix)
    uninterrupted   the first run: ``returncode``, ``stopped_by`` (exit · checkpoint ·
                    seconds · lines · step_seen), ``step``, ``state_digest``, ``log_tail``
    killed          rgt.ckpt scripts: the run killed after its first commit
    resumed         the run started from the checkpoint
    files_copied    how many files the temporary copy of the working tree holds
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rgt.smoke._step import StepReading, log_steps
from rgt.smoke._watch import Limits, Watched


@dataclass(frozen=True)
class SmokeOptions:
    resume_with: str | None = None  # as `rgt run --resume-with`
    ckpt: str | None = None  # as `rgt run --ckpt`
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class SmokeRun:
    returncode: int
    log_tail: str
    step: int | None
    state_digest: str | None
    stopped_by: str = "exit"


@dataclass(frozen=True)
class ResumeVerdict:
    checked: bool
    continued: bool | None = None
    exact: bool | None = None
    ckpt: str | None = None
    ckpt_step: int | None = None
    step_source: str | None = None
    resumed_step: int | None = None
    command: list[str] | None = None
    how_to_enable: str | None = None
    first_difference: str | None = None  # not exact: the first tensor or key that differs
    likely_causes: list[dict[str, str]] | None = None  # {"cause", "where", "fix"}


@dataclass(frozen=True)
class SmokeResult:
    ok: bool
    exact_resume: bool | None  # None: not an rgt.ckpt exact-resume check (see resume)
    reason: str
    resume: ResumeVerdict
    uninterrupted: SmokeRun | None
    killed: SmokeRun | None = None
    resumed: SmokeRun | None = None
    files_copied: int = 0
    input_wait: dict[str, Any] | None = None  # data wait vs step time, when the run showed it

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


LIGHTNING_RESTORED = "Restored all states from the checkpoint"
HOW_TO_ENABLE = (
    "give --ckpt GLOB where the script writes its checkpoints (e.g. 'out/ckpt.pt') and "
    "--resume-with ARGS that make it load one; or have it save early when RGT_SMOKE=1; or "
    "save with rgt.ckpt (then smoke checks exact resume)"
)


def not_checked(reason: str, how: str) -> ResumeVerdict:
    return ResumeVerdict(False, how_to_enable=f"{reason}: {how}")


def result(
    ok: bool,
    reason: str,
    copied: int,
    verdict: ResumeVerdict | None = None,
    first: SmokeRun | None = None,
    killed: SmokeRun | None = None,
    resumed: SmokeRun | None = None,
) -> SmokeResult:
    verdict = verdict or ResumeVerdict(False)
    exact = verdict.exact if verdict.checked else None
    return SmokeResult(ok, exact, reason, verdict, first, killed, resumed, copied)


def nothing_to_check(first: SmokeRun, glob: str | None, limits: Limits, copied: int) -> SmokeResult:
    if first.stopped_by == "exit":
        why = "the run ended and wrote no checkpoint"
    else:
        why = f"no checkpoint appeared within {limits.seconds:g}s / {limits.lines} lines"
    if glob:
        why += f" (--ckpt {glob!r} matched nothing the run wrote)"
    reason = f"the command runs; resume could not be checked: {why}"
    how = HOW_TO_ENABLE + "; or raise --kill-after-seconds/--kill-after-lines"
    return result(True, reason, copied, not_checked(why, how), first)


def continuation(
    first: SmokeRun,
    second: SmokeRun,
    watched: Watched,
    ckpt: StepReading | None,
    found: str,
    work: Path,
    copied: int,
    command: list[str],
) -> SmokeResult:
    """Did the resumed run start at (or after) the checkpoint's step?"""
    steps = log_steps(watched.log, ckpt.unit if ckpt else "step")
    resumed_step = steps[0] if steps else None
    if ckpt is not None and LIGHTNING_RESTORED in watched.log:
        resumed_step = ckpt.step  # Lightning's own word that fit(ckpt_path=…) loaded it
    base = ResumeVerdict(
        True,
        ckpt=_rel(found, work),
        ckpt_step=ckpt.step if ckpt else None,
        step_source=ckpt.source if ckpt else None,
        resumed_step=resumed_step,
        command=command,
    )
    if watched.stopped_by == "exit" and watched.returncode != 0:
        reason = f"the resumed run failed (exit {watched.returncode})"
        return result(False, reason, copied, _with(base, False), first, None, second)
    why = _unknown(ckpt, resumed_step)
    if why:
        how = "print the step as training goes (e.g. 'step 120: loss 2.1'), or " + HOW_TO_ENABLE
        verdict = _with(base, None, checked=False, how_to_enable=f"{why}: {how}")
        return result(
            True,
            f"the command runs; resume not checked: {why}",
            copied,
            verdict,
            first,
            None,
            second,
        )
    assert ckpt is not None and resumed_step is not None
    if resumed_step >= ckpt.step:
        reason = (
            f"the resumed run continued from the checkpoint: {ckpt.unit} {resumed_step}, "
            f"checkpoint at {ckpt.step} ({ckpt.source})"
        )
        return result(True, reason, copied, _with(base, True), first, None, second)
    reason = (
        f"the resumed run started over at {ckpt.unit} {resumed_step}, but the checkpoint "
        f"{_rel(found, work)} holds {ckpt.step} ({ckpt.source}): the resume form does not "
        f"load it ({resume_hint(found)})"
    )
    return result(False, reason, copied, _with(base, False), first, None, second)


# How each framework's checkpoint is loaded, for a script whose restart ignored it.
RESUME_HINTS = (
    (
        re.compile(r"\.ckpt$"),
        "a Lightning script resumes with trainer.fit(model, ckpt_path=PATH): when it takes "
        "the path as a flag (LightningCLI: --ckpt_path), give --resume-with '--ckpt_path {ckpt}'",
    ),
    (
        re.compile(r"checkpoint-\d+/?$"),
        "the HF Trainer resumes with trainer.train(resume_from_checkpoint=PATH); its example "
        "scripts take --resume-with '--resume_from_checkpoint {ckpt}'",
    ),
    (
        re.compile(r"(step|epoch|checkpoint)_\d+/?$"),
        "accelerate resumes with accelerator.load_state(PATH); its example scripts take "
        "--resume-with '--resume_from_checkpoint {ckpt}'",
    ),
)


def resume_hint(found: str) -> str:
    for pattern, hint in RESUME_HINTS:
        if pattern.search(found):
            return hint
    return "give --resume-with the script's resume flag"


def _unknown(ckpt: StepReading | None, resumed_step: int | None) -> str | None:
    if resumed_step is None:
        return "the resumed run logged no step line"
    if ckpt is None:
        return "no step could be read from the checkpoint or the first run's log"
    if ckpt.step <= 0:
        return "the checkpoint holds step 0, which a restart from zero would also show"
    return None


def _with(base: ResumeVerdict, continued: bool | None, **changes: Any) -> ResumeVerdict:
    from dataclasses import replace

    return replace(base, continued=continued, **changes)


def _rel(path: str, work: Path) -> str:
    try:
        return str(Path(path).relative_to(work))
    except ValueError:
        return path

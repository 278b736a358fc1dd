"""``rgt smoke``: the training command on this machine's CPU in a copy of the tree, killed at
its first checkpoint and resumed (``rgt.smoke.job``), after a lint of its scripts: the smoke may
pass while the run would learn nothing, so a lint bug fails it too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rgt.verbs.tell import QUIET, Tell

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rgt.lint import LintReport
    from rgt.smoke.job import SmokeOptions, SmokeResult


@dataclass(frozen=True)
class Smoked:
    result: SmokeResult
    lint: LintReport | None  # None: not linted, or the command names no script

    @property
    def lint_bugs(self) -> int:
        return self.lint.bugs if self.lint is not None else 0

    @property
    def failed(self) -> bool:
        return not self.result.ok or bool(self.lint_bugs)

    def to_json(self) -> dict[str, Any]:
        from rgt.lint.preflight import summary

        return {**self.result.to_json(), "lint": summary(self.lint)}


def options(
    resume_with: str | None = None,
    ckpt_glob: str | None = None,
    kill_after_seconds: float = 120,
    kill_after_lines: int = 2000,
) -> SmokeOptions:
    """How to resume (as ``rgt run --resume-with/--ckpt``) and when to stop a script that
    ignores RGT_SMOKE."""
    from rgt.jobs.resume_form import resume_spec
    from rgt.smoke.job import Limits, SmokeOptions

    form = resume_spec(resume_with, ckpt_glob) or {}
    limits = Limits(seconds=kill_after_seconds, lines=kill_after_lines)
    return SmokeOptions(form.get("with"), form.get("ckpt"), limits)


def smoke(
    command: Sequence[str],
    how: SmokeOptions,
    timeout: float = 600,
    lint: bool = True,
    tell: Tell = QUIET,
) -> Smoked:
    from rgt.lint.preflight import lines, preflight
    from rgt.smoke.job import smoke as run_smoke

    report = preflight(command) if lint else None
    for line in lines(report):  # lint bugs first: the smoke may pass while the run learns nothing
        tell.warn(line)
    tell.info("smoke: a run in a temporary copy, killed at its first checkpoint, then resumed")
    return Smoked(run_smoke(command, timeout=timeout, options=how), report)

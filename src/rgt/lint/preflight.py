"""Lint before compute: the scripts a job command runs, checked before `rgt smoke` and
`rgt run --lint` spend anything.

``scripts_of(["python", "-u", "train.py", "--lr", "3e-4"])`` finds ``train.py``;
``torchrun --nproc_per_node 8 train.py``, ``accelerate launch train.py`` and
``python -m pkg.train`` (as ``pkg/train.py``) too. Paths are taken relative to ``cwd``; a
command that names no Python file here lints nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rgt.errors import GateRefused
from rgt.lint import LintReport, lint_paths
from rgt.lint._model import Severity


def scripts_of(command: Sequence[str], cwd: Path | None = None) -> list[str]:
    here = cwd or Path.cwd()
    found: list[str] = []
    words = list(command)
    for index, word in enumerate(words):
        if word.endswith((".py", ".ipynb")) and (here / word).is_file():
            found.append(str(here / word))
        elif word == "-m" and index + 1 < len(words):
            module = here.joinpath(*words[index + 1].split("."))
            for candidate in (module.with_suffix(".py"), module / "__main__.py"):
                if candidate.is_file():
                    found.append(str(candidate))
                    break
    return found


def preflight(command: Sequence[str], cwd: Path | None = None) -> LintReport | None:
    """The lint report of the command's scripts (None when it names none)."""
    scripts = scripts_of(command, cwd)
    return lint_paths(scripts) if scripts else None


def summary(report: LintReport | None) -> dict[str, Any] | None:
    """What smoke and run put in their JSON: counts and the findings that are not ``info``
    (advice)."""
    if report is None:
        return None
    data = report.to_json()
    data["findings"] = [f for f in data["findings"] if f["severity"] != Severity.INFO]
    return data


def lines(report: LintReport | None) -> list[str]:
    """One line per bug or warning, for stderr."""
    if report is None:
        return []
    out = []
    for f in report.findings:
        if f.severity != Severity.INFO:
            where = f"cell {f.cell}:" if f.cell else ""
            out.append(f"{f.path}:{where}{f.line}: {f.code} {f.severity}: {f.message}")
    return out


def refuse_on_bugs(report: LintReport | None) -> None:
    """``rgt run --lint``: a lint bug stops the launch before a machine is used (exit 3)."""
    if report is None or not report.bugs:
        return
    raise GateRefused(
        f"rgt lint found {report.bugs} bug(s) in the job's scripts; nothing was launched",
        lines(report),
        fix="fix them (`rgt lint SCRIPT` shows each fix), silence a false one with "
        "`# rgt: noqa CODE`, or launch without --lint",
    )

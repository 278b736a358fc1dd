"""The records of `rgt lint`: a rule, a finding, a file that could not be linted, the report.

Severities: ``bug`` (the run will silently learn the wrong thing or hang: exit 1), ``warning``
(likely wrong, worth a look before renting), ``advice`` (speed or robustness). Precision comes
before recall: a rule fires only on a pattern it can see whole, never on a guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Severity(str, Enum):
    BUG = "bug"
    WARNING = "warning"
    ADVICE = "advice"


@dataclass(frozen=True)
class Rule:
    code: str
    severity: Severity
    name: str
    why: str
    fix: str
    catalog: str  # the failure-catalog id (shared/reference/failure-catalog.md §7)


@dataclass(frozen=True)
class Hit:
    """What a rule saw: its code, the node, and optional words naming the thing."""

    code: str
    node: ast.AST
    detail: str = ""


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int
    rule: Rule
    detail: str = ""
    cell: int | None = None  # the notebook cell (from 1) the line is in

    @property
    def code(self) -> str:
        return self.rule.code

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "cell": self.cell,
            "line": self.line,
            "col": self.col,
            "code": self.rule.code,
            "severity": self.rule.severity.value,
            "name": self.rule.name,
            "why": self.rule.why + (f" ({self.detail})" if self.detail else ""),
            "fix": self.rule.fix,
            "catalog": self.rule.catalog,
        }


@dataclass(frozen=True)
class FileNote:
    """A file that was read but not linted (syntax error, Python 2, too big, generated)."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class LintReport:
    findings: tuple[Finding, ...]
    skipped: tuple[FileNote, ...]
    files: int

    @property
    def bugs(self) -> int:
        return sum(1 for f in self.findings if f.rule.severity is Severity.BUG)

    @property
    def exit_code(self) -> int:
        """1 only when a ``bug`` was found; warnings and advice never fail a run."""
        return 1 if self.bugs else 0

    def counts(self) -> dict[str, int]:
        return {s.value: sum(1 for f in self.findings if f.rule.severity is s) for s in Severity}

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == 0,
            "files": self.files,
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
            "skipped": [n.to_dict() for n in self.skipped],
        }

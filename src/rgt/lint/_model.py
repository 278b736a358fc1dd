"""The records of `rgt lint`: a rule (its catalog entry), what a rule saw, a file that could not be
linted, the report. A finding is rgt's one record, ``rgt.findings.Finding``, built from its rule
by ``lint_finding``: kind = the rule's name, ``code``, severity, message = the rule's why (and
the words naming the thing), ``fix``, ``path``/``line``/``col``/``cell``; its evidence keeps the
rule's failure-catalog id (``catalog``) and those words (``detail``).

Severities, rgt's one scale: ``bug`` (the run will silently learn the wrong thing or hang: exit 1),
``warning`` (likely wrong, worth a look before renting), ``info`` (advice: speed or robustness;
it was printed as ``advice`` before). Precision comes before recall: a rule fires only on a
pattern it can see whole, never on a guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from rgt.findings import Finding, Severity, counts

__all__ = ["FileNote", "Finding", "Hit", "LintReport", "Rule", "Severity", "lint_finding"]


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


def lint_finding(
    path: str, line: int, col: int, rule: Rule, detail: str = "", cell: int | None = None
) -> Finding:
    """The finding of ``rule`` at ``path:line:col`` (``cell``: the notebook cell, from 1)."""
    return Finding(
        kind=rule.name,
        severity=rule.severity.value,
        message=rule.why + (f" ({detail})" if detail else ""),
        evidence={"catalog": rule.catalog, **({"detail": detail} if detail else {})},
        source="rgt lint",
        code=rule.code,
        fix=rule.fix,
        path=path,
        line=line,
        col=col,
        cell=cell,
    )


def detail_of(finding: Finding) -> str:
    """The words naming the thing the rule saw ("" when it named none)."""
    return str(finding.evidence.get("detail", ""))


def finding_json(finding: Finding) -> dict[str, Any]:
    """A finding as `rgt lint --json` prints it (its keys since the first release: ``name`` is
    the finding's kind, ``why`` its message)."""
    return {
        "path": finding.path,
        "cell": finding.cell,
        "line": finding.line,
        "col": finding.col,
        "code": finding.code,
        "severity": finding.severity,
        "name": finding.kind,
        "why": finding.message,
        "fix": finding.fix,
        "catalog": finding.evidence.get("catalog", ""),
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
        return sum(1 for f in self.findings if f.severity == Severity.BUG)

    @property
    def exit_code(self) -> int:
        """1 only when a ``bug`` was found; warnings and info never fail a run."""
        return 1 if self.bugs else 0

    def counts(self) -> dict[str, int]:
        return counts(self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == 0,
            "files": self.files,
            "counts": self.counts(),
            "findings": [finding_json(f) for f in self.findings],
            "skipped": [n.to_dict() for n in self.skipped],
        }

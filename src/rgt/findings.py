"""The one integrity record from VERIFY to DELIVER: what a probe found, and which claims it touches.

Posture (DESIGN.md invariant 5): audit and disclose. A finding never blocks anything; it travels
with the conclusion it affects. Every ``rgt verify … --json`` prints ``{"findings": [...]}`` of
these records, and that document saved as is into a delivery's ``findings/`` folder is what the
disclosure gate (``rgt.deliver.gate``) reads. The JSON form is ``schemas/finding.schema.json``.

``severity`` says how much a finding undermines the conclusion:

    bug      the comparison or number is probably wrong (a smoke run, SSIM > 1, test leakage)
    warning  the conclusion needs a caveat (two config keys changed, a missing validation split)
    info     context a reader should see (accuracy recorded in percent)

Which claims a finding touches: those it names in ``claims``; those whose runs match one of its
``runs`` (a recorded run id, a glob over run ids, or the run's directory as VERIFY named it); and,
when it names neither runs nor claims (leakage of a whole test split), every claim.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

SEVERITIES = ("bug", "warning", "info")
# Severity words of earlier findings files, read as today's.
SEVERITY_ALIASES = {"error": "bug", "critical": "bug", "warn": "warning", "note": "info"}


@dataclass(frozen=True)
class Finding:
    kind: str  # stable machine name: "test_leakage", "zero_spread", "tampered", "stale", ...
    severity: str  # bug | warning | info
    message: str  # one sentence a reader understands without the evidence
    runs: tuple[str, ...] = ()  # run ids, globs over them, or run directories
    evidence: dict[str, Any] = field(default_factory=dict)  # the numbers behind the message
    claims: tuple[str, ...] = ()  # claim ids it touches directly
    resolved: bool = False  # a human has dealt with it
    resolution: str | None = None  # how
    source: str | None = None  # the command that found it, e.g. "rgt verify leakage"

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    @property
    def outstanding(self) -> bool:
        """Unresolved and more than context: what ``rgt deliver gate --strict`` fails on."""
        return not self.resolved and self.severity != "info"

    def touches(self, claim_id: str, run_names: Iterable[str]) -> bool:
        """Does this finding concern the claim ``claim_id``, whose runs are known by
        ``run_names`` (their ids and the directories they were recorded from)?"""
        if claim_id in self.claims:
            return True
        if not self.runs and not self.claims:
            return True
        names = list(run_names)
        return any(run_matches(pattern, name) for pattern in self.runs for name in names)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["runs"], data["claims"] = list(self.runs), list(self.claims)
        return data


def run_matches(pattern: str, name: str) -> bool:
    """A glob over run ids, or the same directory: equal paths, or one path ending with the
    other when the shorter has at least two parts (``runs/a/seed-0`` is ``/w/runs/a/seed-0``;
    a bare ``seed-0`` would match every variant's seed 0, so it must match exactly)."""
    if fnmatch.fnmatchcase(name, pattern):
        return True
    mine, theirs = _parts(pattern), _parts(name)
    short, long = sorted((mine, theirs), key=len)
    return len(short) >= 2 and long[len(long) - len(short) :] == short


def _parts(path: str) -> list[str]:
    return [p for p in posixpath.normpath(path.replace("\\", "/")).split("/") if p not in ("", ".")]


def has_bug(findings: Iterable[Finding]) -> bool:
    return any(f.severity == "bug" for f in findings)


def stamped(findings: Iterable[Finding], source: str) -> list[Finding]:
    """The findings as a command prints them: its name as ``source``, and each run that is a
    directory here named by its absolute path, so the gate matches it from any working dir."""
    return [
        replace(f, source=f.source or source, runs=tuple(_absolute(r) for r in f.runs))
        for f in findings
    ]


def _absolute(run: str) -> str:
    return os.path.abspath(run) if os.path.isdir(run) else run

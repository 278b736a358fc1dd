"""The one finding record of rgt: what VERIFY, DELIVER, `rgt lint` and `rgt audit` found, on one
severity scale, and which claims it touches.

Posture (DESIGN.md invariant 5): audit and disclose. A VERIFY finding never blocks anything; it
travels with the conclusion it affects. Every ``rgt verify … --json`` prints ``{"findings": [...]}``
of these records, and that document saved as is into a delivery's ``findings/`` folder is what the
disclosure gate (``rgt.deliver.gate``) reads. The JSON form is ``schemas/finding.schema.json``.

``severity`` is one scale for every producer (``Severity``):

    bug      the run or the number will be wrong, or the run cannot start: a smoke run compared,
             SSIM > 1, test leakage; softmax into CrossEntropyLoss (`rgt lint` exits 1); no GPU
             visible (`rgt audit`'s gate stops `rgt run`)
    warning  likely wrong, or the conclusion needs a caveat: two config keys changed, a missing
             validation split, a disk 90 % full
    info     context or advice a reader should see: accuracy recorded in percent, a faster
             DataLoader setting, the suggested worker count

Older words are read as today's (``SEVERITY_ALIASES``): ``error``/``critical`` (audit, early
findings files) as bug, ``warn`` as warning, ``advice`` (lint) and ``note`` as info.

Besides the VERIFY fields, a finding may carry ``code`` (what ``rgt explain`` knows it by: a lint
rule such as RGT101, a knowledge entry such as conda_base), ``fix`` (what to do) and a place in
source code (``path``, ``line``, ``col`` from 1, ``cell`` of a notebook); empty means "none".

Which claims a finding touches: those it names in ``claims``; those whose runs match one of its
``runs`` (a recorded run id, a glob over run ids, or the run's directory as VERIFY named it); and,
when it names neither runs nor claims (leakage of a whole test split), every claim.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from rgt.errors import SpecError


class Severity(str, Enum):
    BUG = "bug"
    WARNING = "warning"
    INFO = "info"


SEVERITIES = tuple(s.value for s in Severity)
# Severity words of earlier files and of the producers before they shared this scale.
SEVERITY_ALIASES = {
    "error": "bug",
    "critical": "bug",
    "warn": "warning",
    "note": "info",
    "advice": "info",
}
# The optional fields of lint and audit findings, written to JSON only when set.
_OPTIONAL = ("code", "fix", "path", "line", "col", "cell")


def severity_of(word: Any) -> str | None:
    """Today's word for ``word`` (an old one read through SEVERITY_ALIASES), None if unknown."""
    text = str(word.value if isinstance(word, Severity) else word).lower()
    text = SEVERITY_ALIASES.get(text, text)
    return text if text in SEVERITIES else None


@dataclass(frozen=True)
class Finding:
    kind: str  # stable machine name: "test_leakage", "softmax-into-cross-entropy", "disk", ...
    severity: str  # bug | warning | info
    message: str  # one sentence a reader understands without the evidence
    runs: tuple[str, ...] = ()  # run ids, globs over them, or run directories
    evidence: dict[str, Any] = field(default_factory=dict)  # the numbers behind the message
    claims: tuple[str, ...] = ()  # claim ids it touches directly
    resolved: bool = False  # a human has dealt with it
    resolution: str | None = None  # how
    source: str | None = None  # the command that found it, e.g. "rgt verify leakage"
    code: str = ""  # what `rgt explain` knows it by: RGT101, conda_base
    fix: str = ""  # what to do about it
    path: str = ""  # the source file it is in
    line: int = 0  # from 1 (0: no line)
    col: int = 0  # from 1
    cell: int | None = None  # the notebook cell (from 1) the line is in

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")
        object.__setattr__(self, "severity", Severity(self.severity).value)  # a plain str

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
        data: dict[str, Any] = {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "runs": list(self.runs),
            "evidence": dict(self.evidence),
            "claims": list(self.claims),
            "resolved": self.resolved,
            "resolution": self.resolution,
            "source": self.source,
        }
        for key in _OPTIONAL:
            value = getattr(self, key)
            if value not in ("", 0, None):
                data[key] = value
        return data


def from_json(data: Any, where: str, fix: str | None = None) -> Finding:
    """A finding from its JSON form, and from the older names of its fields: ``probe`` (VERIFY),
    ``check``/``finding``/``explain`` (`rgt audit`) and ``name``/``why`` (`rgt lint`)."""
    kind = _first(data, "kind", "probe", "check", "name") if isinstance(data, Mapping) else None
    if not isinstance(kind, str) or not kind:
        raise SpecError(
            f"{where}: a finding needs a string 'kind'", path=where, field="kind", fix=fix
        )
    return Finding(
        kind=kind,
        severity=_severity(data.get("severity"), where, fix),
        message=str(_first(data, "message", "finding", "why", "detail") or kind),
        runs=_strings(data, "runs", where, fix),
        evidence=_evidence(data, where, fix),
        claims=_strings(data, "claims", where, fix),
        resolved=data.get("resolved") is True,
        resolution=_optional(data.get("resolution")),
        source=_optional(data.get("source")),
        code=str(_first(data, "code", "explain") or ""),
        fix=str(data.get("fix") or ""),
        path=str(data.get("path") or ""),
        line=_number(data, "line", where, fix),
        col=_number(data, "col", where, fix),
        cell=_number(data, "cell", where, fix) or None,
    )


def _first(data: Mapping[str, Any], *keys: str) -> Any:
    return next((data[k] for k in keys if data.get(k) not in (None, "")), None)


def _severity(value: Any, where: str, fix: str | None) -> str:
    word = "warning" if value is None else severity_of(value)
    if word is None:
        raise SpecError(
            f"{where}: severity {value!r} is not one of {', '.join(SEVERITIES)}",
            path=where,
            field="severity",
            fix=fix,
        )
    return word


def _strings(data: Mapping[str, Any], key: str, where: str, fix: str | None) -> tuple[str, ...]:
    value = data.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise SpecError(f"{where}: '{key}' must be a list", path=where, field=key, fix=fix)
    return tuple(str(item) for item in value)


def _evidence(data: Mapping[str, Any], where: str, fix: str | None) -> dict[str, Any]:
    value = data.get("evidence") or {}
    if not isinstance(value, dict):
        raise SpecError(
            f"{where}: 'evidence' must be an object", path=where, field="evidence", fix=fix
        )
    return value


def _number(data: Mapping[str, Any], key: str, where: str, fix: str | None) -> int:
    value = data.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"{where}: '{key}' must be a whole number", path=where, field=key, fix=fix)
    return value


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


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


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """How many of each severity, every severity named (``{"bug": 0, "warning": 2, "info": 1}``)."""
    found = [f.severity for f in findings]
    return {s: found.count(s) for s in SEVERITIES}


def stamped(findings: Iterable[Finding], source: str) -> list[Finding]:
    """The findings as a command prints them: its name as ``source``, and each run that is a
    directory here named by its absolute path, so the gate matches it from any working dir."""
    return [
        replace(f, source=f.source or source, runs=tuple(_absolute(r) for r in f.runs))
        for f in findings
    ]


def _absolute(run: str) -> str:
    return os.path.abspath(run) if os.path.isdir(run) else run

"""Reading a delivery's ``findings/``: the records VERIFY writes (``rgt.findings.Finding``) that
the disclosure gate puts next to the claims they touch (disclose, never enforce).

Each ``findings/*.json`` holds one finding or ``{"findings": [...]}``, which is exactly what
``rgt verify leakage|selection|collapse|compare|tracker --json`` prints: save its stdout there.
The fields (``schemas/finding.schema.json``):

    kind        test_leakage | test_selection | constant_output | tampered | stale | ...
    severity    bug | warning | info (default warning; "error" reads as bug)
    message     what was found, in one sentence
    runs        recorded run ids, fnmatch globs over them, or run directories (see ``touches``)
    claims      (optional) claim ids it touches directly
    evidence    (optional) the numbers behind the message
    resolved    true once a human has dealt with it (default false)
    resolution  (optional) how
    source      (optional) the command that found it, e.g. "rgt verify leakage"

``probe`` (the name VERIFY used before) is read as ``kind``; a finding that names neither runs
nor claims touches every claim. The gate adds its own: runs whose artifacts were not verified
when recorded, stored runs edited after recording, smoke runs cited as evidence, and stale
copies found by reconcile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rgt.deliver.workspace import Workspace
from rgt.errors import SpecError
from rgt.findings import SEVERITIES, SEVERITY_ALIASES, Finding

__all__ = ["Finding", "FindingSet", "load_findings", "parse_finding"]

_FIX = (
    "save the output of `rgt verify … --json` there, or write "
    "{kind, severity, message, runs: [run ids, globs or run directories]} (see rgt.findings)"
)


@dataclass
class FindingSet:
    items: list[Finding] = field(default_factory=list)

    def for_claim(self, claim_id: str, run_names: tuple[str, ...]) -> list[Finding]:
        return [f for f in self.items if f.touches(claim_id, run_names)]


def parse_finding(data: Any, where: str) -> Finding:
    kind = data.get("kind", data.get("probe")) if isinstance(data, dict) else None
    if not isinstance(kind, str) or not kind:
        raise SpecError(
            f"{where}: a finding needs a string 'kind'", path=where, field="kind", fix=_FIX
        )
    return Finding(
        kind=kind,
        severity=_severity(data.get("severity"), where),
        message=str(data.get("message") or data.get("detail") or kind),
        runs=_strings(data, "runs", where),
        evidence=_evidence(data, where),
        claims=_strings(data, "claims", where),
        resolved=data.get("resolved") is True,
        resolution=_optional(data.get("resolution")),
        source=_optional(data.get("source")),
    )


def _severity(value: Any, where: str) -> str:
    if value is None:
        return "warning"
    word = SEVERITY_ALIASES.get(str(value).lower(), str(value).lower())
    if word not in SEVERITIES:
        raise SpecError(
            f"{where}: severity {value!r} is not one of {', '.join(SEVERITIES)}",
            path=where,
            field="severity",
            fix=_FIX,
        )
    return word


def _strings(data: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise SpecError(f"{where}: '{key}' must be a list", path=where, field=key, fix=_FIX)
    return tuple(str(item) for item in value)


def _evidence(data: dict[str, Any], where: str) -> dict[str, Any]:
    value = data.get("evidence") or {}
    if not isinstance(value, dict):
        raise SpecError(f"{where}: 'evidence' must be an object", path=where, field="evidence")
    return value


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


def load_findings(ws: Workspace) -> FindingSet:
    found = FindingSet()
    if not ws.findings.is_dir():
        return found
    for path in sorted(ws.findings.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SpecError(f"{path}: not JSON ({exc})", path=str(path), fix=_FIX) from exc
        items = data.get("findings") if isinstance(data, dict) and "findings" in data else [data]
        if not isinstance(items, list):
            raise SpecError(f"{path}: 'findings' must be a list", path=str(path), fix=_FIX)
        found.items.extend(parse_finding(item, str(path)) for item in items)
    return found

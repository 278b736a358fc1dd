"""Integrity findings that travel with the claims they affect (disclose, never enforce).

VERIFY writes each finding as JSON under the workspace's ``findings/`` folder: one file per
finding, or ``{"findings": [...]}``. Fields:

    kind        leakage | test_selection | collapse | suspect_bug | not_verified | stale | ...
    message     what was found, in one sentence
    runs        recorded run ids or globs over them (fnmatch) the finding touches
    claims      (optional) claim ids it touches directly
    severity    error | warning (default warning)
    resolved    true once a human has dealt with it (default false)
    resolution  (optional) how
    source      (optional) the command that found it, e.g. "rgt verify leakage"

The gate adds its own: runs whose artifacts were not verified when recorded, stored runs edited
after recording, smoke runs cited as evidence, and stale copies found by reconcile.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from rgt.deliver.workspace import Workspace
from rgt.errors import SpecError

KNOWN_KINDS = (
    "leakage",
    "test_selection",
    "collapse",
    "suspect_bug",
    "not_verified",
    "tampered",
    "smoke_run",
    "stale",
)


@dataclass(frozen=True)
class Finding:
    kind: str
    message: str
    runs: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()
    severity: str = "warning"
    resolved: bool = False
    resolution: str | None = None
    source: str | None = None

    def touches(self, claim_id: str, run_ids: tuple[str, ...]) -> bool:
        if claim_id in self.claims:
            return True
        return any(fnmatch.fnmatchcase(r, pattern) for r in run_ids for pattern in self.runs)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["runs"], data["claims"] = list(self.runs), list(self.claims)
        return data


@dataclass
class FindingSet:
    items: list[Finding] = field(default_factory=list)

    def for_claim(self, claim_id: str, run_ids: tuple[str, ...]) -> list[Finding]:
        return [f for f in self.items if f.touches(claim_id, run_ids)]


def parse_finding(data: Any, where: str) -> Finding:
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise SpecError(
            f"{where}: a finding needs a string 'kind'", path=where, field="kind", fix=_FIX
        )
    runs, claims = data.get("runs", []), data.get("claims", [])
    if not isinstance(runs, list) or not isinstance(claims, list):
        raise SpecError(f"{where}: runs and claims must be lists", path=where, field="runs")
    return Finding(
        kind=data["kind"],
        message=str(data.get("message") or data.get("detail") or data["kind"]),
        runs=tuple(str(r) for r in runs),
        claims=tuple(str(c) for c in claims),
        severity=str(data.get("severity", "warning")),
        resolved=bool(data.get("resolved", False)),
        resolution=data.get("resolution"),
        source=data.get("source"),
    )


_FIX = "write findings as {kind, message, runs: [run ids or globs]} (see rgt.deliver.findings)"


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

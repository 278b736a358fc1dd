"""Reading a delivery's ``findings/``: the records VERIFY writes (``rgt.findings.Finding``) that
the disclosure gate puts next to the claims they touch (disclose, never enforce).

Each ``findings/*.json`` holds one finding or ``{"findings": [...]}``, which is exactly what
``rgt verify leakage|selection|collapse|compare|tracker --json`` prints: save its stdout there.
The fields (``schemas/finding.schema.json``):

    kind        test_leakage | test_selection | constant_output | tampered | stale | ...
    severity    bug | warning | info (default warning; older words such as "error" read as
                today's: rgt.findings.SEVERITY_ALIASES)
    message     what was found, in one sentence
    runs        recorded run ids, fnmatch globs over them, or run directories (see ``touches``)
    claims      (optional) claim ids it touches directly
    evidence    (optional) the numbers behind the message
    resolved    true once a human has dealt with it (default false)
    resolution  (optional) how
    source      (optional) the command that found it, e.g. "rgt verify leakage"

``probe`` (the name VERIFY used before) is read as ``kind``, and so are the names `rgt audit` and
`rgt lint` print (``check``/``finding``, ``name``/``why``: ``rgt.findings.from_json``). A finding
that names neither runs nor claims touches every claim. The gate adds its own: runs whose
artifacts were not verified when recorded, stored runs edited after recording, smoke runs cited
as evidence, and stale copies found by reconcile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rgt.deliver.workspace import Workspace
from rgt.errors import SpecError
from rgt.findings import Finding, from_json

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
    return from_json(data, where, fix=_FIX)


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
